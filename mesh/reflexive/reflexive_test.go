package reflexive

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/pion/stun/v3"
)

// servers starts n reflexive services on loopback.
func servers(t *testing.T, n int) []netip.AddrPort {
	t.Helper()
	var out []netip.AddrPort
	for range n {
		conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- Serve(conn) }()
		t.Cleanup(func() {
			conn.Close()
			if err := <-done; err != nil {
				t.Errorf("Serve after Close: %v", err)
			}
		})
		out = append(out, conn.LocalAddr().(*net.UDPAddr).AddrPort())
	}
	return out
}

// userspaceNAT stands between a probe and the servers: a front address
// per server, each forwarding to its server from an outside socket. With
// perDestination, each front has its own outside socket (a symmetric
// NAT); else one outside socket serves every front (an
// endpoint-independent one).
type userspaceNAT struct {
	t              *testing.T
	perDestination bool
	mu             sync.Mutex
	outside        map[string]net.PacketConn // by front, or "" for the shared one
	back           map[netip.AddrPort]func([]byte)
}

func (u *userspaceNAT) fronts(servers []netip.AddrPort) []netip.AddrPort {
	var out []netip.AddrPort
	for _, s := range servers {
		front, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			u.t.Fatal(err)
		}
		u.t.Cleanup(func() { front.Close() })
		key := ""
		if u.perDestination {
			key = front.LocalAddr().String()
		}
		go u.forward(front, key, s)
		out = append(out, front.LocalAddr().(*net.UDPAddr).AddrPort())
	}
	return out
}

// forward carries each datagram from the inside to server through the
// outside socket of key; that socket's reader carries the answers back.
func (u *userspaceNAT) forward(front net.PacketConn, key string, server netip.AddrPort) {
	buf := make([]byte, 2048)
	for {
		n, inside, err := front.ReadFrom(buf)
		if err != nil {
			return
		}
		out := u.socket(key)
		if out == nil {
			return
		}
		u.mu.Lock()
		u.back[server] = func(b []byte) { _, _ = front.WriteTo(b, inside) }
		u.mu.Unlock()
		_, _ = out.WriteTo(buf[:n], net.UDPAddrFromAddrPort(server))
	}
}

func (u *userspaceNAT) socket(key string) net.PacketConn {
	u.mu.Lock()
	defer u.mu.Unlock()
	if c, ok := u.outside[key]; ok {
		return c
	}
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		u.t.Error(err)
		return nil
	}
	u.t.Cleanup(func() { c.Close() })
	u.outside[key] = c
	go func() {
		reply := make([]byte, 2048)
		for {
			m, from, err := c.ReadFrom(reply)
			if err != nil {
				return
			}
			u.mu.Lock()
			back := u.back[from.(*net.UDPAddr).AddrPort()]
			u.mu.Unlock()
			if back != nil {
				back(reply[:m])
			}
		}
	}()
	return c
}

func TestProbeWithoutNAT(t *testing.T) {
	s := servers(t, 2)
	res, err := Probe(context.Background(), s, ProbeOptions{Local: []netip.Addr{netip.MustParseAddr("127.0.0.1")}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Mapping != MappingNone {
		t.Errorf("mapping %q, want %q (seen %v from %v)", res.Mapping, MappingNone, res.Seen, res.Local)
	}
	for i, seen := range res.Seen {
		if seen.Port() != res.Local.Port() || seen.Addr() != netip.MustParseAddr("127.0.0.1") {
			t.Errorf("server %d saw %v, want 127.0.0.1:%d", i, seen, res.Local.Port())
		}
	}
}

func TestProbeTellsTheNATsMapping(t *testing.T) {
	s := servers(t, 2)
	for _, tc := range []struct {
		perDestination bool
		want           Mapping
	}{{false, MappingEndpointIndependent}, {true, MappingEndpointDependent}} {
		nat := &userspaceNAT{t: t, perDestination: tc.perDestination, outside: map[string]net.PacketConn{}, back: map[netip.AddrPort]func([]byte){}}
		res, err := Probe(context.Background(), nat.fronts(s), ProbeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Mapping != tc.want {
			t.Errorf("per destination %v: mapping %q, want %q (seen %v)", tc.perDestination, res.Mapping, tc.want, res.Seen)
		}
		for i, seen := range res.Seen {
			if !seen.IsValid() || seen.Port() == res.Local.Port() {
				t.Errorf("per destination %v: server %d saw %v, want the NAT's outside port", tc.perDestination, i, seen)
			}
		}
	}
}

func TestProbeOfServersThatDoNotAnswer(t *testing.T) {
	silent, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	s := append(servers(t, 1), silent.LocalAddr().(*net.UDPAddr).AddrPort())
	res, err := Probe(context.Background(), s, ProbeOptions{Timeout: 600 * time.Millisecond, Interval: 100 * time.Millisecond,
		Local: []netip.Addr{netip.MustParseAddr("192.0.2.1")}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Mapping != MappingUnknown || !res.Seen[0].IsValid() || res.Seen[1].IsValid() {
		t.Errorf("one server silent: %+v, want unknown with the first server's answer only", res)
	}
	if _, err := Probe(context.Background(), nil, ProbeOptions{}); err == nil {
		t.Error("a probe of no server does not fail")
	}
}

// TestServeAnswersBindingRequestsOnly: anything else is dropped, and the
// service goes on.
func TestServeAnswersBindingRequestsOnly(t *testing.T) {
	s := servers(t, 1)
	c, err := net.Dial("udp4", s[0].String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, junk := range [][]byte{[]byte("hello"), make([]byte, 20), {0x01, 0x01, 0, 0, 0x21, 0x12, 0xa4, 0x42, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}} {
		if _, err := c.Write(junk); err != nil {
			t.Fatal(err)
		}
	}
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	var ne net.Error
	if _, err := c.Read(make([]byte, 1500)); !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("junk was answered (err %v)", err)
	}
	res, err := Probe(context.Background(), s, ProbeOptions{Local: []netip.Addr{netip.MustParseAddr("127.0.0.1")}})
	if err != nil || !res.Seen[0].IsValid() {
		t.Errorf("the service stopped answering after junk: %+v %v", res, err)
	}
}

// TestServeIsNoAmplifier: a binding request shorter than its answer, or
// without a FINGERPRINT, gets none; one source gets a burst of answers,
// then perSourceRate a second.
func TestServeIsNoAmplifier(t *testing.T) {
	s := servers(t, 1)
	c, err := net.Dial("udp4", s[0].String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	short, err := stun.Build(stun.TransactionID, stun.BindingRequest, stun.Fingerprint)
	if err != nil {
		t.Fatal(err)
	}
	unsigned, err := stun.Build(stun.TransactionID, stun.BindingRequest, stun.NewSoftware(probeSoftware))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []*stun.Message{short, unsigned} {
		if _, err := c.Write(m.Raw); err != nil {
			t.Fatal(err)
		}
	}
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := c.Read(make([]byte, 1500)); err == nil {
		t.Errorf("a %d-byte answer to a short or unsigned request", n)
	}

	now := time.Date(2026, 12, 6, 6, 0, 0, 0, time.UTC)
	l := newSourceLimit(func() time.Time { return now })
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	allowed := 0
	for range 3 * perSourceBurst {
		if l.allow(a) {
			allowed++
		}
	}
	if allowed != perSourceBurst || !l.allow(b) {
		t.Errorf("%d answers to one source at once, want %d, and another source still answered", allowed, perSourceBurst)
	}
	now = now.Add(time.Second)
	allowed = 0
	for range 3 * perSourceBurst {
		if l.allow(a) {
			allowed++
		}
	}
	if allowed != perSourceRate {
		t.Errorf("%d answers a second later, want %d", allowed, perSourceRate)
	}
}

// TestServeLimitsEachSource: of many valid requests from one socket at
// once, the service answers a burst and no more.
func TestServeLimitsEachSource(t *testing.T) {
	s := servers(t, 1)
	c, err := net.Dial("udp4", s[0].String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 3 * perSourceBurst {
		m, err := stun.Build(stun.TransactionID, stun.BindingRequest, stun.NewSoftware(probeSoftware), stun.Fingerprint)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(m.Raw); err != nil {
			t.Fatal(err)
		}
	}
	answers := 0
	buf := make([]byte, 1500)
	for {
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if _, err := c.Read(buf); err != nil {
			break
		}
		answers++
	}
	// (Tokens come back at perSourceRate a second while the requests
	// are read: a few more than the burst may pass.)
	if answers < perSourceBurst || answers > perSourceBurst+perSourceRate {
		t.Errorf("%d answers to %d requests at once from one source, want about %d", answers, 3*perSourceBurst, perSourceBurst)
	}
}

// lossy drops the first datagram it reads.
type lossy struct {
	net.PacketConn
	dropped bool
}

func (l *lossy) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		n, from, err := l.PacketConn.ReadFrom(b)
		if err == nil && !l.dropped {
			l.dropped = true
			continue
		}
		return n, from, err
	}
}

// TestProbeSendsAgain: a request lost on the way is sent again.
func TestProbeSendsAgain(t *testing.T) {
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = Serve(&lossy{PacketConn: conn}) }()
	defer conn.Close()
	s := conn.LocalAddr().(*net.UDPAddr).AddrPort()
	res, err := Probe(context.Background(), []netip.AddrPort{s}, ProbeOptions{Timeout: 2 * time.Second, Interval: 100 * time.Millisecond,
		Local: []netip.Addr{netip.MustParseAddr("127.0.0.1")}})
	if err != nil || !res.Seen[0].IsValid() {
		t.Errorf("the first request lost: %+v %v, want the second answered", res, err)
	}
}

// TestProbesAreLongerThanAnyAnswer: the service answers its own probes,
// whatever the address family of the answer.
func TestProbesAreLongerThanAnyAnswer(t *testing.T) {
	req, err := stun.Build(stun.TransactionID, stun.BindingRequest, stun.NewSoftware(probeSoftware), stun.Fingerprint)
	if err != nil {
		t.Fatal(err)
	}
	v6 := netip.MustParseAddr("2001:db8::1")
	resp, err := stun.Build(stun.NewTransactionIDSetter(req.TransactionID), stun.BindingSuccess,
		&stun.XORMappedAddress{IP: v6.AsSlice(), Port: 65535}, stun.Fingerprint)
	if err != nil {
		t.Fatal(err)
	}
	if len(req.Raw) < len(resp.Raw) {
		t.Errorf("a probe of %d bytes, an IPv6 answer of %d: the service would not answer", len(req.Raw), len(resp.Raw))
	}
}
