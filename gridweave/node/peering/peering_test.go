package peering_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/gridweave/node/peering"
	"gridweave.dev/joinkeys"
	"gridweave.dev/mesh/wgkey"
)

// device is a WireGuard device in memory that holds the manager to
// WireGuard's rule after every single change: no prefix on two peers.
type device struct {
	t       *testing.T
	mu      sync.Mutex
	peers   map[wgkey.Key]*peering.DevicePeer
	applied [][]peering.PeerChange
	kicks   map[wgkey.Key]int
}

func newDevice(t *testing.T, master wgkey.Key, vpn netip.Prefix) *device {
	d := &device{t: t, peers: map[wgkey.Key]*peering.DevicePeer{}, kicks: map[wgkey.Key]int{}}
	d.peers[master] = &peering.DevicePeer{PublicKey: master, AllowedIPs: []netip.Prefix{vpn}, Keepalive: 25 * time.Second}
	return d
}

func (d *device) Read(context.Context) (peering.DeviceState, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := peering.DeviceState{ListenPort: 51820}
	for _, p := range d.peers {
		c := *p
		c.AllowedIPs = slices.Clone(p.AllowedIPs)
		st.Peers = append(st.Peers, c)
	}
	return st, nil
}

func (d *device) Apply(_ context.Context, changes []peering.PeerChange) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(changes) > 0 {
		d.applied = append(d.applied, changes)
	}
	for i, ch := range changes {
		if ch.Remove {
			delete(d.peers, ch.PublicKey)
			continue
		}
		p := d.peers[ch.PublicKey]
		if p == nil {
			p = &peering.DevicePeer{PublicKey: ch.PublicKey}
			d.peers[ch.PublicKey] = p
			d.kicks[ch.PublicKey]++ // a new peer with a keepalive starts a handshake
		} else if ch.Handshake {
			d.kicks[ch.PublicKey]++
		}
		p.AllowedIPs, p.Keepalive = slices.Clone(ch.AllowedIPs), ch.Keepalive
		if ch.Endpoint.IsValid() {
			p.Endpoint = ch.Endpoint
		}
		holder := map[netip.Prefix]wgkey.Key{}
		for _, q := range d.peers {
			for _, pfx := range q.AllowedIPs {
				if other, ok := holder[pfx]; ok {
					d.t.Errorf("after change %d of %v: %s is on two peers (%s and %s)", i, changes, pfx, other, q.PublicKey)
				}
				holder[pfx] = q.PublicKey
			}
		}
	}
	return nil
}

// handshake completes a handshake with the peer at now (its packets
// count as received).
func (d *device) handshake(key wgkey.Key, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.peers[key].LastHandshake = now
	d.peers[key].RxBytes += 148
}

// receive counts bytes received from the peer (a keepalive, traffic).
func (d *device) receive(key wgkey.Key, n int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.peers[key].RxBytes += n
}

func (d *device) peer(key wgkey.Key) (peering.DevicePeer, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.peers[key]
	if !ok {
		return peering.DevicePeer{}, false
	}
	return *p, true
}

type routes struct{ set map[netip.Prefix]bool }

func (r *routes) Replace(_ context.Context, p netip.Prefix) error { r.set[p] = true; return nil }
func (r *routes) Delete(_ context.Context, p netip.Prefix) error  { delete(r.set, p); return nil }

type clock struct{ now time.Time }

func (c *clock) Now() time.Time          { return c.now }
func (c *clock) advance(d time.Duration) { c.now = c.now.Add(d) }
func key(t *testing.T) wgkey.Key         { _, pub, err := wgkey.GeneratePair(); must(t, err); return pub }
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func prefixes(s ...string) []netip.Prefix {
	out := []netip.Prefix{}
	for _, p := range s {
		out = append(out, pfx(p))
	}
	return out
}

type fixture struct {
	t            *testing.T
	self, master wgkey.Key
	b, c         wgkey.Key
	dev          *device
	routes       *routes
	clock        *clock
	mgr          *peering.Manager
	directory    []api.DirectoryPeer
}

const vpn = "198.18.0.0/16"

// podRange is the cluster's pod range of the fixture (k3s's default).
var podRange = joinkeys.DefaultPodRange

func newFixture(t *testing.T, hubOnly bool) *fixture {
	f := &fixture{t: t, self: key(t), master: key(t), b: key(t), c: key(t), routes: &routes{set: map[netip.Prefix]bool{}},
		clock: &clock{now: time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)}}
	f.dev = newDevice(t, f.master, pfx(vpn))
	f.directory = []api.DirectoryPeer{
		{Hostname: "gpu-a", PublicKey: f.self.String(), VPNIP: "198.18.0.2", PodCIDR: "10.42.1.0/24", Endpoints: []string{"192.0.2.1:51820"}},
		{Hostname: "gpu-b", PublicKey: f.b.String(), VPNIP: "198.18.0.3", PodCIDR: "10.42.2.0/24", Endpoints: []string{"192.0.2.2:51820"}},
		{Hostname: "gpu-c", PublicKey: f.c.String(), VPNIP: "198.18.0.4", PodCIDR: "10.42.3.0/24", Endpoints: []string{"192.0.2.3:51820", "203.0.113.3:51820"}},
	}
	f.mgr = f.manager(hubOnly)
	return f
}

func (f *fixture) manager(hubOnly bool) *peering.Manager {
	m, err := peering.New(f.dev, f.routes, peering.Options{Self: f.self, Master: f.master, MasterPrefixes: prefixes(vpn), PodRange: podRange, HubOnly: hubOnly, Now: f.clock.Now})
	must(f.t, err)
	must(f.t, m.SetPeers(f.directory))
	return m
}

// linkDirectly brings gpu-b and gpu-c to direct: a first try, and a
// handshake with each a second later.
func (f *fixture) linkDirectly() {
	f.t.Helper()
	f.step()
	f.clock.advance(time.Second)
	f.dev.handshake(f.b, f.clock.now)
	f.dev.handshake(f.c, f.clock.now)
	f.step()
}

func (f *fixture) step() {
	f.t.Helper()
	must(f.t, f.mgr.Step(context.Background()))
}

func (f *fixture) state(hostname string) api.LinkState {
	for _, l := range f.mgr.Links() {
		if l.Hostname == hostname {
			return l.State
		}
	}
	return ""
}

func (f *fixture) wantAllowed(k wgkey.Key, want []netip.Prefix, what string) {
	f.t.Helper()
	p, ok := f.dev.peer(k)
	if !ok {
		f.t.Fatalf("%s: no peer", what)
	}
	if !slices.Equal(p.AllowedIPs, want) && !(len(p.AllowedIPs) == 0 && len(want) == 0) {
		f.t.Errorf("%s: allowed IPs %v, want %v", what, p.AllowedIPs, want)
	}
}

// TestDirectFirstRelayedAfterTheTimeout: every other node gets a direct
// peer with its VPN address and pod CIDR; the one that handshakes is
// direct; the one that does not is relayed after the timeout, its pod
// CIDR with the master; its pod CIDRs are routed into the device either
// way; a later handshake makes it direct again; no prefix is ever on
// two peers (the device checks after every change).
func TestDirectFirstRelayedAfterTheTimeout(t *testing.T) {
	f := newFixture(t, false)
	f.step()
	if _, ok := f.dev.peer(f.self); ok {
		t.Fatal("the node peers with itself")
	}
	f.wantAllowed(f.b, prefixes("10.42.2.0/24", "198.18.0.3/32"), "gpu-b while connecting")
	f.wantAllowed(f.c, prefixes("10.42.3.0/24", "198.18.0.4/32"), "gpu-c while connecting")
	if p, _ := f.dev.peer(f.c); p.Endpoint.String() != "192.0.2.3:51820" || p.Keepalive != 25*time.Second {
		t.Errorf("gpu-c's peer: endpoint %s keepalive %s", p.Endpoint, p.Keepalive)
	}
	if f.state("gpu-b") != api.LinkConnecting || !f.routes.set[pfx("10.42.2.0/24")] || !f.routes.set[pfx("10.42.3.0/24")] || len(f.routes.set) != 2 {
		t.Errorf("after the first step: %v, routes %v", f.mgr.Links(), f.routes.set)
	}

	f.clock.advance(2 * time.Second)
	f.dev.handshake(f.b, f.clock.now)
	f.step()
	if f.state("gpu-b") != api.LinkDirect || f.state("gpu-c") != api.LinkConnecting {
		t.Fatalf("after b's handshake: %+v", f.mgr.Links())
	}
	f.clock.advance(14 * time.Second)
	f.step()
	if f.state("gpu-c") != api.LinkRelayed {
		t.Fatalf("gpu-c without a handshake for 16 s: %+v", f.mgr.Links())
	}
	f.wantAllowed(f.c, nil, "gpu-c relayed")
	f.wantAllowed(f.master, prefixes("10.42.3.0/24", vpn), "the master with gpu-c relayed")
	f.wantAllowed(f.b, prefixes("10.42.2.0/24", "198.18.0.3/32"), "gpu-b direct")
	if !f.routes.set[pfx("10.42.3.0/24")] {
		t.Error("gpu-c's pod CIDR is no longer routed into the device")
	}

	// The retry: a handshake at the next endpoint, traffic still relayed.
	kicks := f.dev.kicks[f.c]
	f.clock.advance(29 * time.Second)
	f.step()
	if f.dev.kicks[f.c] != kicks {
		t.Fatal("retried before RetryMin")
	}
	f.clock.advance(2 * time.Second)
	f.step()
	if p, _ := f.dev.peer(f.c); f.dev.kicks[f.c] != kicks+1 || p.Endpoint.String() != "203.0.113.3:51820" {
		t.Fatalf("the retry: %d handshakes asked, endpoint %s", f.dev.kicks[f.c]-kicks, p.Endpoint)
	}
	f.wantAllowed(f.c, nil, "gpu-c while retrying")
	f.clock.advance(time.Second)
	f.dev.handshake(f.c, f.clock.now)
	f.step()
	if f.state("gpu-c") != api.LinkDirect {
		t.Fatalf("gpu-c after its handshake: %+v", f.mgr.Links())
	}
	f.wantAllowed(f.c, prefixes("10.42.3.0/24", "198.18.0.4/32"), "gpu-c direct")
	f.wantAllowed(f.master, prefixes(vpn), "the master with every link direct")

	// Nothing changes while links stay live.
	n := len(f.dev.applied)
	f.clock.advance(100 * time.Second)
	f.dev.handshake(f.b, f.clock.now)
	f.dev.handshake(f.c, f.clock.now)
	f.step()
	if len(f.dev.applied) != n {
		t.Errorf("a steady state configured the device: %v", f.dev.applied[n:])
	}

	// b's link dies: stale after StaleAfter, relayed.
	f.clock.advance(196 * time.Second)
	f.dev.handshake(f.c, f.clock.now)
	f.step()
	if f.state("gpu-b") != api.LinkRelayed || f.state("gpu-c") != api.LinkDirect {
		t.Errorf("after b's handshake went stale: %+v", f.mgr.Links())
	}
	f.wantAllowed(f.master, prefixes("10.42.2.0/24", vpn), "the master with gpu-b relayed")
}

// TestGoneFromTheDirectory: a node that left loses its peer and its route.
func TestGoneFromTheDirectory(t *testing.T) {
	f := newFixture(t, false)
	f.step()
	f.clock.advance(20 * time.Second)
	f.step() // both relayed now: c's pod CIDR is with the master
	must(t, f.mgr.SetPeers(slices.DeleteFunc(slices.Clone(f.directory), func(p api.DirectoryPeer) bool { return p.Hostname == "gpu-c" })))
	f.step()
	if _, ok := f.dev.peer(f.c); ok {
		t.Error("gpu-c left but keeps its peer")
	}
	if f.routes.set[pfx("10.42.3.0/24")] {
		t.Error("gpu-c left but its pod CIDR is still routed")
	}
	f.wantAllowed(f.master, prefixes("10.42.2.0/24", vpn), "the master after gpu-c left")
	if len(f.mgr.Links()) != 1 {
		t.Errorf("links: %+v", f.mgr.Links())
	}
}

// TestRestartKeepsLiveLinks: a new manager (the agent restarted) takes the
// device's live direct peers as direct and changes nothing; before its
// first directory it touches nothing at all.
func TestRestartKeepsLiveLinks(t *testing.T) {
	f := newFixture(t, false)
	f.linkDirectly()
	n := len(f.dev.applied)
	restarted, err := peering.New(f.dev, f.routes, peering.Options{Self: f.self, Master: f.master, MasterPrefixes: prefixes(vpn), PodRange: podRange, Now: f.clock.Now})
	must(t, err)
	must(t, restarted.Step(context.Background()))
	must(t, restarted.SetPeers(f.directory))
	must(t, restarted.Step(context.Background()))
	if len(f.dev.applied) != n {
		t.Errorf("the restart configured the device: %v", f.dev.applied[n:])
	}
	for _, l := range restarted.Links() {
		if l.State != api.LinkDirect {
			t.Errorf("after the restart %s is %s", l.Hostname, l.State)
		}
	}
}

// TestHubOnly: no direct peer; the master holds every pod CIDR.
func TestHubOnly(t *testing.T) {
	f := newFixture(t, true)
	f.step()
	if _, ok := f.dev.peer(f.b); ok {
		t.Error("a hub-only node has a direct peer")
	}
	f.wantAllowed(f.master, prefixes("10.42.2.0/24", "10.42.3.0/24", vpn), "the master of a hub-only node")
	for _, l := range f.mgr.Links() {
		if l.State != api.LinkRelayed {
			t.Errorf("hub only: %s is %s", l.Hostname, l.State)
		}
	}
}

// TestDirectoryEntriesThatCannotBeUsed are skipped, named in the error;
// the others are taken.
func TestDirectoryEntriesThatCannotBeUsed(t *testing.T) {
	f := newFixture(t, false)
	bad := append(slices.Clone(f.directory),
		api.DirectoryPeer{Hostname: "bad-key", PublicKey: "nope", VPNIP: "198.18.0.9"},
		api.DirectoryPeer{Hostname: "same-ip", PublicKey: key(t).String(), VPNIP: "198.18.0.3"},
		api.DirectoryPeer{Hostname: "pods-in-vpn", PublicKey: key(t).String(), VPNIP: "198.18.0.10", PodCIDR: "198.18.5.0/24"},
		api.DirectoryPeer{Hostname: "bad-endpoint", PublicKey: key(t).String(), VPNIP: "198.18.0.11", Endpoints: []string{"nowhere"}},
	)
	err := f.mgr.SetPeers(bad)
	for _, name := range []string{"bad-key", "same-ip", "pods-in-vpn", "bad-endpoint"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("the error does not name %s: %v", name, err)
		}
	}
	f.step()
	// pods-in-vpn is linked by its VPN address alone: its pod CIDR is not
	// the cluster's.
	if got := len(f.mgr.Links()); got != 3 {
		t.Errorf("%d links, want gpu-b, gpu-c and pods-in-vpn: %+v", got, f.mgr.Links())
	}
	if f.routes.set[pfx("198.18.5.0/24")] {
		t.Error("pods-in-vpn's pod CIDR is routed")
	}
}

// A directory entry whose pod CIDR is not a node's prefix of the cluster's
// pod range (a public range, a LAN, another node's endpoints, every IPv6
// address) is skipped: nothing of it is routed or allowed into a peer.
func TestPodCIDRsOutsideTheClusterRangeAreRefused(t *testing.T) {
	for _, cidr := range []string{"8.8.0.0/16", "192.168.1.0/24", "192.0.2.0/24", "::/0", "10.42.0.0/16", "0.0.0.0/0"} {
		t.Run(cidr, func(t *testing.T) {
			f := newFixture(t, false)
			liar := key(t)
			err := f.mgr.SetPeers(append(slices.Clone(f.directory), api.DirectoryPeer{Hostname: "liar", PublicKey: liar.String(), VPNIP: "198.18.0.20", PodCIDR: cidr}))
			if err == nil || !strings.Contains(err.Error(), "liar") || !errors.Is(err, joinkeys.ErrPodCIDROutsideRange) {
				t.Errorf("SetPeers = %v, want the liar's pod CIDR left out", err)
			}
			f.step()
			for p := range f.routes.set {
				if p.String() == cidr {
					t.Errorf("%s is routed into the tunnel", cidr)
				}
			}
			for _, p := range f.dev.peers {
				for _, a := range p.AllowedIPs {
					if a.String() == cidr {
						t.Errorf("%s is allowed into the peer %s", cidr, p.PublicKey)
					}
				}
			}
		})
	}
	// Without a known pod range (an identity kept before the master said
	// it), no pod CIDR is taken.
	f := newFixture(t, false)
	m, err := peering.New(f.dev, f.routes, peering.Options{Self: f.self, Master: f.master, MasterPrefixes: prefixes(vpn), Now: f.clock.Now})
	must(t, err)
	if err := m.SetPeers(f.directory); err == nil || !errors.Is(err, joinkeys.ErrPodCIDROutsideRange) {
		t.Errorf("with no pod range, SetPeers = %v", err)
	}
	// Its peers are linked by their VPN addresses alone; once the range is
	// known (the directory says it), their pod CIDRs too.
	must(t, m.Step(context.Background()))
	if len(f.routes.set) != 0 {
		t.Errorf("routes without a pod range: %v", f.routes.set)
	}
	if got := len(m.Links()); got != 2 {
		t.Errorf("%d links without a pod range, want gpu-b and gpu-c", got)
	}
	m.SetPodRange(podRange)
	must(t, m.SetPeers(f.directory))
	must(t, m.Step(context.Background()))
	if len(f.routes.set) != 2 {
		t.Errorf("routes once the range is known: %v", f.routes.set)
	}
}

// Forget leaves the device with the master's peer alone, holding only its
// own prefixes, and no route of another node's pod CIDR.
func TestForgetDropsEveryDirectLink(t *testing.T) {
	f := newFixture(t, false)
	f.step()
	if len(f.dev.peers) != 3 || len(f.routes.set) != 2 {
		t.Fatalf("before: %d peers, routes %v", len(f.dev.peers), f.routes.set)
	}
	must(t, f.mgr.Forget(context.Background()))
	if len(f.dev.peers) != 1 || f.dev.peers[f.master] == nil || len(f.routes.set) != 0 {
		t.Errorf("after Forget: peers %v, routes %v", f.dev.peers, f.routes.set)
	}
	f.wantAllowed(f.master, prefixes(vpn), "the master after Forget")
	if len(f.mgr.Links()) != 0 {
		t.Errorf("links after Forget: %+v", f.mgr.Links())
	}
}

// TestRestartWhileRelayed: an agent restarted while a link is relayed
// keeps it relayed (nothing moves from the master, whose other side is
// relayed too) and asks for a handshake at once; the handshake makes it
// direct.
func TestRestartWhileRelayed(t *testing.T) {
	f := newFixture(t, false)
	f.step()
	f.clock.advance(time.Second)
	f.dev.handshake(f.b, f.clock.now)
	f.step()
	f.clock.advance(20 * time.Second)
	f.dev.receive(f.b, 32)
	f.step() // c relayed, b direct
	kicks := f.dev.kicks[f.c]
	f.mgr = f.manager(false)
	f.step()
	if f.state("gpu-c") != api.LinkRelayed || f.state("gpu-b") != api.LinkDirect {
		t.Fatalf("after the restart: %+v", f.mgr.Links())
	}
	f.wantAllowed(f.c, nil, "gpu-c after the restart")
	f.wantAllowed(f.master, prefixes("10.42.3.0/24", vpn), "the master after the restart")
	if f.dev.kicks[f.c] != kicks+1 {
		t.Errorf("the restart asked gpu-c for %d handshakes, want 1", f.dev.kicks[f.c]-kicks)
	}
	f.clock.advance(time.Second)
	f.dev.handshake(f.c, f.clock.now)
	f.step()
	if f.state("gpu-c") != api.LinkDirect {
		t.Errorf("gpu-c after its handshake: %+v", f.mgr.Links())
	}
	f.wantAllowed(f.master, prefixes(vpn), "the master with every link direct")
}

// TestSilentDirectLinkFallsBack: a direct link that receives nothing for
// more than two keepalives is relayed, though its handshake is not yet
// stale.
func TestSilentDirectLinkFallsBack(t *testing.T) {
	f := newFixture(t, false)
	f.step()
	f.clock.advance(time.Second)
	f.dev.handshake(f.b, f.clock.now)
	f.step()
	for range 3 {
		f.clock.advance(20 * time.Second)
		f.dev.receive(f.b, 32)
		f.step()
	}
	if f.state("gpu-b") != api.LinkDirect {
		t.Fatalf("gpu-b receiving keepalives: %+v", f.mgr.Links())
	}
	f.clock.advance(61 * time.Second)
	f.step()
	if f.state("gpu-b") != api.LinkRelayed {
		t.Errorf("gpu-b silent for 61 s: %+v", f.mgr.Links())
	}
	f.wantAllowed(f.master, prefixes("10.42.2.0/24", "10.42.3.0/24", vpn), "the master with gpu-b and gpu-c relayed")
}

// TestPodCIDRMovesBetweenNodes: a pod CIDR that moves from one node to
// another in one directory answer is taken from the first peer before
// the second gets it (the device checks every change).
func TestPodCIDRMovesBetweenNodes(t *testing.T) {
	f := newFixture(t, false)
	f.linkDirectly()
	moved := slices.Clone(f.directory)
	moved[1].PodCIDR, moved[2].PodCIDR = "", "10.42.2.0/24"
	must(t, f.mgr.SetPeers(moved))
	f.step()
	f.wantAllowed(f.b, prefixes("198.18.0.3/32"), "gpu-b after its pod CIDR moved")
	f.wantAllowed(f.c, prefixes("10.42.2.0/24", "198.18.0.4/32"), "gpu-c with gpu-b's old pod CIDR")
	if f.routes.set[pfx("10.42.3.0/24")] || !f.routes.set[pfx("10.42.2.0/24")] {
		t.Errorf("routes after the move: %v", f.routes.set)
	}
}

// TestNoMasterPeer: a device without the master's peer is an error Step
// names: nothing could fall back on the master.
func TestNoMasterPeer(t *testing.T) {
	f := newFixture(t, false)
	must(t, f.dev.Apply(context.Background(), []peering.PeerChange{{PublicKey: f.master, Remove: true}}))
	if err := f.mgr.Step(context.Background()); !errors.Is(err, peering.ErrNoMasterPeer) {
		t.Errorf("Step without the master's peer: %v", err)
	}
}

// TestNoNodeClaimsThisNodesPrefixes: another entry with this node's pod
// CIDR is skipped (its route would take this node's own pods away).
func TestNoNodeClaimsThisNodesPrefixes(t *testing.T) {
	f := newFixture(t, false)
	bad := append(slices.Clone(f.directory), api.DirectoryPeer{Hostname: "thief", PublicKey: key(t).String(), VPNIP: "198.18.0.9", PodCIDR: "10.42.1.0/24"})
	if err := f.mgr.SetPeers(bad); err == nil || !strings.Contains(err.Error(), "thief") {
		t.Errorf("an entry with this node's pod CIDR: %v", err)
	}
	f.step()
	if f.routes.set[pfx("10.42.1.0/24")] {
		t.Error("this node's own pod CIDR is routed into the tunnel")
	}
}

// TestMasterEndpointFollowsTheHub: the directory's master_endpoint moves
// the master's peer (another server replica took the device over) and
// keeps what it routes, including the pod CIDR of a relayed node.
func TestMasterEndpointFollowsTheHub(t *testing.T) {
	f := newFixture(t, true) // hub only: the master's peer holds b's and c's pod CIDRs
	ctx := context.Background()
	f.step()
	before, _ := f.dev.peer(f.master)
	moved := netip.MustParseAddrPort("192.0.2.50:51820")
	changed, err := f.mgr.SetMasterEndpoint(ctx, moved)
	if err != nil || !changed {
		t.Fatalf("SetMasterEndpoint = %v, %v", changed, err)
	}
	after, _ := f.dev.peer(f.master)
	if after.Endpoint != moved || !slices.Equal(after.AllowedIPs, before.AllowedIPs) || after.Keepalive != before.Keepalive {
		t.Errorf("the master's peer went from %+v to %+v; want only its endpoint moved", before, after)
	}
	if f.dev.kicks[f.master] == 0 {
		t.Error("no handshake was asked for at the new endpoint")
	}
	if changed, err := f.mgr.SetMasterEndpoint(ctx, moved); err != nil || changed {
		t.Errorf("the same endpoint again = %v, %v; want nothing changed", changed, err)
	}
	delete(f.dev.peers, f.master)
	if _, err := f.mgr.SetMasterEndpoint(ctx, netip.MustParseAddrPort("192.0.2.51:51820")); !errors.Is(err, peering.ErrNoMasterPeer) {
		t.Errorf("without a master peer: %v, want ErrNoMasterPeer", err)
	}
}

func (f *fixture) reason(hostname string) api.RelayedReason {
	for _, l := range f.mgr.Links() {
		if l.Hostname == hostname {
			return l.RelayedReason
		}
	}
	return ""
}

// TestRelayedLinksSayWhy: a node with no endpoint is relayed for want of
// a candidate; one behind a symmetric NAT (or this node behind one) for
// that; one whose handshakes time out for that; a direct link has no
// reason; --hub-only says so.
func TestRelayedLinksSayWhy(t *testing.T) {
	f := newFixture(t, false)
	f.directory[1].Endpoints = nil
	f.directory[2].NAT = api.NATEndpointDependent
	must(t, f.mgr.SetPeers(f.directory))
	f.step()
	if f.state("gpu-b") != api.LinkRelayed || f.reason("gpu-b") != api.RelayedNoCandidate {
		t.Errorf("gpu-b, no endpoint: %s %q, want relayed no_candidate", f.state("gpu-b"), f.reason("gpu-b"))
	}
	if f.reason("gpu-c") != "" {
		t.Errorf("gpu-c while connecting has reason %q", f.reason("gpu-c"))
	}
	f.clock.advance(16 * time.Second)
	f.step()
	if f.state("gpu-c") != api.LinkRelayed || f.reason("gpu-c") != api.RelayedSymmetricNAT {
		t.Errorf("gpu-c behind a symmetric NAT: %s %q, want relayed symmetric_nat", f.state("gpu-c"), f.reason("gpu-c"))
	}
	f.directory[2].NAT = api.NATEndpointIndependent
	must(t, f.mgr.SetPeers(f.directory))
	f.step()
	if f.reason("gpu-c") != api.RelayedProbesTimedOut {
		t.Errorf("gpu-c, handshakes timed out: %q, want probes_timed_out", f.reason("gpu-c"))
	}
	f.mgr.SetNAT(api.NATEndpointDependent)
	if f.reason("gpu-c") != api.RelayedSymmetricNAT {
		t.Errorf("this node behind a symmetric NAT: %q, want symmetric_nat", f.reason("gpu-c"))
	}
	f.directory[2].NAT = api.NATNone
	must(t, f.mgr.SetPeers(f.directory))
	f.step()
	if f.reason("gpu-c") != api.RelayedProbesTimedOut {
		t.Errorf("this node behind a symmetric NAT, gpu-c behind none: %q, want probes_timed_out (its packets would get through)", f.reason("gpu-c"))
	}
	f.dev.handshake(f.c, f.clock.now.Add(time.Second))
	f.clock.advance(2 * time.Second)
	f.step()
	if f.state("gpu-c") != api.LinkDirect || f.reason("gpu-c") != "" {
		t.Errorf("gpu-c after a handshake: %s %q, want direct with no reason", f.state("gpu-c"), f.reason("gpu-c"))
	}

	hub := newFixture(t, true)
	hub.step()
	if hub.reason("gpu-b") != api.RelayedHubOnly {
		t.Errorf("--hub-only: %q, want hub_only", hub.reason("gpu-b"))
	}
}

// TestDirectLinkFollowsAMovedEndpoint: when the master sees a directly
// linked node's packets come from a new port (its NAT mapped it anew),
// the peer is pointed there at once, with a handshake, and stays direct;
// a link that found its way at another endpoint is left where it is.
func TestDirectLinkFollowsAMovedEndpoint(t *testing.T) {
	f := newFixture(t, false)
	f.step()
	f.dev.handshake(f.b, f.clock.now.Add(time.Second))
	f.dev.handshake(f.c, f.clock.now.Add(time.Second))
	f.clock.advance(2 * time.Second)
	f.step()
	if f.state("gpu-b") != api.LinkDirect || f.state("gpu-c") != api.LinkDirect {
		t.Fatalf("links %v, want both direct", f.mgr.Links())
	}
	// c's link works at its second endpoint (WireGuard roamed there).
	f.dev.mu.Lock()
	f.dev.peers[f.c].Endpoint = netip.MustParseAddrPort("203.0.113.3:51820")
	f.dev.mu.Unlock()
	f.step()
	kicks := map[wgkey.Key]int{f.b: f.dev.kicks[f.b], f.c: f.dev.kicks[f.c]}

	f.directory[1].Endpoints = []string{"192.0.2.2:40000"}
	f.directory[2].Endpoints = []string{"192.0.2.3:40000", "203.0.113.3:51820"}
	must(t, f.mgr.SetPeers(f.directory))
	f.step()
	if p, _ := f.dev.peer(f.b); p.Endpoint != netip.MustParseAddrPort("192.0.2.2:40000") || f.dev.kicks[f.b] != kicks[f.b]+1 {
		t.Errorf("gpu-b's peer at %s after %d handshakes asked, want 192.0.2.2:40000 and one more", p.Endpoint, f.dev.kicks[f.b]-kicks[f.b])
	}
	if p, _ := f.dev.peer(f.c); p.Endpoint != netip.MustParseAddrPort("203.0.113.3:51820") || f.dev.kicks[f.c] != kicks[f.c] {
		t.Errorf("gpu-c's peer moved to %s (or was kicked) though its link works at another endpoint", p.Endpoint)
	}
	if f.state("gpu-b") != api.LinkDirect {
		t.Errorf("gpu-b is %s after following its endpoint, want direct", f.state("gpu-b"))
	}

	// The master no longer sees b (it restarted): b's reported endpoint
	// leads the list now, and the working link stays where it is.
	f.directory[1].Endpoints = []string{"192.0.2.2:40000", "198.51.100.2:51820"}
	must(t, f.mgr.SetPeers(f.directory))
	f.step()
	f.directory[1].Endpoints = []string{"198.51.100.2:51820"}
	must(t, f.mgr.SetPeers(f.directory))
	f.step()
	if p, _ := f.dev.peer(f.b); p.Endpoint != netip.MustParseAddrPort("192.0.2.2:40000") {
		t.Errorf("gpu-b's peer moved to %s when the master's observation went, want it left at 192.0.2.2:40000", p.Endpoint)
	}
	// The master observes b again, at another address: the link working
	// at b's reported endpoint stays there.
	f.dev.mu.Lock()
	f.dev.peers[f.b].Endpoint = netip.MustParseAddrPort("198.51.100.2:51820")
	f.dev.mu.Unlock()
	f.step()
	f.directory[1].Endpoints = []string{"203.0.113.80:40000", "198.51.100.2:51820"}
	must(t, f.mgr.SetPeers(f.directory))
	f.step()
	if p, _ := f.dev.peer(f.b); p.Endpoint != netip.MustParseAddrPort("198.51.100.2:51820") {
		t.Errorf("gpu-b's peer moved to %s when the master first observed it, want it left at its reported 198.51.100.2:51820", p.Endpoint)
	}
}

// flows is the machine's flows, set by the test.
type flows struct {
	mu    sync.Mutex
	addrs []netip.Addr
}

func (f *flows) Addresses(context.Context) ([]netip.Addr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.addrs), nil
}

func (f *flows) set(addrs ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addrs = nil
	for _, a := range addrs {
		f.addrs = append(f.addrs, netip.MustParseAddr(a))
	}
}

// TestLinksOnDemand: with OnDemand no node has a peer until traffic
// reaches it (its VPN address or an address in its pod CIDR); then it is
// linked as ever, and when no flow names it for IdleAfter its peer goes
// and its pod CIDR returns to the master. Prefixes never sit on two peers
// (the device checks).
func TestLinksOnDemand(t *testing.T) {
	f := newFixture(t, false)
	fl := &flows{}
	if _, err := peering.New(f.dev, f.routes, peering.Options{Self: f.self, Master: f.master, MasterPrefixes: prefixes(vpn), OnDemand: true}); err == nil {
		t.Error("OnDemand without Flows is accepted")
	}
	m, err := peering.New(f.dev, f.routes, peering.Options{Self: f.self, Master: f.master, MasterPrefixes: prefixes(vpn), PodRange: podRange,
		OnDemand: true, IdleAfter: time.Minute, Flows: fl, Now: f.clock.Now})
	must(t, err)
	must(t, m.SetPeers(f.directory))
	f.mgr = m
	fl.set("198.18.0.1", "192.0.2.99") // the master and an outside host: no node
	f.step()
	for _, h := range []string{"gpu-b", "gpu-c"} {
		if f.state(h) != api.LinkRelayed || f.reason(h) != api.RelayedIdle {
			t.Errorf("%s before any traffic: %s %q, want relayed idle", h, f.state(h), f.reason(h))
		}
	}
	if _, ok := f.dev.peer(f.b); ok {
		t.Error("an idle node has a peer on the device")
	}
	f.wantAllowed(f.master, prefixes("10.42.2.0/24", "10.42.3.0/24", vpn), "the master before any traffic")
	if !f.routes.set[pfx("10.42.2.0/24")] || !f.routes.set[pfx("10.42.3.0/24")] {
		t.Errorf("idle nodes' pod CIDRs are not routed into the device: %v", f.routes.set)
	}

	// Traffic to b's VPN address and into c's pod CIDR: each is tried at
	// once, its traffic staying with the master until a handshake.
	kicks := map[wgkey.Key]int{f.b: f.dev.kicks[f.b], f.c: f.dev.kicks[f.c]}
	fl.set("198.18.0.1", "198.18.0.3", "10.42.3.17")
	f.step()
	for _, k := range []wgkey.Key{f.b, f.c} {
		p, ok := f.dev.peer(k)
		if !ok || len(p.AllowedIPs) != 0 || !p.Endpoint.IsValid() || f.dev.kicks[k] != kicks[k]+1 {
			t.Errorf("a node with traffic: peer %+v (present %v), %d handshakes asked; want one at its endpoint, holding nothing yet", p, ok, f.dev.kicks[k]-kicks[k])
		}
	}
	if f.state("gpu-b") != api.LinkRelayed || f.reason("gpu-b") == api.RelayedIdle {
		t.Errorf("gpu-b tried: %s %q, want relayed (not idle) until its handshake", f.state("gpu-b"), f.reason("gpu-b"))
	}
	f.wantAllowed(f.master, prefixes("10.42.2.0/24", "10.42.3.0/24", vpn), "the master while the handshakes are under way")
	f.dev.handshake(f.b, f.clock.now.Add(time.Second))
	f.clock.advance(2 * time.Second)
	f.step()
	if f.state("gpu-b") != api.LinkDirect {
		t.Errorf("gpu-b after a handshake: %s, want direct", f.state("gpu-b"))
	}
	f.wantAllowed(f.b, prefixes("10.42.2.0/24", "198.18.0.3/32"), "gpu-b linked on demand")

	// The traffic stops (the master's flow stays: the table is read):
	// after IdleAfter both peers go.
	fl.set("198.18.0.1")
	f.clock.advance(30 * time.Second)
	f.dev.receive(f.b, 32) // b's keepalive: not traffic of this machine's
	f.step()
	if f.state("gpu-b") != api.LinkDirect {
		t.Errorf("gpu-b half the idle time after the traffic: %s, want still direct", f.state("gpu-b"))
	}
	f.clock.advance(31 * time.Second)
	f.step()
	for _, h := range []string{"gpu-b", "gpu-c"} {
		if f.state(h) != api.LinkRelayed || f.reason(h) != api.RelayedIdle {
			t.Errorf("%s after IdleAfter without traffic: %s %q, want relayed idle", h, f.state(h), f.reason(h))
		}
	}
	for _, k := range []wgkey.Key{f.b, f.c} {
		if _, ok := f.dev.peer(k); ok {
			t.Errorf("an idled node's peer stays on the device")
		}
	}
	f.wantAllowed(f.master, prefixes("10.42.2.0/24", "10.42.3.0/24", vpn), "the master after the links idled")

	// Traffic again: tried again.
	kicks[f.b] = f.dev.kicks[f.b]
	fl.set("10.42.2.5")
	f.step()
	if _, ok := f.dev.peer(f.b); !ok || f.dev.kicks[f.b] != kicks[f.b]+1 || f.reason("gpu-b") == api.RelayedIdle {
		t.Errorf("gpu-b with traffic again: present %v, %d handshakes asked, reason %q", ok, f.dev.kicks[f.b]-kicks[f.b], f.reason("gpu-b"))
	}
}

// TestLinksOnDemandAboveAFleetSize: with OnDemandAbove, a directory of
// more nodes than that links on demand until it names fewer than four
// fifths of it, a smaller one links every node.
func TestLinksOnDemandAboveAFleetSize(t *testing.T) {
	f := newFixture(t, false)
	for i := range 4 {
		f.directory = append(f.directory, api.DirectoryPeer{Hostname: fmt.Sprintf("gpu-x%d", i), PublicKey: key(t).String(),
			VPNIP: fmt.Sprintf("198.18.0.%d", 10+i), Endpoints: []string{fmt.Sprintf("192.0.2.%d:51820", 10+i)}})
	}
	fl := &flows{}
	fl.set("198.18.0.1")
	m, err := peering.New(f.dev, f.routes, peering.Options{Self: f.self, Master: f.master, MasterPrefixes: prefixes(vpn), PodRange: podRange,
		OnDemandAbove: 4, Flows: fl, Now: f.clock.Now})
	must(t, err)
	f.mgr = m
	for _, c := range []struct {
		others int
		idle   bool
	}{{6, true}, {4, true}, {3, false}, {5, false}, {6, false}} {
		must(t, m.SetPeers(f.directory[:1+c.others]))
		f.step()
		if got := f.reason("gpu-b") == api.RelayedIdle; got != c.idle {
			t.Errorf("%d other nodes, bound 4: gpu-b %s %q, want idle %v", c.others, f.state("gpu-b"), f.reason("gpu-b"), c.idle)
		}
	}
	// Above the bound again: the links made idle IdleAfter later.
	f.clock.advance(5*time.Minute + time.Second)
	f.step()
	if f.reason("gpu-b") != api.RelayedIdle {
		t.Errorf("IdleAfter past the switch to on demand: gpu-b %s %q, want relayed idle", f.state("gpu-b"), f.reason("gpu-b"))
	}
}

// failingFlows cannot be read, or read nothing (the kernel tracks no
// connection).
type failingFlows struct{ empty bool }

func (f failingFlows) Addresses(context.Context) ([]netip.Addr, error) {
	if f.empty {
		return nil, nil
	}
	return nil, errors.New("no connection tracking here")
}

// TestFlowsThatCannotBeRead: a few failed reads keep the last flows read;
// ten in a row link every node; a read that finds nothing tracked counts
// as failed.
func TestFlowsThatCannotBeRead(t *testing.T) {
	for _, empty := range []bool{false, true} {
		f := newFixture(t, false)
		m, err := peering.New(f.dev, f.routes, peering.Options{Self: f.self, Master: f.master, MasterPrefixes: prefixes(vpn), PodRange: podRange,
			OnDemand: true, Flows: failingFlows{empty}, Now: f.clock.Now})
		must(t, err)
		must(t, m.SetPeers(f.directory))
		f.mgr = m
		for i := 1; i < 10; i++ {
			f.step()
			if f.reason("gpu-b") != api.RelayedIdle {
				t.Fatalf("empty %v: after %d failed reads gpu-b is %s %q, want idle still", empty, i, f.state("gpu-b"), f.reason("gpu-b"))
			}
		}
		f.step()
		for _, l := range m.Links() {
			if l.RelayedReason == api.RelayedIdle {
				t.Errorf("empty %v: after ten failed reads %s is idle, want every node tried", empty, l.Hostname)
			}
		}
	}
}

// send counts bytes sent to the peer.
func (d *device) send(key wgkey.Key, n int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.peers[key].TxBytes += n
}

// TestOneWayDirectLinkFallsBack: a direct link that sends and hears
// nothing back for a keepalive and more (the other side dropped its peer)
// falls back at once, not after two keepalives of silence; sending little
// (a keepalive) does not.
func TestOneWayDirectLinkFallsBack(t *testing.T) {
	f := newFixture(t, false)
	f.linkDirectly()
	f.dev.send(f.c, 32) // c: a keepalive out, nothing back
	f.dev.send(f.b, 4096)
	f.clock.advance(31 * time.Second)
	f.step()
	if f.state("gpu-b") != api.LinkRelayed {
		t.Errorf("gpu-b sent 4 KB and heard nothing for 31 s: %s, want relayed", f.state("gpu-b"))
	}
	if f.state("gpu-c") != api.LinkDirect {
		t.Errorf("gpu-c sent a keepalive and heard nothing for 31 s: %s, want direct still", f.state("gpu-c"))
	}
}

// countingFlows counts its reads.
type countingFlows struct {
	flows
	reads int
}

func (c *countingFlows) Addresses(ctx context.Context) ([]netip.Addr, error) {
	c.reads++
	return c.flows.Addresses(ctx)
}

// TestFlowsAreReadOnlyWhenNeeded: below four fifths of OnDemandAbove the
// flows are not read at all; on demand they are read at most every
// FlowsEvery.
func TestFlowsAreReadOnlyWhenNeeded(t *testing.T) {
	f := newFixture(t, false)
	fl := &countingFlows{}
	fl.set("198.18.0.1")
	m, err := peering.New(f.dev, f.routes, peering.Options{Self: f.self, Master: f.master, MasterPrefixes: prefixes(vpn), PodRange: podRange,
		OnDemandAbove: 100, FlowsEvery: 2 * time.Second, Flows: fl, Now: f.clock.Now})
	must(t, err)
	must(t, m.SetPeers(f.directory))
	f.mgr = m
	for range 5 {
		f.step()
	}
	if fl.reads != 0 {
		t.Errorf("two nodes under a bound of 100: the flows were read %d times", fl.reads)
	}
	g := newFixture(t, false)
	gl := &countingFlows{}
	gl.set("198.18.0.1")
	m, err = peering.New(g.dev, g.routes, peering.Options{Self: g.self, Master: g.master, MasterPrefixes: prefixes(vpn), PodRange: podRange,
		OnDemand: true, FlowsEvery: 2 * time.Second, Flows: gl, Now: g.clock.Now})
	must(t, err)
	must(t, m.SetPeers(g.directory))
	g.mgr = m
	for range 5 {
		g.step()
		g.clock.advance(500 * time.Millisecond)
	}
	if gl.reads != 2 {
		t.Errorf("five Steps over 2.5 s, every 2 s: %d reads, want 2", gl.reads)
	}
}
