package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/internal/netnstest"
	"gridweave.dev/internal/realnode"
)

// BenchmarkPodToPod measures TCP throughput between two machines of the
// kubelet join mode over their direct link, side by side in one run:
// "tunnel" from one machine's namespace to the other's VPN address (the
// machines' own tunnel throughput), "pods" from a pod on one machine to a
// pod on the other, by pod IP (each pod's veth and the machine's bridge
// on both ends, around the same tunnel). The goal is pods ≥ 0.8 × tunnel.
// It also reports join_to_ready_s and pod_running_s: from the join
// command to the Node Ready by its kubelet, and from a pod's creation to
// its Running.
//
//	sudo go test -run '^$' -bench PodToPod -benchtime 20x ./examples/join-node/
func BenchmarkPodToPod(b *testing.B) {
	ctx := context.Background()
	m := startKubeletMaster(b)
	tc := m.tc
	command := m.joinCommand()
	a, c := m.newKubeletNode(57, "pods-a"), m.newKubeletNode(58, "pods-b")
	var joinToReady, podRunning time.Duration
	pods := map[string]netip.Addr{}
	for _, n := range []*node{a, c} {
		began := time.Now()
		if code, stdout, stderr := n.run(command); code != 0 {
			b.Fatalf("%s: join exit %d: %s %s", n.hostname, code, stdout, stderr)
		}
		waitNodeReady(b, tc.Kube, n.hostname, 90*time.Second)
		joinToReady = max(joinToReady, time.Since(began))
	}
	enableForwarding(b, m.device, a.hostLink, c.hostLink)
	a.ns.IP(b, "route", "add", c.underlay.String()+"/32", "via", a.underlay.Prev().String())
	c.ns.IP(b, "route", "add", a.underlay.String()+"/32", "via", c.underlay.Prev().String())
	a.serve()
	c.serve()
	m.waitForLinks(linkStates{"pods-a": {"pods-b": api.LinkDirect}, "pods-b": {"pods-a": api.LinkDirect}}, 60*time.Second)
	for _, n := range []*node{a, c} {
		began := time.Now()
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bench-" + n.hostname, Namespace: "default"}, Spec: corev1.PodSpec{
			NodeName: n.hostname, TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{Name: "podnet", Image: realnode.TestImage, Args: []string{"hold"}, ImagePullPolicy: corev1.PullNever}},
		}}
		if _, err := tc.Kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() {
			_ = tc.Kube.CoreV1().Pods("default").Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		})
		pods[n.hostname] = waitPodRunning(b, tc.Kube, "default", pod.Name, 90*time.Second)
		podRunning = max(podRunning, time.Since(began))
	}
	vpnIP, _ := netip.ParseAddr(m.nodeVPNIP(c.hostname))
	tunnelSink := netip.AddrPortFrom(vpnIP, 7781).String()
	tcpSink(b, c.ns, tunnelSink)
	podSink := netip.AddrPortFrom(pods["pods-b"], 7781).String()
	tcpSinkIn(b, inPodOf(b, c), podSink)

	b.Run("tunnel", func(b *testing.B) {
		measureThroughput(b, a.ns.Do, tunnelSink)
		b.ReportMetric(joinToReady.Seconds(), "join_to_ready_s")
		b.ReportMetric(podRunning.Seconds(), "pod_running_s")
	})
	b.Run("pods", func(b *testing.B) { measureThroughput(b, inPodOf(b, a), podSink) })
}

// inPodOf runs functions in the network namespace of the test image's pod
// on n (its podnet process's).
func inPodOf(tb testing.TB, n *node) func(func() error) error {
	tb.Helper()
	pids, err := n.machine.Pids()
	if err != nil {
		tb.Fatal(err)
	}
	for _, pid := range pids {
		raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if strings.HasPrefix(string(raw), "/podnet\x00") {
			path := fmt.Sprintf("/proc/%d/ns/net", pid)
			return func(fn func() error) error { return netnstest.DoIn(path, fn) }
		}
	}
	tb.Fatalf("no pod of the test image runs on %s", n.hostname)
	return nil
}

// nodeVPNIP is the VPN address the master's ledger gives hostname.
func (m *master) nodeVPNIP(hostname string) string {
	_, body := m.api("GET", "/v1/nodes/"+hostname, nil)
	node, _ := body["node"].(map[string]any)
	ip, _ := node["vpn_ip"].(string)
	return ip
}
