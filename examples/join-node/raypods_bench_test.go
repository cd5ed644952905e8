package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/internal/raytest"
)

// podTransferScript is a Ray job that moves an array of 256 MiB from a
// task on one Ray node (by its address) to a task on another, n times, and
// prints the seconds each move took: from the object sealed at its source
// to the consumer's sum of it. The array is what the bare-process
// benchmark moves (rayMeshDriver): the consumer reads it where it landed,
// without a copy. Both tasks run once on a small array first, so no timed
// move waits for a worker process to start.
const podTransferScript = `
import json, time, ray
import numpy as np
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
ray.init()
ids = {n["NodeManagerAddress"]: n["NodeID"] for n in ray.nodes() if n["Alive"]}
src = NodeAffinitySchedulingStrategy(ids[%[1]q], soft=False)
dst = NodeAffinitySchedulingStrategy(ids[%[2]q], soft=False)
@ray.remote(num_cpus=0)
def make(n):
    return np.ones(n, dtype=np.uint8)
@ray.remote(num_cpus=0)
def consume(a):
    return int(a.sum())
assert ray.get(consume.options(scheduling_strategy=dst).remote(make.options(scheduling_strategy=src).remote(1))) == 1
size, seconds = 256 << 20, []
for _ in range(%[3]d):
    ref = make.options(scheduling_strategy=src).remote(size)
    ray.wait([ref], fetch_local=False)
    start = time.perf_counter()
    got = ray.get(consume.options(scheduling_strategy=dst).remote(ref))
    seconds.append(time.perf_counter() - start)
    assert got == size, got
    del ref
print("TRANSFER_SECONDS " + json.dumps(seconds))
`

// transfer runs podTransferScript from a's worker pod to b's, n times,
// and returns the seconds of each move.
func (f *rayPodFleet) transfer(b *testing.B, n int) []float64 {
	b.Helper()
	from, to := f.pods[f.a.hostname].Status.PodIP, f.pods[f.b.hostname].Status.PodIP
	logs, err := raytest.RunJob(raytest.HTTPJSON, f.dashboard, fmt.Sprintf(podTransferScript, from, to, n), 5*time.Minute)
	if err != nil {
		b.Fatalf("the transfer job: %v", err)
	}
	for _, line := range strings.Split(logs, "\n") {
		if rest, ok := strings.CutPrefix(line, "TRANSFER_SECONDS "); ok {
			var seconds []float64
			if err := json.Unmarshal([]byte(rest), &seconds); err != nil {
				b.Fatal(err)
			}
			if len(seconds) != n {
				b.Fatalf("%d transfers timed, want %d: %s", len(seconds), n, rest)
			}
			return seconds
		}
	}
	b.Fatalf("the transfer job printed no times:\n%s", tail(logs, 3000))
	return nil
}

// cpuThrottling sums, over the worker pods of a and b, the CFS periods
// their cgroups ran in and those in which their CPU limit throttled them
// (cgroup v1's cpu.stat of the pod's cgroup, wherever the machine's
// kubelet put it).
func (f *rayPodFleet) cpuThrottling(b *testing.B) (periods, throttled int64) {
	b.Helper()
	uids := map[string]bool{}
	for _, n := range []*node{f.a, f.b} {
		uid := string(f.pods[n.hostname].UID)
		uids["pod"+uid] = true
		uids["pod"+strings.ReplaceAll(uid, "-", "_")+".slice"] = true
	}
	root, err := filepath.EvalSymlinks("/sys/fs/cgroup/cpu") // often a link to cpu,cpuacct
	if err != nil {
		return 0, 0 // not cgroup v1: no figure
	}
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		name := d.Name()
		if i := strings.LastIndex(name, "-pod"); i >= 0 {
			name = name[i+1:]
		}
		if !uids[name] {
			return nil
		}
		raw, err := os.ReadFile(filepath.Join(path, "cpu.stat"))
		if err != nil {
			return filepath.SkipDir
		}
		for _, line := range strings.Split(string(raw), "\n") {
			var v int64
			if _, err := fmt.Sscanf(line, "nr_periods %d", &v); err == nil {
				periods += v
			}
			if _, err := fmt.Sscanf(line, "nr_throttled %d", &v); err == nil {
				throttled += v
			}
		}
		return filepath.SkipDir
	})
	return periods, throttled
}

// BenchmarkRayPodTransfer moves 256 MiB between KubeRay's worker pods on
// two real nodes (a rayPodFleet): Ray's object manager, pod to pod, over
// the machines' direct link and then with their link services hub-only
// (through the master). ns/op is one move; MiB/s its throughput. The
// fleet (three joins, the Ray images imported, the cluster Ready) comes
// first, once:
//
//	sudo go test -run '^$' -bench RayPodTransfer -benchtime 8x ./examples/join-node/
func BenchmarkRayPodTransfer(b *testing.B) {
	if testing.Short() {
		b.Skip("real kubelets, containerd and Ray in pods")
	}
	f := startRayPodFleet(b, "rpt", 54)
	measure := func(b *testing.B) {
		periods, throttled := f.cpuThrottling(b)
		seconds := f.transfer(b, b.N)
		b.StopTimer()
		if p, th := f.cpuThrottling(b); p > periods {
			// The share of CFS periods in which the worker pods' CPU limit
			// held them back: near 1, the move is CPU-bound, not the link's.
			b.ReportMetric(float64(th-throttled)/float64(p-periods), "throttled/period")
		}
		total := 0.0
		for _, s := range seconds {
			total += s
		}
		if total <= 0 {
			b.Fatalf("transfer times %v", seconds)
		}
		b.ReportMetric(total/float64(b.N)*1e9, "ns/op")
		b.ReportMetric(256*float64(b.N)/total, "MiB/s")
	}
	b.Run("direct", measure)
	for _, n := range f.machines() {
		f.services[n.hostname].stop()
		f.services[n.hostname] = n.serve("--hub-only")
	}
	f.waitForLinks(api.LinkRelayed)
	for _, n := range []*node{f.a, f.b} {
		if peers := n.device(); len(peers) != 1 {
			b.Fatalf("hub only, yet %s's device has %d peers", n.hostname, len(peers))
		}
	}
	b.Run("hub", measure)
}
