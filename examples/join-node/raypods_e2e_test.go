package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"gridweave.dev/deploy/rayimage"
	"gridweave.dev/gridweave/api"
	"gridweave.dev/internal/raytest"
	"gridweave.dev/internal/realnode"
	"gridweave.dev/internal/testcluster"
	"gridweave.dev/rayctl/dashboard"
)

// rayPodExtras are what the Ray pods test's images add to rayimage's:
// Debian's CPU build of torch and Ray Train, which KubeTorch's training
// on the worker pods runs.
var rayPodExtras = []string{"torch-cpu"}

// The tags of the Ray pods test's images.
var rayPodHeadTag, rayPodWorkerTag = realnode.RayImageTags(rayPodExtras)

// rayImagesTarball is the tarball a master of the Ray pods test serves as
// its worker image: the pause and test images and both Ray images
// deploy/rayimage builds with rayPodExtras (the head's and the GPU
// workers'), which every machine imports.
func rayImagesTarball(t testing.TB) string {
	t.Helper()
	path, err := realnode.RayImageTarball(context.Background(), "../..", rayPodExtras, nil)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// rayPodFleet is a kubelet-mode master whose worker image holds the Ray
// images and three machines that pasted its join command, linked
// directly: <prefix>-h without GPUs, <prefix>-a and <prefix>-b with one
// each. The server's clusters API made the RayCluster with its head on
// the CPU machine; the GPU machines' registrations gave it a worker
// group. KubeRay's head and worker pods run the built images on the real
// nodes, the workers finding the head by its Service's name through the
// cluster's DNS over their tunnels, and Ray lists all three alive at
// their pod addresses.
type rayPodFleet struct {
	m          *master
	head, a, b *node
	podCIDRs   map[string]netip.Prefix // by machine
	pods       map[string]corev1.Pod   // by machine
	services   map[string]*linkService // by machine
	// dashboard is the head's Ray dashboard, at its pod address (the
	// host reaches pod addresses as the master does: through the
	// tunnels).
	dashboard string
}

// startRayPodFleet makes a rayPodFleet of machines first, first+1 and
// first+2 (newNode's index).
func startRayPodFleet(t testing.TB, prefix string, first int) *rayPodFleet {
	t.Helper()
	ctx := context.Background()
	images := rayImagesTarball(t)
	// The master reaches the head's dashboard (its Ray proxy, KubeTorch)
	// at the head pod's address, once the pod runs, through a forwarder
	// on the host: it stands in for what a user's network does when the
	// head runs elsewhere than on the master (a Service, a route), as the
	// master reaches pod addresses through the tunnels.
	var headDashboard atomic.Pointer[string]
	forwarder := forwardTo(t, "127.0.0.1:0", func() string {
		if p := headDashboard.Load(); p != nil {
			return *p
		}
		return ""
	})
	m := startKubeletMasterWith(t, "WORKER_IMAGE_TAR="+images, "RAY_IMAGE_WORKER="+rayPodWorkerTag, "RAY_IMAGE="+rayPodHeadTag, "RAY_DASHBOARD_URL=http://"+forwarder)
	tc := m.tc
	cordonOtherNodes(t, tc)
	command := m.joinCommand()
	f := &rayPodFleet{m: m, podCIDRs: map[string]netip.Prefix{}}
	f.head = m.newKubeletMachine(first, prefix+"-h", false)
	f.a, f.b = m.newKubeletNode(first+1, prefix+"-a"), m.newKubeletNode(first+2, prefix+"-b")
	// join runs the join command on machines at once (each fetches and
	// imports the images) and waits for their Nodes to be Ready.
	join := func(machines ...*node) {
		t.Helper()
		began := time.Now()
		type result struct {
			code           int
			stdout, stderr string
		}
		results := make([]result, len(machines))
		var wg sync.WaitGroup
		for i, n := range machines {
			t.Cleanup(func() {
				if t.Failed() {
					for _, f := range []string{"supervisor.log", "kubelet.log", "containerd.log"} {
						t.Logf("%s's %s (tail):\n%s", n.hostname, f, tail(n.nodeLog(f), 3000))
					}
				}
			})
			// A join that never ran (a fixture that failed the test from
			// this goroutine) counts as failed.
			results[i] = result{code: -1, stderr: "the join command did not run"}
			wg.Go(func() {
				code, stdout, stderr := n.run(command)
				results[i] = result{code, stdout, stderr}
			})
		}
		wg.Wait()
		for i, n := range machines {
			if r := results[i]; r.code != 0 {
				t.Fatalf("%s: join exit %d: %s %s\nsupervisor: %s", n.hostname, r.code, r.stdout, r.stderr, n.nodeLog("supervisor.log"))
			}
		}
		for _, n := range machines {
			node := waitNodeReady(t, tc.Kube, n.hostname, 90*time.Second)
			f.podCIDRs[n.hostname] = netip.MustParsePrefix(node.Spec.PodCIDR)
			t.Logf("%s: Node Ready %s after the join command began, pod CIDR %s", n.hostname, time.Since(began).Round(100*time.Millisecond), node.Spec.PodCIDR)
		}
	}

	// The head's machine joins, and the cluster is made on it.
	join(f.head)
	created := time.Now()
	status, body := m.api("POST", "/v1/kuberay/clusters", map[string]any{
		"name": "gridweave-cluster", "image": rayPodHeadTag, "ray_version": rayimage.RayVersion,
		// 3Gi: the head runs KubeTorch's driver (torch) beside the GCS and
		// the dashboard.
		"head": map[string]any{"cpu": "1", "memory": "3Gi", "node_selector": map[string]string{corev1.LabelHostname: f.head.hostname},
			"ray_start_params": map[string]string{"num-cpus": "1", "dashboard-host": "0.0.0.0"}},
	})
	if status != 201 {
		t.Fatalf("POST /v1/kuberay/clusters: %d %v", status, body)
	}
	// The GPU machines join: their registrations add the pool's worker
	// group, one worker per machine.
	join(f.a, f.b)
	for _, n := range []*node{f.a, f.b} {
		n.machine.FakeGPUs(t, 1)
	}

	// The machines reach each other's underlay (a LAN), and their link
	// services make direct links; the master relays what they cannot.
	machines := f.machines()
	enableForwarding(t, m.device, f.head.hostLink, f.a.hostLink, f.b.hostLink)
	for _, from := range machines {
		for _, to := range machines {
			if from != to {
				from.ns.IP(t, "route", "add", to.underlay.String()+"/32", "via", from.underlay.Prev().String())
			}
		}
	}
	f.services = map[string]*linkService{}
	for _, n := range machines {
		f.services[n.hostname] = n.serve()
	}
	f.waitForLinks(api.LinkDirect)

	if err := within(5*time.Minute, func() error {
		list, err := tc.Kube.CoreV1().Pods(m.namespace).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/cluster=gridweave-cluster"})
		if err != nil {
			return err
		}
		f.pods = map[string]corev1.Pod{}
		var waiting []string
		for _, p := range list.Items {
			ready := slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
				return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
			})
			if !ready {
				waiting = append(waiting, fmt.Sprintf("%s on %q: %s %v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions))
				continue
			}
			f.pods[p.Spec.NodeName] = p
		}
		if len(list.Items) != 3 || len(waiting) > 0 {
			return fmt.Errorf("%d pods; not Ready: %v", len(list.Items), waiting)
		}
		return nil
	}); err != nil {
		t.Fatalf("the Ray pods: %v\nthe machines' Nodes: %s", err, nodesTrouble(ctx, tc, f.machines()))
	}
	t.Logf("head and both workers Ready %s after the cluster was made", time.Since(created).Round(100*time.Millisecond))
	for _, n := range machines {
		if _, ok := f.pods[n.hostname]; !ok {
			t.Fatalf("no Ray pod on %s: %v", n.hostname, slices.Collect(mapKeys(f.pods)))
		}
	}
	dashboardAddr := netip.AddrPortFrom(netip.MustParseAddr(f.pods[f.head.hostname].Status.PodIP), 8265).String()
	f.dashboard = "http://" + dashboardAddr
	headDashboard.Store(&dashboardAddr)
	if err := within(time.Minute, func() error {
		states, err := f.rayNodes(ctx)
		if err != nil {
			return err
		}
		for host, p := range f.pods {
			if states[p.Status.PodIP] != "ALIVE" {
				return fmt.Errorf("Ray's nodes %v: %s's pod %s is not alive", states, host, p.Status.PodIP)
			}
		}
		t.Logf("Ray's nodes (pod address: state): %v, %s after the cluster was made", states, time.Since(created).Round(100*time.Millisecond))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return f
}

// nodesTrouble says what keeps pods off the machines' Nodes: each one's
// taints and the conditions other than Ready that hold (a pressure the
// kubelet measures on the host all machines share), and the space free
// on the host's disk, where their kubelets and containerd keep their
// state.
func nodesTrouble(ctx context.Context, tc *testcluster.Cluster, machines []*node) string {
	var b strings.Builder
	for _, n := range machines {
		got, err := tc.Kube.CoreV1().Nodes().Get(ctx, n.hostname, metav1.GetOptions{})
		if err != nil {
			fmt.Fprintf(&b, "\n  %s: %v", n.hostname, err)
			continue
		}
		var taints, conditions []string
		for _, taint := range got.Spec.Taints {
			taints = append(taints, taint.ToString())
		}
		for _, c := range got.Status.Conditions {
			if c.Type != corev1.NodeReady && c.Status != corev1.ConditionFalse {
				conditions = append(conditions, fmt.Sprintf("%s=%s since %s (%s: %s)", c.Type, c.Status, c.LastTransitionTime.Format(time.TimeOnly), c.Reason, c.Message))
			}
		}
		fmt.Fprintf(&b, "\n  %s: unschedulable %t, taints %v, ready %q, conditions %v", n.hostname, got.Spec.Unschedulable, taints, readyReason(got), conditions)
	}
	var disk syscall.Statfs_t
	if err := syscall.Statfs(os.TempDir(), &disk); err == nil {
		fmt.Fprintf(&b, "\n  the host's disk (%s): %.1f GB free of %.1f GB", os.TempDir(), float64(disk.Bavail)*float64(disk.Bsize)/1e9, float64(disk.Blocks)*float64(disk.Bsize)/1e9)
	}
	return b.String()
}

// cordonOtherNodes marks every Node the shared control plane has before
// the fleet joins (other tests' kwok Nodes, where nothing runs, and any
// Node a machine of theirs left) unschedulable until the test ends, so
// that the pods nothing pins (a RayJob's submitter, say) land on the
// fleet's real nodes.
func cordonOtherNodes(t testing.TB, tc *testcluster.Cluster) {
	t.Helper()
	ctx := context.Background()
	nodes, err := tc.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cordon := func(name string, unschedulable bool) error {
		patch := fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, unschedulable)
		_, err := tc.Kube.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		return err
	}
	for _, n := range nodes.Items {
		if n.Spec.Unschedulable {
			continue
		}
		if err := cordon(n.Name, true); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("cordon the Node %s: %v", n.Name, err)
		}
		t.Cleanup(func() {
			if err := cordon(n.Name, false); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("uncordon the Node %s: %v", n.Name, err)
			}
		})
	}
}

func (f *rayPodFleet) machines() []*node { return []*node{f.head, f.a, f.b} }

// waitForLinks waits until every machine reports state for its links to
// the other two.
func (f *rayPodFleet) waitForLinks(state api.LinkState) {
	want := linkStates{}
	for _, from := range f.machines() {
		want[from.hostname] = map[string]api.LinkState{}
		for _, to := range f.machines() {
			if to != from {
				want[from.hostname][to.hostname] = state
			}
		}
	}
	f.m.waitForLinks(want, 90*time.Second)
}

// rayNodes is Ray's node list from the head's dashboard: each node's
// address and state (ALIVE wins over an older DEAD entry at the same
// address).
func (f *rayPodFleet) rayNodes(ctx context.Context) (map[string]string, error) {
	nodes, err := raytest.ListNodes(ctx, &http.Client{Timeout: 10 * time.Second}, f.dashboard)
	if err != nil {
		return nil, err
	}
	states := map[string]string{}
	for _, n := range nodes {
		if states[n.IP] != "ALIVE" {
			states[n.IP] = n.State
		}
	}
	return states, nil
}

// TestRayPodsAcrossTheFleet: KubeRay's head and worker pods run on three
// real nodes (a rayPodFleet) at pod addresses of their machines' pod
// CIDRs, each the image it should run; a job runs a task pinned to each
// and gets back each pod's name; `launcher run` of a small RayJob launch
// brings a second Ray cluster up beside the first and its job succeeds
// with a task on its worker pod; a disconnect of one GPU machine removes
// its pod, Ray marks that node dead, and the worker group's replicas
// follow.
func TestRayPodsAcrossTheFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("real kubelets, containerd and Ray in pods; run make test")
	}
	ctx := context.Background()
	f := startRayPodFleet(t, "ray", 51)
	m, tc, pods := f.m, f.m.tc, f.pods
	for _, n := range f.machines() {
		p := pods[n.hostname]
		ip := netip.MustParseAddr(p.Status.PodIP)
		if !f.podCIDRs[n.hostname].Contains(ip) {
			t.Errorf("pod %s's address %s is not in %s's pod CIDR %s", p.Name, ip, n.hostname, f.podCIDRs[n.hostname])
		}
		want := rayPodWorkerTag
		if n == f.head {
			want = rayPodHeadTag
		}
		if p.Spec.Containers[0].Image != want {
			t.Errorf("pod %s runs %s, want %s", p.Name, p.Spec.Containers[0].Image, want)
		}
	}
	dashboard, alive := f.dashboard, f.rayNodes

	// A task pinned to each node returns its pod's name.
	want := "RAN ON " + strings.Join(slices.Sorted(func(yield func(string) bool) {
		for _, p := range pods {
			if !yield(p.Name) {
				return
			}
		}
	}), ",")
	logs, err := raytest.RunJob(raytest.HTTPJSON, dashboard, raytest.HostsScript, 2*time.Minute)
	if err != nil || !strings.Contains(logs, want) {
		t.Fatalf("a job: %v; want %q in its log:\n%s", err, want, tail(logs, 3000))
	}
	t.Logf("the job SUCCEEDED: %s", want)

	// KubeTorch trains on the GPU worker pods: a bundle synced, then
	// trained by the server through the head's dashboard, two ranks
	// (gloo: the pods' GPUs have no CUDA) that sum over the tunnels.
	f.train(t)

	// The launcher's RayJob on the same fleet: a cluster of its own (its
	// head beside the first one's), a task on its worker, SUCCEEDED.
	f.launchRayJob(t)

	// b is disconnected: its pod goes with its drained Node, Ray marks
	// its node dead, and the pool's group asks for one worker.
	gone := pods[f.b.hostname]
	// The other machines' restarts just before: the disconnect must add
	// none. One before it is logged with why it happened, not held
	// against the disconnect: on a busy machine Ray's dashboard can miss
	// its 30 seconds to start, and the head's container exits once
	// before the pod is Ready.
	kept := map[string]*corev1.Pod{}
	for _, n := range []*node{f.head, f.a} {
		p, err := tc.Kube.CoreV1().Pods(m.namespace).Get(ctx, pods[n.hostname].Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s's pod before ray-b's disconnect: %v", n.hostname, err)
		}
		if restarts, why := podRestarts(p); restarts > 0 {
			t.Logf("%s's pod %s before ray-b's disconnect: %d restarts%s", n.hostname, p.Name, restarts, why)
			for _, c := range p.Status.ContainerStatuses {
				if c.RestartCount == 0 {
					continue
				}
				tail := int64(40)
				raw, err := tc.Kube.CoreV1().Pods(m.namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name, Previous: true, TailLines: &tail}).DoRaw(ctx)
				t.Logf("%s's last run before its restart (%v):\n%s", c.Name, err, raw)
			}
		}
		kept[n.hostname] = p
	}
	if status, body := m.api("POST", "/v1/nodes/disconnect", map[string]any{"hostname": f.b.hostname}); status != 200 || body["released"] != true {
		t.Fatalf("disconnect: %d %v", status, body)
	}
	if err := within(2*time.Minute, func() error {
		if _, err := tc.Kube.CoreV1().Pods(m.namespace).Get(ctx, gone.Name, metav1.GetOptions{}); err == nil {
			return fmt.Errorf("pod %s still there", gone.Name)
		}
		states, err := alive(ctx)
		if err != nil {
			return err
		}
		if states[gone.Status.PodIP] != "DEAD" {
			return fmt.Errorf("Ray's nodes %v: %s not dead yet", states, gone.Status.PodIP)
		}
		rc, err := tc.Ray.RayV1().RayClusters(m.namespace).Get(ctx, "gridweave-cluster", metav1.GetOptions{})
		if err != nil {
			return err
		}
		var replicas []int32
		for _, g := range rc.Spec.WorkerGroupSpecs {
			replicas = append(replicas, *g.Replicas)
		}
		if !slices.Equal(replicas, []int32{1}) {
			return fmt.Errorf("worker group replicas %v, want [1]", replicas)
		}
		return nil
	}); err != nil {
		t.Fatalf("after ray-b's disconnect: %v", err)
	}
	t.Logf("ray-b disconnected: pod %s gone, its Ray node DEAD, the worker group at 1 replica", gone.Name)

	// b's link service learns that the master no longer knows it, takes
	// its node away (its pods, its containerd's shims, its cgroups) and
	// ends. Nothing of the other machines goes with it: their pods are
	// the same pods, never restarted, and Ray still lists them alive.
	select {
	case <-f.services[f.b.hostname].exited:
	case <-time.After(3 * time.Minute):
		t.Fatal("ray-b's link service did not end after its disconnect")
	}
	if !strings.Contains(f.services[f.b.hostname].logs(), "node stopped and removed") {
		t.Fatalf("ray-b's link service ended without removing its node:\n%s", f.services[f.b.hostname].logs())
	}
	states, err := alive(ctx)
	if err != nil {
		t.Fatalf("the head's dashboard after ray-b's node went: %v", err)
	}
	for _, n := range []*node{f.head, f.a} {
		before := pods[n.hostname] // the pod the jobs ran on
		now, err := tc.Kube.CoreV1().Pods(m.namespace).Get(ctx, before.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s's pod after ray-b's node went: %v", n.hostname, err)
		}
		restartsBefore, _ := podRestarts(kept[n.hostname])
		restarts, why := podRestarts(now)
		if now.UID != before.UID || now.Status.PodIP != before.Status.PodIP || restarts != restartsBefore {
			t.Errorf("%s's pod %s after ray-b's node went: uid %s→%s, address %s→%s, restarts %d→%d%s", n.hostname, before.Name, before.UID, now.UID, before.Status.PodIP, now.Status.PodIP, restartsBefore, restarts, why)
		}
		if states[before.Status.PodIP] != "ALIVE" {
			t.Errorf("Ray's nodes %v: %s's pod %s is not alive after ray-b's node went", states, n.hostname, before.Status.PodIP)
		}
	}
}

// podRestarts is how many times p's containers restarted, and why each
// last ended.
func podRestarts(p *corev1.Pod) (restarts int, why string) {
	for _, c := range p.Status.ContainerStatuses {
		restarts += int(c.RestartCount)
		if last := c.LastTerminationState.Terminated; last != nil {
			why += fmt.Sprintf(" (%s last ended at %s: %s, exit code %d)", c.Name, last.FinishedAt.Format(time.RFC3339), last.Reason, last.ExitCode)
		}
	}
	return restarts, why
}

// train syncs a bundle of raytest.DistributedTrainScript through
// /v1/kubetorch/sync, trains it on the fleet's cluster through
// /v1/kubetorch/train (by default every ready GPU worker: a's and b's
// pods, one GPU each) and follows /v1/kubetorch/jobs/{id} until the job
// succeeds; the ranks ran in the worker pods and their sum is right.
func (f *rayPodFleet) train(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var bundle bytes.Buffer
	gz := gzip.NewWriter(&bundle)
	tw := tar.NewWriter(gz)
	script := []byte(raytest.DistributedTrainScript)
	if err := tw.WriteHeader(&tar.Header{Name: "train.py", Mode: 0o644, Size: int64(len(script)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	_, _ = tw.Write(script)
	_ = tw.Close()
	_ = gz.Close()
	status, synced := f.m.upload("/v1/kubetorch/sync", "application/gzip", bundle.Bytes())
	if status != 201 {
		t.Fatalf("POST /v1/kubetorch/sync: %d %v", status, synced)
	}
	began := time.Now()
	status, trained := f.m.api("POST", "/v1/kubetorch/train", map[string]any{"cluster": "gridweave-cluster", "bundle": synced["id"], "command": "python train.py", "owner": "alice"})
	if status != 201 || trained["nodes"] != float64(2) || trained["gpus_per_node"] != float64(1) {
		t.Fatalf("POST /v1/kubetorch/train: %d %v; want 2 nodes of 1 GPU", status, trained)
	}
	id := fmt.Sprint(trained["id"])
	var job map[string]any
	if err := within(6*time.Minute, func() error {
		status, job = f.m.api("GET", "/v1/kubetorch/jobs/"+id, nil)
		switch s := fmt.Sprint(job["status"]); {
		case status != 200:
			return fmt.Errorf("GET /v1/kubetorch/jobs/%s: %d %v", id, status, job)
		case s == "FAILED" || s == "STOPPED":
			return stop(fmt.Errorf("the training job is %s: %v", s, job))
		case s != "SUCCEEDED":
			return fmt.Errorf("the training job is %s", s)
		}
		return nil
	}); err != nil {
		logs, _ := f.jobLogs(ctx, id)
		t.Fatalf("%v\nits log from Ray:\n%s", err, tail(logs, 4000))
	}
	lines, _ := job["logs"].([]any)
	if len(lines) == 0 {
		t.Errorf("no log lines through /v1/kubetorch/jobs/%s: %v", id, job)
	}
	logs, err := f.jobLogs(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs, "torch.distributed backend gloo") {
		t.Errorf("the training job's log does not say it chose gloo:\n%s", tail(logs, 4000))
	}
	// Each rank prints its sum once: both ranks, each 3, one in each GPU
	// worker pod (Ray's prefix of the line names the pod's address), met
	// at rank zero's pod.
	ranks := raytest.DistributedTrainRanks(logs)
	gpuPods := map[string]string{f.pods[f.a.hostname].Status.PodIP: f.a.hostname, f.pods[f.b.hostname].Status.PodIP: f.b.hostname}
	zero, one := ranks["zero"], ranks["one"]
	if len(ranks) != 2 || zero.MetAt != one.MetAt || zero.MetAt != zero.RanOn || gpuPods[zero.RanOn] == "" || gpuPods[one.RanOn] == "" || zero.RanOn == one.RanOn {
		t.Fatalf("the ranks (rank: where they met, where it ran) %v; want ranks zero and one, each with sum 3, one in each GPU worker pod of %v, met at rank zero's:\n%s", ranks, gpuPods, tail(logs, 4000))
	}
	t.Logf("KubeTorch's job %s SUCCEEDED %s after it was asked for: rank zero on %s's pod, rank one on %s's; the ranks' lines: %q", id, time.Since(began).Round(100*time.Millisecond), gpuPods[zero.RanOn], gpuPods[one.RanOn], rankLines(logs))
}

// jobLogs is a Ray job's whole log from the head's dashboard (the
// server's answer holds its last lines).
func (f *rayPodFleet) jobLogs(ctx context.Context, id string) (string, error) {
	d, err := dashboard.New(f.dashboard, nil)
	if err != nil {
		return "", err
	}
	return d.JobLogs(ctx, id)
}

// ansiColor is a terminal color code, as Ray's log prefixes carry.
var ansiColor = regexp.MustCompile("\x1b\\[[0-9;]*m")

// rankLines are the lines of a training log that report a rank's sum
// (without their color codes).
func rankLines(logs string) []string {
	var out []string
	for line := range strings.Lines(logs) {
		if strings.Contains(line, ": sum ") {
			out = append(out, strings.TrimSpace(ansiColor.ReplaceAllString(line, "")))
		}
	}
	return out
}

// launchRecipe and launchInfra are a small RayJob launch on the images
// the machines imported: its head on the CPU machine beside the fleet's
// own Ray head, one CPU worker that runs a task. Each machine has two
// CPUs and each Ray pod already there asks for one, so the new pods ask
// for little (the head and the worker a quarter of a CPU, KubeRay's
// submitter half) and may use more (limits of two). The machines share
// two cores with the control plane and every other test: the head's
// readiness probe may fail for a minute under that load, and KubeRay's
// submitter (K8sJobMode, its default) gives up after three tries, so the
// launch asks for more, as a user of a busy cluster would.
const launchRecipe = `name: hello-pods
entrypoint: >-
  python -c "import ray, socket; ray.init();
  where = ray.remote(lambda: socket.gethostname());
  print('RAN ON', ray.get(where.options(resources={'dockyard_fleet_trainer': 1}).remote()))"
fleets:
  trainer:
    replicas: 1
    gpusPerNode: 0
    cpu: 250m
    memory: 2Gi
inference:
  backend: vllm
`

const launchInfra = `namespace: %[1]s
images:
  vllm: %[2]s
launch:
  mode: rayjob
  ttlSecondsAfterFinished: 0
  submitterConfig:
    backoffLimit: 8
kuberay:
  rayVersion: %[3]q
  spec:
    headGroupSpec:
      rayStartParams:
        num-cpus: "1"
      template:
        spec:
          nodeSelector:
            kubernetes.io/hostname: %[4]s
          containers:
          - name: ray-head
            resources:
              requests: {cpu: 250m, memory: 1Gi}
              limits: {cpu: "2", memory: 2Gi}
    workerGroupSpecs:
    - groupName: trainer
      rayStartParams:
        num-cpus: "1"
      template:
        spec:
          containers:
          - name: ray-worker
            resources:
              limits: {cpu: "2"}
`

// launchRayJob runs `launcher run` of launchRecipe on the fleet, as a user
// does with the master's kubeconfig, and waits for its RayJob to
// succeed: the submitter's log (the job's own output) names the worker
// pod the task ran on.
func (f *rayPodFleet) launchRayJob(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	recipe, infra := filepath.Join(dir, "hello.recipe.yaml"), filepath.Join(dir, "hello.infra.yaml")
	if err := os.WriteFile(recipe, []byte(launchRecipe), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(infra, []byte(fmt.Sprintf(launchInfra, f.m.namespace, rayPodHeadTag, rayimage.RayVersion, f.head.hostname)), 0o644); err != nil {
		t.Fatal(err)
	}
	submitterLogs := func() string {
		var b strings.Builder
		all, _ := f.m.tc.Kube.CoreV1().Pods(f.m.namespace).List(ctx, metav1.ListOptions{})
		for _, p := range all.Items {
			if strings.HasPrefix(p.Name, "hello-pods") {
				fmt.Fprintf(&b, "pod %s on %q: %s %v %v\n", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions, p.Status.ContainerStatuses)
			}
		}
		pods, _ := f.m.tc.Kube.CoreV1().Pods(f.m.namespace).List(ctx, metav1.ListOptions{LabelSelector: "job-name=hello-pods"})
		for _, p := range pods.Items {
			logs, err := f.m.tc.Kube.CoreV1().Pods(f.m.namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
			fmt.Fprintf(&b, "submitter %s on %s, %s (%v):\n%s\n", p.Name, p.Spec.NodeName, p.Status.Phase, err, tail(string(logs), 2000))
		}
		return b.String()
	}
	began := time.Now()
	cmd := exec.Command(builtLauncher(t), "--kubeconfig", f.m.tc.KubeconfigPath, "run", recipe, infra, "--timeout", "4m")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "RayJob "+f.m.namespace+"/hello-pods is running") {
		t.Fatalf("launcher run: %v\n%s\n%s", err, out, submitterLogs())
	}
	t.Logf("launcher run: %s", strings.TrimSpace(string(out)))
	var job *rayv1.RayJob
	if err := within(4*time.Minute, func() error {
		job, err = f.m.tc.Ray.RayV1().RayJobs(f.m.namespace).Get(ctx, "hello-pods", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if job.Status.JobDeploymentStatus == rayv1.JobDeploymentStatusFailed {
			return stop(fmt.Errorf("RayJob hello-pods failed: job %q: %s", job.Status.JobStatus, job.Status.Message))
		}
		if job.Status.JobStatus != rayv1.JobStatusSucceeded {
			return fmt.Errorf("RayJob hello-pods: deployment %s, job %q: %s", job.Status.JobDeploymentStatus, job.Status.JobStatus, job.Status.Message)
		}
		return nil
	}); err != nil {
		t.Fatalf("%v\n%s", err, submitterLogs())
	}
	// The submitter follows the job's log until it ends: its log holds
	// the job's output (a moment after Ray reports the job done).
	worker := "RAN ON " + job.Status.RayClusterName + "-trainer-worker-"
	var logs []byte
	if err := within(time.Minute, func() error {
		submitters, err := f.m.tc.Kube.CoreV1().Pods(f.m.namespace).List(ctx, metav1.ListOptions{LabelSelector: "job-name=hello-pods"})
		if err != nil {
			return err
		}
		for _, p := range submitters.Items {
			if p.Status.Phase == corev1.PodPending {
				continue
			}
			if logs, err = f.m.tc.Kube.CoreV1().Pods(f.m.namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx); err == nil && strings.Contains(string(logs), worker) {
				return nil
			}
		}
		return fmt.Errorf("no submitter's log has %q (the task on the worker pod)", worker)
	}); err != nil {
		t.Fatalf("%v\n%s", err, submitterLogs())
	}
	line := string(logs)[strings.Index(string(logs), "RAN ON "):]
	line, _, _ = strings.Cut(line, "\n")
	t.Logf("the RayJob SUCCEEDED %s after launcher run began, on cluster %s: %s", time.Since(began).Round(100*time.Millisecond), job.Status.RayClusterName, line)
}

// launcherBinary is the launcher, built once per test binary.
var launcherBinary struct {
	once sync.Once
	path string
	err  error
}

func builtLauncher(t testing.TB) string {
	t.Helper()
	launcherBinary.once.Do(func() {
		dir, err := os.MkdirTemp("", "gridweave-launcher-")
		if err != nil {
			launcherBinary.err = err
			return
		}
		launcherBinary.path = filepath.Join(dir, "launcher")
		if out, err := exec.Command("go", "build", "-o", launcherBinary.path, "../launcher").CombinedOutput(); err != nil {
			launcherBinary.err = fmt.Errorf("go build ../launcher: %v: %s", err, out)
		}
	})
	if launcherBinary.err != nil {
		t.Fatal(launcherBinary.err)
	}
	return launcherBinary.path
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
