package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"gridweave.dev/internal/netnstest"
	"gridweave.dev/internal/raytest"
)

// rayMeshDriver runs on the Ray head (RAY_ADDRESS set): it pins a task to
// each machine by its custom resource, then moves an array of 256 MiB
// from a task on the first machine to a task on the second, TRANSFERS
// times, and prints what it saw as one JSON line.
const rayMeshDriver = `
import json, os, socket, sys, time
import numpy as np
import ray

ray.init(logging_level="ERROR")
machines = sys.argv[1:]

@ray.remote(num_cpus=0)
def where():
    return socket.gethostname(), ray.util.get_node_ip_address()

@ray.remote(num_cpus=0)
def make(n):
    return np.ones(n, dtype=np.uint8)

@ray.remote(num_cpus=0)
def consume(a):
    return int(a.sum()), socket.gethostname()

out = {"where": {}, "transfer_seconds": []}
for m in machines:
    out["where"][m] = ray.get(where.options(resources={"machine-" + m: 0.01}).remote())
size = 256 << 20
first, second = machines
for _ in range(int(os.environ.get("TRANSFERS", "1"))):
    ref = make.options(resources={"machine-" + first: 0.01}).remote(size)
    ray.wait([ref], fetch_local=False)
    start = time.perf_counter()
    total, host = ray.get(consume.options(resources={"machine-" + second: 0.01}).remote(ref))
    out["transfer_seconds"].append(time.perf_counter() - start)
    assert total == size and host == second, (total, host)
    del ref
print("RESULT " + json.dumps(out), flush=True)
`

// rayMesh is a Ray cluster across the mesh: a head on the master's side
// and a Ray worker node on each joined machine, at its VPN address.
type rayMesh struct {
	m        *master
	headNS   *netnstest.Namespace
	head     *raytest.Node
	machines []*node
	vpnIPs   map[string]netip.Addr // hostname → VPN address
	workers  map[string]*raytest.Node
}

// startRayMesh joins two machines over wireguard-go and starts Ray across
// the tunnels. The head runs in a namespace of its own behind the master
// (Ray listens on every address of its namespace, so it gets one that
// holds nothing else) at the last address of the VPN range, which the
// master routes to it: machines reach it through their tunnel, as they
// reach anything of the master's. The master forwards between tunnels and
// to the head, so node-to-node traffic (GCS, raylet, object manager)
// crosses WireGuard twice, machine → master → machine.
func startRayMesh(t testing.TB) *rayMesh {
	venv := raytest.RequireVenv(t)
	m := startMaster(t)
	r := &rayMesh{m: m, vpnIPs: map[string]netip.Addr{}, workers: map[string]*raytest.Node{}}
	command := m.joinCommand()
	for i, hostname := range []string{"ray-a", "ray-b"} {
		n := m.newNode(50+i, hostname, false)
		code, stdout, stderr := n.run(command)
		if code != 0 {
			t.Fatalf("%s: join exit %d: %s %s", hostname, code, stdout, stderr)
		}
		ip, _ := joined(t, stdout)
		r.machines = append(r.machines, n)
		r.vpnIPs[hostname] = ip
	}

	headIP := lastAddr(m.vpnPrefix)
	for _, ip := range r.vpnIPs {
		if ip == headIP {
			t.Fatalf("a machine got %s, the head's address", ip)
		}
	}
	r.headNS = netnstest.New(t, "gwr")
	seq := nextSeq()
	hostEnd, nsEnd := fmt.Sprintf("198.18.242.%d", 4*(seq%60)+1), fmt.Sprintf("198.18.242.%d", 4*(seq%60)+2)
	hostLink, _ := netnstest.LinkToHost(t, hostEnd+"/30", r.headNS, nsEnd+"/30")
	// The master forwards what comes in on its WireGuard device (between
	// tunnels, and to the head) and on the head's link, nothing else.
	enableForwarding(t, m.device, hostLink)
	r.headNS.IP(t, "addr", "add", headIP.String()+"/32", "dev", "lo")
	// Only the VPN range goes back through the master (from the head's
	// VPN address): nothing else has a route out of the namespace, so no
	// Ray process reaches past the test's own addresses.
	r.headNS.IP(t, "route", "add", m.vpnPrefix.String(), "via", hostEnd, "src", headIP.String())
	netnstest.IP(t, "route", "add", headIP.String()+"/32", "via", nsEnd, "dev", hostLink)

	// Before Ray: the head's namespace and each machine reach each other
	// through the master.
	for _, n := range r.machines {
		addr := netip.AddrPortFrom(r.vpnIPs[n.hostname], 7777).String()
		echoServer(t, n.ns, addr)
		if err := within(10*time.Second, func() error { return echoIn(r.headNS, addr) }); err != nil {
			t.Fatalf("the head's namespace does not reach %s at %s: %v", n.hostname, addr, err)
		}
	}
	headEcho := netip.AddrPortFrom(headIP, 7777).String()
	echoServer(t, r.headNS, headEcho)
	for _, n := range r.machines {
		if err := within(10*time.Second, func() error { return n.echo(headEcho) }); err != nil {
			t.Fatalf("%s does not reach the head's namespace at %s: %v", n.hostname, headEcho, err)
		}
	}

	// Ray declares a node dead after five missed health checks a second
	// apart (each given 3 s), rather than after the default 15 s and more.
	health := []string{"RAY_health_check_period_ms=1000", "RAY_health_check_timeout_ms=3000", "RAY_health_check_failure_threshold=5"}
	r.head = raytest.StartNodeT(t, raytest.NodeOptions{Venv: venv, NetNS: r.headNS.Name, IP: headIP.String(), NumCPUs: 1, ObjectStoreBytes: 600 << 20, Env: health}, "")
	for _, n := range r.machines {
		ip := r.vpnIPs[n.hostname]
		r.workers[n.hostname] = raytest.StartNodeT(t, raytest.NodeOptions{
			Venv: venv, NetNS: n.ns.Name, Hostname: n.hostname, IP: ip.String(), HeadAddress: r.head.GCSAddress,
			NumCPUs: 1, Resources: map[string]float64{"machine-" + n.hostname: 1}, ObjectStoreBytes: 600 << 20, Env: health,
		}, r.head.DashboardURL)
	}
	return r
}

// drive runs the driver on the head's namespace and returns its result.
func (r *rayMesh) drive(t testing.TB, transfers int) (where map[string][2]string, seconds []float64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", r.headNS.Name, raytest.RequireVenv(t).Python, "-c", rayMeshDriver, "ray-a", "ray-b")
	cmd.Env = append(os.Environ(), "RAY_USAGE_STATS_ENABLED=0", "RAY_ADDRESS="+r.head.GCSAddress, fmt.Sprintf("TRANSFERS=%d", transfers))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the driver failed: %v\n%s", err, out)
	}
	var result struct {
		Where           map[string][2]string `json:"where"`
		TransferSeconds []float64            `json:"transfer_seconds"`
	}
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "RESULT "); ok {
			if err := json.Unmarshal([]byte(rest), &result); err != nil {
				t.Fatal(err)
			}
		}
	}
	if result.Where == nil {
		t.Fatalf("the driver printed no result:\n%s", out)
	}
	return result.Where, result.TransferSeconds
}

// TestRayAcrossTheMesh: Ray's GCS, raylets and object managers talk
// across the WireGuard tunnels of two joined machines: Ray lists the
// machines at their VPN addresses, a task pinned to each machine runs
// there, 256 MiB move from one machine to the other, and a machine's
// disconnect makes Ray see its node die.
func TestRayAcrossTheMesh(t *testing.T) {
	if testing.Short() {
		t.Skip("network namespaces, wireguard-go, the test control plane and Ray; run make test")
	}
	r := startRayMesh(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nodes, err := raytest.ListNodes(ctx, http.DefaultClient, r.head.DashboardURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("Ray's node list:")
	alive := map[string]bool{}
	for _, n := range nodes {
		t.Logf("  %s %-15s head=%-5v %v", n.NodeID[:12], n.IP, n.IsHead, n.State)
		alive[n.IP] = n.State == "ALIVE"
	}
	for host, ip := range r.vpnIPs {
		if !alive[ip.String()] {
			t.Errorf("%s's Ray node at its VPN address %s is not alive", host, ip)
		}
	}

	where, seconds := r.drive(t, 1)
	for _, host := range []string{"ray-a", "ray-b"} {
		got := where[host]
		t.Logf("task pinned to %s ran on host %s at %s", host, got[0], got[1])
		if got[0] != host || got[1] != r.vpnIPs[host].String() {
			t.Errorf("the task pinned to %s ran on %v, want %s at %s", host, got, host, r.vpnIPs[host])
		}
	}
	if len(seconds) != 1 || seconds[0] <= 0 {
		t.Fatalf("transfer times %v", seconds)
	}
	t.Logf("256 MiB from ray-a to ray-b through the master: %.2f s, %.0f MiB/s", seconds[0], 256/seconds[0])

	// A disconnect removes the machine's tunnel: Ray loses the node.
	if status, body := r.m.api("POST", "/v1/nodes/disconnect", map[string]any{"hostname": "ray-b"}); status != 200 {
		t.Fatalf("disconnect ray-b: %d %v", status, body)
	}
	gone := r.vpnIPs["ray-b"].String()
	for {
		nodes, err := raytest.ListNodes(ctx, http.DefaultClient, r.head.DashboardURL)
		if err != nil {
			t.Fatal(err)
		}
		dead := false
		for _, n := range nodes {
			if n.IP == gone && n.State == "DEAD" {
				dead = true
			}
		}
		if dead {
			t.Logf("after ray-b's disconnect Ray lists its node (%s) DEAD", gone)
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Ray still lists ray-b's node alive after its disconnect: %+v", nodes)
		case <-time.After(time.Second):
		}
	}
}

// BenchmarkRayObjectTransferOverMesh moves 256 MiB from a Ray task on one
// joined machine to a task on the other, through the master (the figure
// direct tunnels between machines improve). ns/op is one transfer;
// MiB/s its throughput. The setup (two joins, three Ray nodes) comes
// before the timer, once per b.N round:
//
//	go test -run '^$' -bench RayObjectTransferOverMesh -benchtime 3x ./examples/join-node/
func BenchmarkRayObjectTransferOverMesh(b *testing.B) {
	if testing.Short() {
		b.Skip("network namespaces, wireguard-go, the test control plane and Ray")
	}
	r := startRayMesh(b)
	b.ResetTimer()
	_, seconds := r.drive(b, b.N)
	b.StopTimer()
	total := 0.0
	for _, s := range seconds {
		total += s
	}
	if len(seconds) != b.N || total <= 0 {
		b.Fatalf("transfer times %v for %d transfers", seconds, b.N)
	}
	b.ReportMetric(total/float64(b.N)*1e9, "ns/op")
	b.ReportMetric(256*float64(b.N)/total, "MiB/s")
}

// enableForwarding turns IPv4 forwarding on for packets that arrive on
// the given devices (IPv4 decides by the incoming device) and restores
// each setting after the test.
func enableForwarding(t testing.TB, devices ...string) {
	for _, dev := range devices {
		path := "/proc/sys/net/ipv4/conf/" + dev + "/forwarding"
		was, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.WriteFile(path, was, 0o644) })
	}
}

// lastAddr is the last host address of an IPv4 prefix.
func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 2
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3]) + host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
