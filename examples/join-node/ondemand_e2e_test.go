package main

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"gridweave.dev/gridweave/api"
)

// TestLinksOnDemand joins three machines that reach each other and runs
// their link services with --direct-links on-demand: no machine has a
// peer for another until they exchange traffic (every link relayed,
// "idle"); a datagram from a to b (through the master) links a and b
// directly, c's links stay idle; when the traffic has stopped for the
// idle time, a's and b's peers go again.
//
// The machines' kernels track connections as a Kubernetes node's do
// (kube-proxy's rules need it): here a firewall rule of each machine's
// makes them, and each forgets a short UDP exchange after 5 s.
func TestLinksOnDemand(t *testing.T) {
	if testing.Short() {
		t.Skip("network namespaces, wireguard-go and the test control plane; run make test")
	}
	// Beside the other link tests (their machines, addresses and masters
	// are their own), after every test that is not parallel.
	t.Parallel()
	m := startMaster(t)
	command := m.joinCommand()
	names := []string{"ondemand-a", "ondemand-b", "ondemand-c"}
	nodes, vpnIPs := map[string]*node{}, map[string]netip.Addr{}
	for i, h := range names {
		n := m.newNode(44+i, h, true)
		code, stdout, stderr := n.run(command)
		if code != 0 {
			t.Fatalf("%s: join exit %d: %s %s", h, code, stdout, stderr)
		}
		vpnIPs[h], _ = joined(t, stdout)
		nodes[h] = n
		if out, err := n.ns.Command("iptables", "-A", "INPUT", "-m", "conntrack", "--ctstate", "INVALID", "-j", "DROP").CombinedOutput(); err != nil {
			t.Fatalf("%s: a firewall rule: %v: %s", h, err, out)
		}
		// The machine's kernel forgets a short UDP exchange after 5 s
		// rather than 30 (a setting of its own network namespace).
		if out, err := n.ns.Command("sh", "-c", "echo 5 > /proc/sys/net/netfilter/nf_conntrack_udp_timeout").CombinedOutput(); err != nil {
			t.Fatalf("%s: the connection tracking's UDP timeout: %v: %s", h, err, out)
		}
	}
	a, b, c := nodes["ondemand-a"], nodes["ondemand-b"], nodes["ondemand-c"]
	var links []string
	for _, n := range []*node{a, b, c} {
		links = append(links, n.hostLink)
	}
	enableForwarding(t, append(links, m.device)...)
	for _, from := range []*node{a, b, c} {
		for _, to := range []*node{a, b, c} {
			if from != to {
				from.ns.IP(t, "route", "add", to.underlay.String()+"/32", "via", from.underlay.Prev().String())
			}
		}
	}
	for _, n := range []*node{a, b, c} {
		n.serve("--direct-links", "on-demand", "--idle-after", "10s")
	}
	idle := func(except ...string) linkStates {
		want := linkStates{}
		for _, h := range names {
			want[h] = map[string]api.LinkState{}
			for _, o := range names {
				if o != h {
					want[h][o] = api.LinkRelayed
				}
			}
		}
		if len(except) == 2 {
			want[except[0]][except[1]], want[except[1]][except[0]] = api.LinkDirect, api.LinkDirect
		}
		return want
	}
	reports := m.waitForLinks(idle(), 60*time.Second)
	for h, rep := range reports {
		for _, l := range rep.Links {
			if l.RelayedReason != api.RelayedIdle {
				t.Errorf("%s→%s before any traffic: relayed for %q, want idle", h, l.Hostname, l.RelayedReason)
			}
		}
	}
	for _, n := range []*node{a, b, c} {
		if peers := n.device(); len(peers) != 1 {
			t.Errorf("%s's device has %d peers before any traffic, want the master's alone", n.hostname, len(peers))
		}
	}

	// One datagram from a to b: it goes through the master, and the two
	// link directly.
	sink := netip.AddrPortFrom(vpnIPs["ondemand-b"], 7779).String()
	udpEchoServer(t, b.ns, sink)
	if lost := udpLoss(t, a.ns, sink, 1, 0); lost != 0 {
		t.Fatal("a's datagram to b, through the master, was lost")
	}
	began := time.Now()
	m.waitForLinks(idle("ondemand-a", "ondemand-b"), 30*time.Second)
	t.Logf("a↔b direct %s after their first datagram", time.Since(began).Round(100*time.Millisecond))
	if n := len(a.device()); n != 2 {
		t.Errorf("a's device has %d peers with traffic to b alone, want the master's and b's", n)
	}
	if n := len(c.device()); n != 1 {
		t.Errorf("c, which exchanged nothing, has %d peers, want the master's alone", n)
	}
	if lost := udpLoss(t, a.ns, sink, 10, 50*time.Millisecond); lost != 0 {
		t.Errorf("%d of 10 datagrams from a to b lost over the direct link", lost)
	}

	// The traffic stops: the kernel forgets the flow (5 s here for a short
	// UDP exchange), then after the idle time the direct peers go.
	stopped := time.Now()
	m.waitForLinks(idle(), 120*time.Second)
	t.Logf("a↔b idle again %s after their last datagram", time.Since(stopped).Round(time.Second))
	if n := len(a.device()); n != 1 {
		t.Errorf("a's device has %d peers after the idle time, want the master's alone", n)
	}
	// Traffic still flows, through the master.
	if err := within(10*time.Second, func() error {
		if udpLoss(t, a.ns, sink, 1, 0) != 0 {
			return fmt.Errorf("a's datagram to b is lost")
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
}
