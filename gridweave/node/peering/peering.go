package peering

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/joinkeys"
	"gridweave.dev/mesh"
	"gridweave.dev/mesh/kernelroutes"
	"gridweave.dev/mesh/wgkey"
)

// ErrNoMasterPeer is returned by Step when the device has no peer for
// the master: the tunnel must be brought up again (a join) before links
// can fall back on it.
var ErrNoMasterPeer = errors.New("peering: the device has no peer for the master")

// DevicePeer is one peer of the node's device, as read.
type DevicePeer struct {
	PublicKey     wgkey.Key
	Endpoint      netip.AddrPort // invalid: none yet
	AllowedIPs    []netip.Prefix
	Keepalive     time.Duration
	LastHandshake time.Time // zero: never
	RxBytes       int64
	TxBytes       int64
}

// DeviceState is the node's device as read.
type DeviceState struct {
	ListenPort int
	Peers      []DevicePeer
}

// PeerChange is one step of a device configuration: a peer removed, or
// added or brought to AllowedIPs (which replace its own), Endpoint (left
// alone when invalid) and Keepalive.
type PeerChange struct {
	PublicKey  wgkey.Key
	Remove     bool
	AllowedIPs []netip.Prefix
	Endpoint   netip.AddrPort
	Keepalive  time.Duration
	// Handshake asks for a handshake now: the keepalive is turned off and
	// on again, and WireGuard sends one at once.
	Handshake bool
}

// Device is the node's WireGuard device.
type Device interface {
	Read(ctx context.Context) (DeviceState, error)
	// Apply configures the changes in order, in one configuration.
	Apply(ctx context.Context, changes []PeerChange) error
}

// Routes routes prefixes into the device (kernelroutes.Device).
type Routes interface {
	Replace(ctx context.Context, prefix netip.Prefix) error
	Delete(ctx context.Context, prefix netip.Prefix) error
}

// Flows lists the addresses this machine exchanges traffic with now
// (ConntrackFlows: the kernel's connection tracking), both ends of each
// flow; the Manager keeps those of other nodes (their VPN addresses and
// pod CIDRs).
type Flows interface {
	Addresses(ctx context.Context) ([]netip.Addr, error)
}

// Options configure a Manager. Self, Master and MasterPrefixes are
// required.
type Options struct {
	// Self is this node's public key: its own entry in the directory is
	// skipped.
	Self wgkey.Key
	// Master is the master's public key; MasterPrefixes what its peer
	// always holds (the VPN CIDR).
	Master         wgkey.Key
	MasterPrefixes []netip.Prefix
	// PodRange is the cluster's pod range (validate's cluster_cidr and
	// node_cidr_mask): a directory entry whose pod CIDR is not a node's
	// prefix inside it is skipped, so nothing outside it is ever routed
	// into the tunnel or allowed into a peer. The zero PodRange admits no
	// pod CIDR at all.
	PodRange joinkeys.PodRange
	// HandshakeTimeout is how long a direct link may try before its node
	// is relayed; default 15 s.
	HandshakeTimeout time.Duration
	// Keepalive is the direct peers' persistent keepalive; default 25 s.
	Keepalive time.Duration
	// RetryMin is how long a relayed link waits before trying direct
	// again, doubling on every failure up to RetryMax; default 30 s and
	// 5 min.
	RetryMin, RetryMax time.Duration
	// StaleAfter is how old a direct link's last handshake may grow before
	// the link counts as broken (WireGuard renews a live one every two
	// minutes, and drops its keys after three); default 195 s.
	StaleAfter time.Duration
	// HubOnly configures no direct peer: every node is reached through
	// the master.
	HubOnly bool
	// OnDemand links to a node only while the two exchange traffic: a
	// node no flow of Flows names for IdleAfter (default 5 min) has no
	// peer on the device and is reached through the master. The first
	// packets of a new flow go through the master; the direct link comes
	// up beside them. Flows is required with OnDemand.
	OnDemand  bool
	IdleAfter time.Duration
	Flows     Flows
	// OnDemandAbove, when positive, links on demand (as OnDemand) once
	// the directory names more than this many other nodes, until it
	// names no more than four fifths of that, and to every node otherwise.
	// Flows is required with it.
	OnDemandAbove int
	// FlowsEvery is how often Flows is read at most; default every Step.
	FlowsEvery time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Logger receives one line per change of a link's state.
	Logger *slog.Logger
}

// Manager keeps the device's direct peers in line with the directory.
// It is safe for concurrent use.
type Manager struct {
	dev    Device
	routes Routes
	o      Options

	mu         sync.Mutex
	want       map[wgkey.Key]target
	known      bool // SetPeers was called
	links      map[wgkey.Key]*link
	routed     map[netip.Prefix]bool
	listenPort int
	nat        api.NATMapping // this node's, as its probe found it
	// onDemand is whether links are made on demand now (OnDemand, or
	// more nodes than OnDemandAbove). flows are the addresses Flows named
	// at flowsAt; flowFailures counts the reads that failed since (or
	// found nothing tracked): from maxFlowFailures on, every node is
	// linked until a read succeeds.
	onDemand     bool
	bySize       bool // OnDemandAbove's hysteresis: on above it, off at four fifths
	flows        []netip.Addr
	flowsAt      time.Time
	flowFailures int
}

// oneWayBytes is how much a direct link may send with nothing coming
// back for a keepalive before it counts as broken (a few keepalives and
// a handshake initiation are less).
const oneWayBytes = 1024

// maxFlowFailures is how many reads of the flows in a row may fail before
// every node is linked: until then the last flows read stand.
const maxFlowFailures = 10

// errNothingTracked is a read of the flows that found none.
var errNothingTracked = errors.New("the kernel tracks no connection in this network namespace (no firewall or NAT rule here needs it)")

// target is another node as the directory names it.
type target struct {
	hostname  string
	key       wgkey.Key
	vpnIP     netip.Addr
	podCIDR   netip.Prefix // invalid until it has one
	endpoints []netip.AddrPort
	nat       api.NATMapping
}

// prefixes are what the node's direct peer holds.
func (t target) prefixes() []netip.Prefix {
	out := []netip.Prefix{netip.PrefixFrom(t.vpnIP, t.vpnIP.BitLen())}
	if t.podCIDR.IsValid() {
		out = append(out, t.podCIDR)
	}
	slices.SortFunc(out, mesh.ComparePrefixes)
	return out
}

type link struct {
	target
	state api.LinkState
	// since is when the link entered its state (for connecting: when the
	// try began); a handshake after it proves the link direct.
	since    time.Time
	tries    int
	nextTry  time.Time
	endpoint netip.AddrPort // to give the device at the next Apply
	kick     bool           // ask for a handshake at the next Apply
	seen     DevicePeer
	// rx is the bytes received as of rxAt, when they last grew: a live
	// direct link receives at least the other side's keepalive.
	rx     int64
	rxAt   time.Time
	txAtRx int64 // the bytes sent as of rxAt
	// idle (OnDemand) is a link with no peer on the device: no traffic
	// for IdleAfter since lastFlow (zero: never).
	idle     bool
	lastFlow time.Time
}

// New returns a Manager of dev; routes may be nil (no pod CIDR routes).
func New(dev Device, routes Routes, o Options) (*Manager, error) {
	if o.Self.IsZero() || o.Master.IsZero() || len(o.MasterPrefixes) == 0 {
		return nil, errors.New("peering: Options need Self, Master and MasterPrefixes")
	}
	defaults := []struct {
		d   *time.Duration
		def time.Duration
	}{{&o.HandshakeTimeout, 15 * time.Second}, {&o.Keepalive, 25 * time.Second}, {&o.RetryMin, 30 * time.Second},
		{&o.RetryMax, 5 * time.Minute}, {&o.StaleAfter, 195 * time.Second}, {&o.IdleAfter, 5 * time.Minute}}
	for _, d := range defaults {
		if *d.d == 0 {
			*d.d = d.def
		}
	}
	if o.HubOnly {
		o.OnDemand, o.OnDemandAbove = false, 0
	}
	if (o.OnDemand || o.OnDemandAbove > 0) && o.Flows == nil {
		return nil, errors.New("peering: OnDemand and OnDemandAbove need Flows")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.MasterPrefixes = slices.Clone(o.MasterPrefixes)
	slices.SortFunc(o.MasterPrefixes, mesh.ComparePrefixes)
	return &Manager{dev: dev, routes: routes, o: o, links: map[wgkey.Key]*link{}, routed: map[netip.Prefix]bool{}}, nil
}

// SetPeers takes the directory's answer: the nodes to link to. An entry
// that cannot be used (a bad key or address, or prefixes another entry
// already holds) is skipped and returned among the errors; the rest are
// taken.
func (m *Manager) SetPeers(peers []api.DirectoryPeer) error {
	want := make(map[wgkey.Key]target, len(peers))
	held := map[netip.Prefix]string{}
	for _, p := range m.o.MasterPrefixes {
		held[p] = "the master"
	}
	var errs []error
	for _, p := range peers {
		// This node's own addresses are never another's.
		if t, err := parseTarget(p); err == nil && t.key == m.o.Self {
			for _, pfx := range t.prefixes() {
				held[pfx] = "this node"
			}
		}
	}
	for _, p := range peers {
		t, err := parseTarget(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if t.key == m.o.Self || t.key == m.o.Master {
			continue
		}
		if _, dup := want[t.key]; dup {
			errs = append(errs, fmt.Errorf("peering: %s: public key %s is named twice", p.Hostname, t.key))
			continue
		}
		if t.podCIDR.IsValid() {
			m.mu.Lock()
			podRange := m.o.PodRange
			m.mu.Unlock()
			if err := podRange.Check(t.podCIDR); err != nil {
				// Linked all the same, by its VPN address alone.
				errs = append(errs, fmt.Errorf("peering: %s's pod_cidr left out: %w", p.Hostname, err))
				t.podCIDR = netip.Prefix{}
			}
		}
		clash := ""
		for _, pfx := range t.prefixes() {
			if holder, ok := held[pfx]; ok {
				clash = fmt.Sprintf("%s is held by %s", pfx, holder)
			}
			for _, vpn := range m.o.MasterPrefixes {
				if pfx != netip.PrefixFrom(t.vpnIP, t.vpnIP.BitLen()) && pfx.Overlaps(vpn) {
					clash = fmt.Sprintf("pod CIDR %s overlaps the VPN's %s", pfx, vpn)
				}
			}
		}
		if clash != "" {
			errs = append(errs, fmt.Errorf("peering: %s skipped: %s", p.Hostname, clash))
			continue
		}
		for _, pfx := range t.prefixes() {
			held[pfx] = p.Hostname
		}
		want[t.key] = t
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.want, m.known = want, true
	return errors.Join(errs...)
}

func parseTarget(p api.DirectoryPeer) (target, error) {
	key, err := wgkey.Parse(p.PublicKey)
	if err != nil {
		return target{}, fmt.Errorf("peering: %s: public_key: %w", p.Hostname, err)
	}
	ip, err := netip.ParseAddr(p.VPNIP)
	if err != nil {
		return target{}, fmt.Errorf("peering: %s: vpn_ip: %w", p.Hostname, err)
	}
	t := target{hostname: p.Hostname, key: key, vpnIP: ip.Unmap(), nat: p.NAT}
	if p.PodCIDR != "" {
		if t.podCIDR, err = netip.ParsePrefix(p.PodCIDR); err != nil || t.podCIDR.Masked() != t.podCIDR {
			return target{}, fmt.Errorf("peering: %s: pod_cidr %q is not a prefix without host bits", p.Hostname, p.PodCIDR)
		}
	}
	for _, e := range p.Endpoints {
		ep, err := netip.ParseAddrPort(e)
		if err != nil || ep.Port() == 0 {
			return target{}, fmt.Errorf("peering: %s: endpoint %q is not address:port", p.Hostname, e)
		}
		t.endpoints = append(t.endpoints, netip.AddrPortFrom(ep.Addr().Unmap(), ep.Port()))
	}
	return t, nil
}

// Step reads the device, moves each link on (a handshake makes it direct,
// a try without one past the timeout relays it, a relayed one is tried
// again when its time comes), and configures the device and the routes to
// match. Before the first SetPeers it does nothing: the device keeps the
// links it has (an agent's restart loses none).
func (m *Manager) Step(ctx context.Context) error {
	addrs, flowErr, read := m.readFlows(ctx)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.known {
		return nil
	}
	st, err := m.dev.Read(ctx)
	if err != nil {
		return fmt.Errorf("peering: read the device: %w", err)
	}
	m.listenPort = st.ListenPort
	onDevice := make(map[wgkey.Key]DevicePeer, len(st.Peers))
	for _, p := range st.Peers {
		slices.SortFunc(p.AllowedIPs, mesh.ComparePrefixes)
		onDevice[p.PublicKey] = p
	}
	if _, ok := onDevice[m.o.Master]; !ok {
		return ErrNoMasterPeer
	}
	now := m.o.Now()
	flowing := m.takeFlows(ctx, addrs, flowErr, read, now)
	for key := range m.links {
		if _, ok := m.want[key]; !ok {
			m.o.Logger.InfoContext(ctx, "node gone from the directory: its link goes", "peer", m.links[key].hostname)
			delete(m.links, key)
		}
	}
	for key, t := range m.want {
		d, present := onDevice[key]
		l := m.links[key]
		if flowing[key] {
			if l != nil {
				l.lastFlow = now
			}
		}
		if l == nil {
			l = m.adopt(ctx, t, d, present, now)
			if flowing[key] {
				l.lastFlow = now
			}
			m.links[key] = l
		} else {
			if !slices.Equal(l.endpoints, t.endpoints) && l.state == api.LinkRelayed {
				l.nextTry = now // somewhere new to try
			}
			if l.state == api.LinkDirect && len(l.endpoints) > 0 && len(t.endpoints) > 0 && l.seen.Endpoint == l.endpoints[0] &&
				!slices.Contains(l.endpoints, t.endpoints[0]) &&
				(!slices.Contains(t.endpoints, l.endpoints[0]) || t.endpoints[0].Addr() == l.endpoints[0].Addr()) {
				// The master sees the other node's packets come from
				// elsewhere now (its NAT mapped it anew): a new endpoint
				// leads the list, replacing the one in use or at its
				// address (another port). The link follows at
				// once rather than after falling silent; its handshake
				// opens this side's NAT to the new port. (An endpoint the
				// directory named before, a reported one moving up when
				// the master's observation is gone, moves nothing; nor
				// does the master's first observation of a node linked at
				// a reported endpoint.)
				l.endpoint, l.kick = t.endpoints[0], true
				m.o.Logger.InfoContext(ctx, "the other node's endpoint moved: the direct link follows", "peer", t.hostname, "from", l.endpoints[0], "to", t.endpoints[0])
			}
			l.target = t
		}
		l.seen = d
		if d.RxBytes != l.rx {
			l.rx, l.rxAt, l.txAtRx = d.RxBytes, now, d.TxBytes
		}
		if m.linkOnDemand(ctx, l, now) {
			continue
		}
		m.advance(ctx, l, d, present, now)
	}
	if err := m.dev.Apply(ctx, m.changes(onDevice)); err != nil {
		return fmt.Errorf("peering: configure the device: %w", err)
	}
	for _, l := range m.links {
		l.kick, l.endpoint = false, netip.AddrPort{}
	}
	return m.route(ctx)
}

// adopt starts the link to a node the manager has not seen. When the
// device already has a peer for it (the agent restarted), the link goes
// on as it was: direct when its handshake is live, else relayed (its
// traffic stays with the master, whose side is relayed too) with a try at
// once that moves nothing until a handshake completes. A node new to the
// device gets a first, direct try.
func (m *Manager) adopt(ctx context.Context, t target, d DevicePeer, present bool, now time.Time) *link {
	l := &link{target: t, seen: d, rx: d.RxBytes, rxAt: now, txAtRx: d.TxBytes}
	switch {
	case m.onDemand && !(present && now.Sub(d.LastHandshake) < m.o.StaleAfter):
		// Linked when traffic starts (linkOnDemand); a live peer the
		// agent finds after a restart stays until it idles.
		l.idle = true
		m.enter(ctx, l, api.LinkRelayed, now)
	case m.onDemand:
		l.lastFlow = now
		m.enter(ctx, l, api.LinkDirect, now)
	case m.o.HubOnly:
		m.enter(ctx, l, api.LinkRelayed, now)
		l.nextTry = time.Time{}
	case present && now.Sub(d.LastHandshake) < m.o.StaleAfter:
		m.enter(ctx, l, api.LinkDirect, now)
	case present:
		m.enter(ctx, l, api.LinkRelayed, now)
		l.nextTry = now
	default:
		m.try(ctx, l, now)
	}
	return l
}

// linkOnDemand links an idle node that traffic reaches now (or every
// idle node, when links are not made on demand now), and idles a linked
// one no traffic reached for IdleAfter; it reports whether the link is
// idle (nothing more to do for it).
func (m *Manager) linkOnDemand(ctx context.Context, l *link, now time.Time) bool {
	wanted := !m.onDemand || (!l.lastFlow.IsZero() && now.Sub(l.lastFlow) < m.o.IdleAfter)
	switch {
	case l.idle && wanted:
		// Its traffic stays with the master until a handshake completes
		// (a relayed link's try): a pair that cannot link directly loses
		// nothing, and its tries back off as ever.
		l.idle = false
		m.o.Logger.InfoContext(ctx, "traffic to a node: linking it directly", "peer", l.hostname)
		m.enter(ctx, l, api.LinkRelayed, now)
		return false
	case !l.idle && !wanted:
		l.idle = true
		m.o.Logger.InfoContext(ctx, "no traffic to a node lately: its direct peer goes", "peer", l.hostname, "idle_after", m.o.IdleAfter)
		m.enter(ctx, l, api.LinkRelayed, now)
	}
	return l.idle
}

// readFlows reads the machine's flows, without the lock, when links may
// be made on demand and FlowsEvery has passed since the last read.
func (m *Manager) readFlows(ctx context.Context) (addrs []netip.Addr, err error, read bool) {
	if !m.o.OnDemand && m.o.OnDemandAbove <= 0 {
		return nil, nil, false
	}
	m.mu.Lock()
	// (Below OnDemandAbove nothing is read; above its lower bound the
	// flows are kept current for the switch.)
	wanted := m.o.OnDemand || m.bySize || len(m.want) > m.o.OnDemandAbove*4/5
	due := m.o.FlowsEvery <= 0 || m.flowsAt.IsZero() || m.o.Now().Sub(m.flowsAt) >= m.o.FlowsEvery
	m.mu.Unlock()
	if !wanted || !due {
		return nil, nil, false
	}
	addrs, err = m.o.Flows.Addresses(ctx)
	if err == nil && len(addrs) == 0 {
		err = errNothingTracked
	}
	return addrs, err, true
}

// takeFlows decides whether links are made on demand now and returns the
// nodes the flows reach (none when they are not), taking what readFlows
// read.
func (m *Manager) takeFlows(ctx context.Context, addrs []netip.Addr, err error, read bool, now time.Time) map[wgkey.Key]bool {
	was := m.onDemand
	m.bySize = m.o.OnDemandAbove > 0 && (len(m.want) > m.o.OnDemandAbove || (m.bySize && len(m.want) > m.o.OnDemandAbove*4/5))
	m.onDemand = m.o.OnDemand || m.bySize
	if read {
		m.flowsAt = now
	}
	if !m.onDemand {
		m.flows, m.flowFailures = nil, 0
		return nil
	}
	if read {
		switch {
		case err != nil:
			m.flowFailures++
			if m.flowFailures == maxFlowFailures {
				m.o.Logger.WarnContext(ctx, "the machine's flows cannot be read: every node is linked directly until they can", "error", err, "reads", m.flowFailures)
			}
		default:
			if m.flowFailures >= maxFlowFailures {
				m.o.Logger.InfoContext(ctx, "the machine's flows are read again: links are made on demand")
			}
			m.flowFailures, m.flows = 0, addrs
		}
	}
	if m.flowFailures >= maxFlowFailures {
		m.onDemand = false // linked to every node rather than to none
		return nil
	}
	if !was {
		// Links already made idle IdleAfter from now, not at once.
		for _, l := range m.links {
			if !l.idle {
				l.lastFlow = now
			}
		}
	}
	return m.flowing()
}

// flowing are the nodes the machine's last flows reach, by key: a flow's
// address that is a node's VPN address or inside its pod CIDR.
func (m *Manager) flowing() map[wgkey.Key]bool {
	addrs := m.flows
	byAddr := make(map[netip.Addr]wgkey.Key, len(m.want))
	byPods := make(map[netip.Prefix]wgkey.Key, len(m.want))
	for key, t := range m.want {
		byAddr[t.vpnIP] = key
		if t.podCIDR.IsValid() {
			byPods[t.podCIDR] = key
		}
	}
	out := map[wgkey.Key]bool{}
	for _, a := range addrs {
		a = a.Unmap()
		if key, ok := byAddr[a]; ok {
			out[key] = true
			continue
		}
		if bits := m.o.PodRange.NodeBits; bits > 0 && bits <= a.BitLen() {
			if key, ok := byPods[netip.PrefixFrom(a, bits).Masked()]; ok {
				out[key] = true
			}
		}
	}
	return out
}

// try starts a direct try: the peer holds the node's prefixes, at the
// next endpoint.
func (m *Manager) try(ctx context.Context, l *link, now time.Time) {
	if len(l.endpoints) == 0 {
		m.enter(ctx, l, api.LinkRelayed, now)
		l.nextTry = now.Add(m.o.RetryMin)
		return
	}
	l.endpoint = l.endpoints[l.tries%len(l.endpoints)]
	l.tries++
	l.kick = true
	m.enter(ctx, l, api.LinkConnecting, now)
}

// retry asks a relayed link for a handshake at its next endpoint; its
// traffic stays with the master until one completes.
func (m *Manager) retry(l *link, now time.Time) {
	l.endpoint = l.endpoints[l.tries%len(l.endpoints)]
	l.tries++
	l.kick = true
	l.nextTry = now.Add(m.backoff(l.tries))
}

func (m *Manager) backoff(tries int) time.Duration {
	d := m.o.RetryMin
	for i := 1; i < tries && d < m.o.RetryMax; i++ {
		d *= 2
	}
	return min(d, m.o.RetryMax)
}

func (m *Manager) enter(ctx context.Context, l *link, state api.LinkState, now time.Time) {
	if l.state != state {
		m.o.Logger.InfoContext(ctx, "link "+string(state), "peer", l.hostname, "vpn_ip", l.vpnIP, "endpoint", l.endpoint, "was", l.state)
	}
	l.state, l.since = state, now
	if state == api.LinkDirect {
		l.tries, l.rxAt, l.txAtRx = 0, now, l.seen.TxBytes
	}
}

// advance moves one link on by what the device says of its peer.
func (m *Manager) advance(ctx context.Context, l *link, d DevicePeer, present bool, now time.Time) {
	if m.o.HubOnly {
		return
	}
	handshook := present && d.LastHandshake.After(l.since)
	switch l.state {
	case api.LinkConnecting:
		switch {
		case !present && !l.kick:
			m.try(ctx, l, now) // someone removed the peer: try again
		case handshook:
			m.enter(ctx, l, api.LinkDirect, now)
		case now.Sub(l.since) >= m.o.HandshakeTimeout:
			m.enter(ctx, l, api.LinkRelayed, now)
			l.nextTry = now.Add(m.backoff(l.tries))
		}
	case api.LinkDirect:
		// Broken: the session expired without a new handshake, or nothing
		// came in for two keepalives and more (the other side sends one
		// every Keepalive when it has nothing else to send).
		// Or this side sent and heard nothing back for a keepalive and
		// more: the other side dropped its peer (it idled the link).
		silent := now.Sub(l.rxAt) > 2*m.o.Keepalive+10*time.Second ||
			(d.TxBytes-l.txAtRx > oneWayBytes && now.Sub(l.rxAt) > m.o.Keepalive+5*time.Second)
		if !present || now.Sub(d.LastHandshake) > m.o.StaleAfter || silent {
			m.enter(ctx, l, api.LinkRelayed, now)
			l.nextTry = now
		}
	case api.LinkRelayed:
		switch {
		case handshook:
			m.enter(ctx, l, api.LinkDirect, now)
		case len(l.endpoints) > 0 && !now.Before(l.nextTry):
			m.retry(l, now)
		}
	}
}

// changes is the configuration that brings the device to the links:
// peers no node needs removed, then every prefix that moves taken from
// the peer that holds it, then given to the one that gets it, so that at
// no step do two peers hold one prefix.
func (m *Manager) changes(onDevice map[wgkey.Key]DevicePeer) []PeerChange {
	type wanted struct {
		PeerChange
		create bool
	}
	var final []wanted
	masterIPs := slices.Clone(m.o.MasterPrefixes)
	for key, l := range m.links {
		if m.o.HubOnly || l.state == api.LinkRelayed {
			if l.podCIDR.IsValid() {
				masterIPs = append(masterIPs, l.podCIDR)
			}
		}
		if m.o.HubOnly || l.idle {
			continue
		}
		c := PeerChange{PublicKey: key, Keepalive: m.o.Keepalive, Endpoint: l.endpoint, Handshake: l.kick}
		if l.state != api.LinkRelayed {
			c.AllowedIPs = l.prefixes()
		}
		_, present := onDevice[key]
		final = append(final, wanted{c, !present})
	}
	slices.SortFunc(masterIPs, mesh.ComparePrefixes)
	cur := onDevice[m.o.Master] // Step checked it is there
	final = append(final, wanted{PeerChange{PublicKey: m.o.Master, AllowedIPs: masterIPs, Keepalive: cur.Keepalive}, false})
	slices.SortFunc(final, func(a, b wanted) int { return mesh.CompareKeys(a.PublicKey, b.PublicKey) })

	var removals, shrinks, grows []PeerChange
	for key := range onDevice {
		if l, ok := m.links[key]; (!ok || m.o.HubOnly || l.idle) && key != m.o.Master {
			removals = append(removals, PeerChange{PublicKey: key, Remove: true})
		}
	}
	slices.SortFunc(removals, func(a, b PeerChange) int { return mesh.CompareKeys(a.PublicKey, b.PublicKey) })
	for _, w := range final {
		cur := onDevice[w.PublicKey]
		if !w.create {
			kept := slices.DeleteFunc(slices.Clone(cur.AllowedIPs), func(p netip.Prefix) bool { return !slices.Contains(w.AllowedIPs, p) })
			if len(kept) < len(cur.AllowedIPs) {
				shrinks = append(shrinks, PeerChange{PublicKey: w.PublicKey, AllowedIPs: kept, Keepalive: cur.Keepalive})
			}
		}
		same := !w.create && slices.Equal(cur.AllowedIPs, w.AllowedIPs) && cur.Keepalive == w.Keepalive &&
			(!w.Endpoint.IsValid() || w.Endpoint == cur.Endpoint) && !w.Handshake
		if !same {
			grows = append(grows, w.PeerChange)
		}
	}
	return slices.Concat(removals, shrinks, grows)
}

// route routes every other node's pod CIDR into the device, and no other.
func (m *Manager) route(ctx context.Context) error {
	if m.routes == nil {
		return nil
	}
	want := map[netip.Prefix]bool{}
	for _, l := range m.links {
		if l.podCIDR.IsValid() {
			want[l.podCIDR] = true
		}
	}
	var errs []error
	for p := range m.routed {
		if !want[p] {
			if err := m.routes.Delete(ctx, p); err != nil {
				errs = append(errs, err)
				continue
			}
			delete(m.routed, p)
		}
	}
	for p := range want {
		if !m.routed[p] {
			err := m.routes.Replace(ctx, p)
			if errors.Is(err, kernelroutes.ErrRouteNotOwned) {
				// The machine routes it to its own networks: left so, said
				// once, and tried again at the next change of the links.
				m.o.Logger.WarnContext(ctx, "another node's pod CIDR is routed to this machine's own networks: not routed into the tunnel", "pod_cidr", p, "error", err)
				m.routed[p] = true
				continue
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			m.routed[p] = true
		}
	}
	return errors.Join(errs...)
}

// SetPodRange replaces the cluster's pod range (an identity kept before
// the master said it learns it from the directory); the next SetPeers
// holds the directory to it.
func (m *Manager) SetPodRange(r joinkeys.PodRange) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.o.PodRange = r
}

// Forget drops every direct link: each other node's peer goes from the
// device, with the routes of their pod CIDRs, and the master's peer keeps
// its own prefixes only. A machine the master no longer knows (its node
// token refused) does this: it holds no credential to the directory, so
// nothing it keeps of it is current.
func (m *Manager) Forget(ctx context.Context) error {
	if err := m.SetPeers(nil); err != nil {
		return err
	}
	err := m.Step(ctx)
	if !errors.Is(err, ErrNoMasterPeer) {
		return err
	}
	// No master's peer to fall back on: remove the others all the same.
	m.mu.Lock()
	defer m.mu.Unlock()
	st, err := m.dev.Read(ctx)
	if err != nil {
		return fmt.Errorf("peering: read the device: %w", err)
	}
	var removals []PeerChange
	for _, p := range st.Peers {
		removals = append(removals, PeerChange{PublicKey: p.PublicKey, Remove: true})
	}
	if err := m.dev.Apply(ctx, removals); err != nil {
		return fmt.Errorf("peering: configure the device: %w", err)
	}
	m.links = map[wgkey.Key]*link{}
	return m.route(ctx)
}

// Links reports every link, by hostname, as of the last Step.
func (m *Manager) Links() []api.Link {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]api.Link, 0, len(m.links))
	for _, l := range m.links {
		link := api.Link{Hostname: l.hostname, PublicKey: l.key.String(), State: l.state, RxBytes: l.seen.RxBytes, TxBytes: l.seen.TxBytes}
		if l.state == api.LinkRelayed {
			link.RelayedReason = m.relayedReason(l)
		}
		if l.seen.Endpoint.IsValid() {
			link.Endpoint = l.seen.Endpoint.String()
		}
		if !l.seen.LastHandshake.IsZero() {
			hs := l.seen.LastHandshake.UTC()
			link.LastHandshake = &hs
		}
		out = append(out, link)
	}
	slices.SortFunc(out, func(a, b api.Link) int { return cmp.Compare(a.Hostname, b.Hostname) })
	return out
}

// relayedReason says why a relayed link is relayed.
func (m *Manager) relayedReason(l *link) api.RelayedReason {
	switch {
	case m.o.HubOnly:
		return api.RelayedHubOnly
	case l.idle:
		return api.RelayedIdle
	case len(l.endpoints) == 0:
		return api.RelayedNoCandidate
	case (m.nat == api.NATEndpointDependent && l.nat != api.NATNone) || (l.nat == api.NATEndpointDependent && m.nat != api.NATNone):
		// (Against a node with no NAT at all, a symmetric NAT's packets
		// get through: that link failed for another reason.)
		return api.RelayedSymmetricNAT
	default:
		return api.RelayedProbesTimedOut
	}
}

// PodRange is the cluster's pod range as the Manager holds it.
func (m *Manager) PodRange() joinkeys.PodRange {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.o.PodRange
}

// SetNAT records how this node's NAT maps its ports (its probe of the
// master's reflexive-address service), for the links' reasons.
func (m *Manager) SetNAT(nat api.NATMapping) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.nat = nat
}

// ListenPort is the device's port as of the last Step.
func (m *Manager) ListenPort() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.listenPort
}

// SetMasterEndpoint points the master's peer at ep (the directory's
// master_endpoint) when it points elsewhere: with several server replicas,
// the device moves to the new leader's host when one takes over. The
// master's allowed IPs and keepalive stay as they are, and a handshake is
// asked for at once. It reports whether it changed the device.
func (m *Manager) SetMasterEndpoint(ctx context.Context, ep netip.AddrPort) (bool, error) {
	if !ep.IsValid() {
		return false, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st, err := m.dev.Read(ctx)
	if err != nil {
		return false, err
	}
	for _, p := range st.Peers {
		if p.PublicKey != m.o.Master {
			continue
		}
		if p.Endpoint == ep {
			return false, nil
		}
		change := PeerChange{PublicKey: p.PublicKey, AllowedIPs: p.AllowedIPs, Endpoint: ep, Keepalive: p.Keepalive, Handshake: true}
		if err := m.dev.Apply(ctx, []PeerChange{change}); err != nil {
			return false, err
		}
		m.o.Logger.InfoContext(ctx, "the master's WireGuard device moved: its peer now points there", "from", p.Endpoint, "to", ep)
		return true, nil
	}
	return false, ErrNoMasterPeer
}
