package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/internal/childproc"
	"gridweave.dev/internal/netnstest"
	"gridweave.dev/mesh/wgkey"
)

// wgShow prints the WireGuard device iface as JSON (the stand-in
// `wg-show`, run as a machine: its wireguard-go socket is in the
// machine's own /run/wireguard).
func wgShow(iface string, w io.Writer) error {
	c, err := wgctrl.New()
	if err != nil {
		return err
	}
	defer c.Close()
	d, err := c.Device(iface)
	if err != nil {
		return err
	}
	return json.NewEncoder(w).Encode(d)
}

// devicePeer is a peer as wgShow prints it.
type devicePeer struct {
	PublicKey         [32]byte
	AllowedIPs        []net.IPNet
	LastHandshakeTime time.Time
	ReceiveBytes      int64
	TransmitBytes     int64
}

// device reads the machine's WireGuard device, and fails the test if a
// prefix is on two of its peers (WireGuard's rule).
func (n *node) device() []devicePeer {
	n.t.Helper()
	self, err := os.Executable()
	if err != nil {
		n.t.Fatal(err)
	}
	code, stdout, stderr := n.run(fmt.Sprintf("%s=wg-show %q gridweave0", standInEnv, self))
	if code != 0 {
		n.t.Fatalf("%s: wg-show: %s", n.hostname, stderr)
	}
	var d struct{ Peers []devicePeer }
	if err := json.Unmarshal([]byte(stdout), &d); err != nil {
		n.t.Fatalf("%s: wg-show: %v: %s", n.hostname, err, stdout)
	}
	holders := map[string]int{}
	for i, p := range d.Peers {
		for _, ipn := range p.AllowedIPs {
			if j, ok := holders[ipn.String()]; ok {
				n.t.Errorf("%s: %s is on two peers (%d and %d)", n.hostname, ipn.String(), j, i)
			}
			holders[ipn.String()] = i
		}
	}
	return d.Peers
}

// linkService is a machine's link service (join-node --serve), run as the
// systemd unit the join writes would run it.
type linkService struct {
	n      *node
	cmd    *exec.Cmd
	exited chan struct{}
	log    *bytes.Buffer
	mu     *sync.Mutex
}

func (n *node) serve(extra ...string) *linkService {
	n.t.Helper()
	command := fmt.Sprintf("exec /var/lib/gridweave/join-node --master %s --pin %s --state-dir /var/lib/gridweave --serve %s",
		n.m.url, n.m.pin, strings.Join(extra, " "))
	s := &linkService{n: n, cmd: n.command(command), exited: make(chan struct{}), log: &bytes.Buffer{}, mu: &sync.Mutex{}}
	w := &lockedWriter{mu: s.mu, w: s.log}
	s.cmd.Stdout, s.cmd.Stderr = w, w
	waited, err := childproc.Start(s.cmd)
	if err != nil {
		n.t.Fatal(err)
	}
	go func() { <-waited; close(s.exited) }()
	n.t.Cleanup(func() {
		s.stop()
		if n.t.Failed() {
			n.t.Logf("%s's link service:\n%s", n.hostname, s.logs())
		}
	})
	return s
}

func (s *linkService) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

func (s *linkService) logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// links is a node's last link report, as the admin reads it.
func (m *master) links(hostname string) api.NodeLinks {
	m.t.Helper()
	status, body := m.api("GET", "/v1/nodes/"+hostname+"/links", nil)
	if status != 200 {
		m.t.Fatalf("links of %s: %d %v", hostname, status, body)
	}
	raw, _ := json.Marshal(body)
	var out api.NodeLinks
	if err := json.Unmarshal(raw, &out); err != nil {
		m.t.Fatal(err)
	}
	return out
}

// linkStates is hostname → other hostname → state.
type linkStates map[string]map[string]api.LinkState

// waitForLinks waits until every node's report says want, and returns
// the reports.
func (m *master) waitForLinks(want linkStates, limit time.Duration) map[string]api.NodeLinks {
	m.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		got := map[string]api.NodeLinks{}
		var diff []string
		for host, peers := range want {
			rep := m.links(host)
			got[host] = rep
			have := map[string]api.LinkState{}
			for _, l := range rep.Links {
				have[l.Hostname] = l.State
			}
			for peer, state := range peers {
				if have[peer] != state {
					diff = append(diff, fmt.Sprintf("%s→%s is %q, want %q", host, peer, have[peer], state))
				}
			}
			if len(have) != len(peers) {
				diff = append(diff, fmt.Sprintf("%s reports %d links, want %d", host, len(have), len(peers)))
			}
		}
		if len(diff) == 0 {
			return got
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("after %s the links are not as wanted: %s", limit, strings.Join(diff, "; "))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// udpEchoServer echoes datagrams at addr inside ns until the test ends.
func udpEchoServer(t testing.TB, ns *netnstest.Namespace, addr string) {
	t.Helper()
	var conn net.PacketConn
	if err := ns.Do(func() (err error) { conn, err = net.ListenPacket("udp", addr); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = conn.WriteTo(buf[:n], from)
		}
	}()
}

// udpLoss sends count numbered datagrams from inside ns to an echo at
// addr, one every interval, each waiting up to a second for its echo, and
// returns how many never came back.
func udpLoss(t testing.TB, ns *netnstest.Namespace, addr string, count int, interval time.Duration) int {
	t.Helper()
	var conn net.Conn
	if err := ns.Do(func() (err error) { conn, err = net.Dial("udp", addr); return err }); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	lost := 0
	buf := make([]byte, 64)
	for i := range count {
		start := time.Now()
		want := fmt.Sprintf("seq %d", i)
		if _, err := conn.Write([]byte(want)); err != nil {
			lost++
			continue
		}
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		got := false
		for !got {
			n, err := conn.Read(buf)
			if err != nil {
				break
			}
			got = string(buf[:n]) == want
		}
		if !got {
			lost++
		}
		time.Sleep(max(0, interval-time.Since(start)))
	}
	return lost
}

// TestDirectLinksWithTheMasterAsFallback joins three machines over
// wireguard-go and runs each one's link service. a and b reach each
// other's underlay (their links forward through the host, as a LAN
// would); c reaches only the master. a↔b link directly; every link of
// c is relayed through the master. Traffic flows between every pair (VPN
// and pod addresses); the reports, the node list and the metrics say
// which links are direct; with the master stopped a↔b lose nothing over
// 30 s; after the master's restart no direct link was lost; c's leave
// removes it from every peer.
func TestDirectLinksWithTheMasterAsFallback(t *testing.T) {
	if testing.Short() {
		t.Skip("network namespaces, wireguard-go and the test control plane; run make test")
	}
	// Beside the other link tests (their machines, addresses and masters
	// are their own), after every test that is not parallel.
	t.Parallel()
	m := startMaster(t)
	command := m.joinCommand()
	names := []string{"link-a", "link-b", "link-c"}
	nodes := map[string]*node{}
	vpnIPs := map[string]netip.Addr{}
	for i, h := range names {
		n := m.newNode(40+i, h, true)
		code, stdout, stderr := n.run(command)
		if code != 0 {
			t.Fatalf("%s: join exit %d: %s %s", h, code, stdout, stderr)
		}
		if !strings.Contains(stderr, "run the link service yourself") {
			t.Errorf("%s: a join without systemd does not say how to run the link service: %s", h, stderr)
		}
		vpnIPs[h], _ = joined(t, stdout)
		nodes[h] = n
	}
	a, b, c := nodes["link-a"], nodes["link-b"], nodes["link-c"]
	// a and b reach each other's underlay through the host; c's is routed
	// only to the master's (the host's) namespace.
	enableForwarding(t, m.device, a.hostLink, b.hostLink)
	a.ns.IP(t, "route", "add", b.underlay.String()+"/32", "via", a.underlay.Prev().String())
	b.ns.IP(t, "route", "add", a.underlay.String()+"/32", "via", b.underlay.Prev().String())

	services := map[string]*linkService{}
	started := time.Now()
	for _, h := range names {
		services[h] = nodes[h].serve()
	}
	all := func(c api.LinkState) linkStates {
		return linkStates{
			"link-a": {"link-b": api.LinkDirect, "link-c": c},
			"link-b": {"link-a": api.LinkDirect, "link-c": c},
			"link-c": {"link-a": c, "link-b": c},
		}
	}
	m.waitForLinks(all(api.LinkRelayed), 60*time.Second)
	t.Logf("links settled %s after the services started (c relayed after the 15 s handshake bound)", time.Since(started).Round(100*time.Millisecond))

	// Every pair talks, at VPN and at pod addresses.
	for _, h := range names {
		n := nodes[h]
		n.ns.IP(t, "address", "add", n.podCIDR.Addr().Next().String()+"/32", "dev", "lo")
		echoServer(t, n.ns, netip.AddrPortFrom(vpnIPs[h], 7777).String())
		echoServer(t, n.ns, netip.AddrPortFrom(n.podCIDR.Addr().Next(), 7777).String())
	}
	for _, from := range names {
		for _, to := range names {
			if from == to {
				continue
			}
			for _, addr := range []netip.Addr{vpnIPs[to], nodes[to].podCIDR.Addr().Next()} {
				target := netip.AddrPortFrom(addr, 7777).String()
				if err := within(20*time.Second, func() error { return nodes[from].echo(target) }); err != nil {
					t.Errorf("%s does not reach %s at %s: %v", from, to, target, err)
				}
			}
		}
	}

	// The device of each machine: a direct peer holds the other machine's
	// VPN address and pod CIDR; a relayed one holds nothing, its pod CIDR
	// is the master's; no prefix on two peers (device checks).
	keys := map[[32]byte]string{}
	for _, h := range names {
		_, body := m.api("GET", "/v1/nodes/"+h, nil)
		key, _ := wgkey.Parse(body["node"].(map[string]any)["public_key"].(string))
		keys[key] = h
	}
	for _, h := range names {
		peers := nodes[h].device()
		if len(peers) != 3 {
			t.Errorf("%s's device has %d peers, want the master and two nodes", h, len(peers))
		}
		for _, p := range peers {
			var held []string
			for _, ipn := range p.AllowedIPs {
				held = append(held, ipn.String())
			}
			slices.Sort(held)
			other, isNode := keys[p.PublicKey]
			var want []string
			switch {
			case !isNode: // the master: the VPN, and the pod CIDRs of the relayed nodes
				want = []string{m.vpnPrefix.String()}
				for _, r := range names {
					if r != h && (h == "link-c" || r == "link-c") {
						want = append(want, nodes[r].podCIDR.String())
					}
				}
			case h == "link-c" || other == "link-c": // relayed: nothing
			default: // direct: the other's VPN address and pod CIDR
				want = []string{vpnIPs[other].String() + "/32", nodes[other].podCIDR.String()}
			}
			slices.Sort(want)
			if !slices.Equal(held, want) {
				t.Errorf("on %s, the peer of %s holds %v, want %v", h, map[bool]string{true: other, false: "the master"}[isNode], held, want)
			}
		}
	}
	var list struct{ Nodes []api.Node }
	_, body := m.api("GET", "/v1/nodes", nil)
	raw, _ := json.Marshal(body)
	_ = json.Unmarshal(raw, &list)
	for _, n := range list.Nodes {
		want := map[string][2]int{"link-a": {1, 1}, "link-b": {1, 1}, "link-c": {0, 2}}[n.Hostname]
		if n.Links == nil || n.Links.Direct != want[0] || n.Links.Relayed != want[1] {
			t.Errorf("GET /v1/nodes: %s's links %+v, want %d direct and %d relayed", n.Hostname, n.Links, want[0], want[1])
		}
	}
	status, metrics := m.metrics()
	for _, want := range []string{`gridweave_mesh_links{state="direct"} 1`, `gridweave_mesh_links{state="relayed"} 2`} {
		if status != 200 || !strings.Contains(metrics, want) {
			t.Errorf("the metrics (%d) lack %s", status, want)
		}
	}

	// The master stops, its device with it: a↔b lose nothing.
	udpEchoServer(t, b.ns, netip.AddrPortFrom(vpnIPs["link-b"], 7778).String())
	m.stop()
	if _, err := net.InterfaceByName(m.device); err == nil {
		t.Fatal("the master's device outlived the server")
	}
	if lost := udpLoss(t, a.ns, netip.AddrPortFrom(vpnIPs["link-b"], 7778).String(), 300, 100*time.Millisecond); lost != 0 {
		t.Errorf("with the master stopped, %d of 300 datagrams between the directly linked a and b were lost", lost)
	} else {
		t.Log("master stopped: 300 of 300 datagrams a → b → a over 30 s came back")
	}
	if err := a.echo(netip.AddrPortFrom(vpnIPs["link-c"], 7777).String()); err == nil {
		t.Error("with the master stopped, a still reaches c: the relayed link does not go through the master")
	}

	// The master comes back: the watches reconnect, the reports resume,
	// a↔c flows through it again, and no direct link was lost.
	m.start()
	enableForwarding(t, m.device) // a new device
	m.waitForLinks(all(api.LinkRelayed), 30*time.Second)
	if err := within(20*time.Second, func() error { return a.echo(netip.AddrPortFrom(vpnIPs["link-c"], 7777).String()) }); err != nil {
		t.Errorf("a does not reach c through the restarted master: %v", err)
	}
	// Each of a and b tried two links, made one direct and relayed c's,
	// once each: the master's absence and return changed no link.
	for _, h := range []string{"link-a", "link-b"} {
		logs := services[h].logs()
		for msg, want := range map[string]int{"link connecting": 2, "link direct": 1, "link relayed": 1, "node gone from the directory": 0} {
			if got := strings.Count(logs, `msg="`+msg); got != want {
				t.Errorf("%s's link service logged %q %d times, want %d:\n%s", h, msg, got, want, logs)
			}
		}
	}

	// c leaves: every peer drops it.
	if code, stdout, stderr := c.run("/var/lib/gridweave/join-node --master " + m.url + " --pin " + m.pin.String() + " --leave"); code != 0 {
		t.Fatalf("leave: %d %s %s", code, stdout, stderr)
	}
	select {
	case <-services["link-c"].exited:
	case <-time.After(15 * time.Second):
		t.Error("c's link service outlived its leave")
	}
	m.waitForLinks(linkStates{"link-a": {"link-b": api.LinkDirect}, "link-b": {"link-a": api.LinkDirect}}, 20*time.Second)
	for _, h := range []string{"link-a", "link-b"} {
		if peers := nodes[h].device(); len(peers) != 2 {
			t.Errorf("after c left %s's device has %d peers, want the master and one node", h, len(peers))
		}
	}
}

// metrics reads the master's /metrics as the admin.
func (m *master) metrics() (int, string) {
	m.t.Helper()
	req, _ := http.NewRequest("GET", m.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+e2eAdminToken)
	resp, err := m.client.Do(req)
	if err != nil {
		m.t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}
