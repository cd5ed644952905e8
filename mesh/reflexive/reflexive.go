package reflexive

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/pion/stun/v3"
)

// Mapping is how a machine's NAT maps its UDP ports, as a probe found it.
type Mapping string

// The mappings a probe tells apart.
const (
	// MappingNone: the servers saw the probe's own address and port.
	MappingNone Mapping = "none"
	// MappingEndpointIndependent: one public address and port for every
	// destination.
	MappingEndpointIndependent Mapping = "endpoint_independent"
	// MappingEndpointDependent: another public port (or address) for each
	// destination, a symmetric NAT.
	MappingEndpointDependent Mapping = "endpoint_dependent"
	// MappingUnknown: fewer than two servers answered.
	MappingUnknown Mapping = "unknown"
)

// maxMessage bounds a STUN message read (a binding request or response
// is well under it).
const maxMessage = 1500

// Serve answers the STUN binding requests that reach conn with the
// address each came from (XOR-MAPPED-ADDRESS), until conn is closed; it
// returns nil then. It answers only a request that carries a valid
// FINGERPRINT and is at least as long as its answer (Probe's are), and
// at most perSourceBurst answers at once to one address, perSourceRate a
// second after that: a spoofed source gets back no more bytes than were
// sent in its name, and few of them. Everything else is dropped.
func Serve(conn net.PacketConn) error {
	buf := make([]byte, maxMessage)
	limit := newSourceLimit(time.Now)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		udp, ok := from.(*net.UDPAddr)
		if !ok || !stun.IsMessage(buf[:n]) {
			continue
		}
		req := &stun.Message{Raw: append([]byte(nil), buf[:n]...)}
		if req.Decode() != nil || req.Type != stun.BindingRequest || stun.Fingerprint.Check(req) != nil {
			continue
		}
		ap := udp.AddrPort()
		resp, err := stun.Build(stun.NewTransactionIDSetter(req.TransactionID), stun.BindingSuccess,
			&stun.XORMappedAddress{IP: ap.Addr().Unmap().AsSlice(), Port: int(ap.Port())}, stun.Fingerprint)
		if err != nil || len(resp.Raw) > n || !limit.allow(ap.Addr().Unmap()) {
			continue
		}
		_, _ = conn.WriteTo(resp.Raw, from)
	}
}

// The answers one source address may get.
const (
	perSourceRate  = 10 // a second
	perSourceBurst = 20
	// maxSources bounds the sources remembered; past it they are all
	// forgotten (each starts with a full burst again).
	maxSources = 16384
)

// sourceLimit is a token bucket per source address.
type sourceLimit struct {
	now     func() time.Time
	buckets map[netip.Addr]bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newSourceLimit(now func() time.Time) *sourceLimit {
	return &sourceLimit{now: now, buckets: map[netip.Addr]bucket{}}
}

// allow takes a token of a's bucket; false when it has none.
func (l *sourceLimit) allow(a netip.Addr) bool {
	now := l.now()
	b, ok := l.buckets[a]
	if !ok {
		if len(l.buckets) >= maxSources {
			clear(l.buckets)
		}
		b = bucket{tokens: perSourceBurst, at: now}
	}
	b.tokens = min(perSourceBurst, b.tokens+now.Sub(b.at).Seconds()*perSourceRate)
	b.at = now
	if b.tokens < 1 {
		l.buckets[a] = b
		return false
	}
	b.tokens--
	l.buckets[a] = b
	return true
}

// probeSoftware pads a probe's request to the length of the longest
// answer (an IPv6 address's), so the service may answer it.
const probeSoftware = "gridweave reflexive-address probe"

// Result is what a probe learned.
type Result struct {
	Mapping Mapping
	// Local is the probe socket's port; Seen what each server saw it
	// come from (invalid where a server did not answer), in the order of
	// the servers.
	Local netip.AddrPort
	Seen  []netip.AddrPort
}

// ProbeOptions tune Probe.
type ProbeOptions struct {
	// Timeout bounds the whole probe; default 3 s. Requests are sent
	// again every Interval (default 250 ms) until every server answered.
	Timeout, Interval time.Duration
	// Local lists this machine's own addresses, to tell MappingNone; nil
	// reads the interfaces' addresses.
	Local []netip.Addr
	// Listen, when set, makes the probe's socket (tests hand it a socket
	// behind a NAT of their own); default a UDP socket on an ephemeral
	// port of every address.
	Listen func() (net.PacketConn, error)
}

// Probe asks each server (two, at the same host on two ports or at two
// hosts) what address one local socket's packets come from, and tells
// the NAT's mapping from the answers. A server that does not answer
// within the timeout leaves its Seen invalid; an error is returned only
// when the probe could not run at all.
func Probe(ctx context.Context, servers []netip.AddrPort, o ProbeOptions) (Result, error) {
	if len(servers) == 0 {
		return Result{Mapping: MappingUnknown}, errors.New("reflexive: no server to probe")
	}
	if o.Timeout <= 0 {
		o.Timeout = 3 * time.Second
	}
	if o.Interval <= 0 {
		o.Interval = 250 * time.Millisecond
	}
	listen := o.Listen
	if listen == nil {
		listen = func() (net.PacketConn, error) { return net.ListenPacket("udp4", ":0") }
	}
	conn, err := listen()
	if err != nil {
		return Result{Mapping: MappingUnknown}, fmt.Errorf("reflexive: open the probe's socket: %w", err)
	}
	defer conn.Close()
	res := Result{Seen: make([]netip.AddrPort, len(servers))}
	if udp, ok := conn.LocalAddr().(*net.UDPAddr); ok {
		res.Local = udp.AddrPort()
	}
	ids := make([][stun.TransactionIDSize]byte, len(servers))
	requests := make([]*stun.Message, len(servers))
	for i := range servers {
		m, err := stun.Build(stun.TransactionID, stun.BindingRequest, stun.NewSoftware(probeSoftware), stun.Fingerprint)
		if err != nil {
			return Result{Mapping: MappingUnknown}, err
		}
		requests[i], ids[i] = m, m.TransactionID
	}
	deadline := time.Now().Add(o.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	buf := make([]byte, maxMessage)
	answered := 0
	for answered < len(servers) && time.Now().Before(deadline) && ctx.Err() == nil {
		for i, s := range servers {
			if !res.Seen[i].IsValid() {
				_, _ = conn.WriteTo(requests[i].Raw, net.UDPAddrFromAddrPort(s))
			}
		}
		round := time.Now().Add(o.Interval)
		if round.After(deadline) {
			round = deadline
		}
		for answered < len(servers) {
			_ = conn.SetReadDeadline(round)
			n, _, err := conn.ReadFrom(buf)
			if err != nil {
				break // the round is over
			}
			resp := &stun.Message{Raw: append([]byte(nil), buf[:n]...)}
			if !stun.IsMessage(resp.Raw) || resp.Decode() != nil || resp.Type != stun.BindingSuccess {
				continue
			}
			i := slices.Index(ids, resp.TransactionID)
			if i < 0 || res.Seen[i].IsValid() {
				continue
			}
			var xa stun.XORMappedAddress
			if xa.GetFrom(resp) != nil {
				continue
			}
			addr, ok := netip.AddrFromSlice(xa.IP)
			if !ok || xa.Port <= 0 || xa.Port > 65535 {
				continue
			}
			res.Seen[i] = netip.AddrPortFrom(addr.Unmap(), uint16(xa.Port))
			answered++
		}
	}
	local := o.Local
	if local == nil {
		local = interfaceAddrs()
	}
	res.Mapping = classify(res.Local.Port(), local, res.Seen)
	return res, ctx.Err()
}

// classify tells the mapping from what the servers saw of a socket on
// port of one of the local addresses.
func classify(port uint16, local []netip.Addr, seen []netip.AddrPort) Mapping {
	var got []netip.AddrPort
	for _, s := range seen {
		if s.IsValid() {
			got = append(got, s)
		}
	}
	if len(got) == 0 {
		return MappingUnknown
	}
	if got[0].Port() == port && slices.Contains(local, got[0].Addr()) {
		return MappingNone
	}
	if len(got) < 2 {
		return MappingUnknown
	}
	for _, s := range got[1:] {
		if s != got[0] {
			return MappingEndpointDependent
		}
	}
	return MappingEndpointIndependent
}

// interfaceAddrs are the machine's addresses.
func interfaceAddrs() []netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			if addr, ok := netip.AddrFromSlice(ipn.IP); ok {
				out = append(out, addr.Unmap())
			}
		}
	}
	return out
}
