package wgmesh

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"gridweave.dev/mesh"
	"gridweave.dev/mesh/internal/allowedips"
	"gridweave.dev/mesh/wgkey"
)

// Client is the part of *wgctrl.Client that wgmesh uses; tests wrap it to
// observe what is sent.
type Client interface {
	Device(name string) (*wgtypes.Device, error)
	ConfigureDevice(name string, cfg wgtypes.Config) error
	Close() error
}

var _ Client = (*wgctrl.Client)(nil)

// Options configure a Mesh; nil means defaults.
type Options struct {
	// Client talks to the device; default a new *wgctrl.Client, closed by
	// Close.
	Client Client
	// Logger receives one line per change; default discards.
	Logger *slog.Logger
	// ResyncInterval is how long the peers a Mesh programmed are trusted
	// without reading the device back: the first call after it reads the
	// whole device and takes on what someone else changed (wg set). 0 means
	// DefaultResyncInterval; a negative value leaves it to Resync. A restart
	// of the device is noticed on the next call either way.
	ResyncInterval time.Duration
}

// DefaultResyncInterval is the ResyncInterval of a Mesh whose Options leave
// it unset. Reading a device with 1,000 peers costs about as much as a few
// dozen one-peer upserts, so once a minute adds nothing measurable.
const DefaultResyncInterval = time.Minute

// Mesh is the mesh.Mesh of one WireGuard device.
type Mesh struct {
	device         string
	client         Client
	ownClient      bool
	log            *slog.Logger
	resyncInterval time.Duration

	mu      sync.Mutex
	public  wgkey.Key
	peers   map[wgkey.Key]mesh.Peer
	holders *allowedips.Table
	// identity is that of the device as last read, readAt when; stale
	// says a write failed, leaving the device's peers unknown.
	identity deviceIdentity
	readAt   time.Time
	stale    bool

	// observed is the device's peers as last read for their statuses,
	// by key, and when: PeerStatus answers from it while it is younger
	// than statusMaxAge, so showing one node reads the device at most
	// that often, not once per call.
	observedMu sync.Mutex
	observed   map[wgkey.Key]mesh.PeerStatus
	observedAt time.Time
}

// statusMaxAge is how old the device's statuses PeerStatus answers may
// be: ten seconds, against a handshake every two minutes and a node
// counted online for five after its last. A reading of the whole device
// holds off its writes (wireguard-go serves one or the other): with 10,000
// peers, one a second slowed the last thousand joins to about 0.8 of the
// first thousand's rate.
const statusMaxAge = 10 * time.Second

var _ mesh.Mesh = (*Mesh)(nil)

// New opens the device by name and reads its key and peers.
func New(ctx context.Context, device string, opts *Options) (*Mesh, error) {
	if opts == nil {
		opts = &Options{}
	}
	m := &Mesh{device: device, client: opts.Client, log: opts.Logger, resyncInterval: opts.ResyncInterval}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.resyncInterval == 0 {
		m.resyncInterval = DefaultResyncInterval
	}
	if m.client == nil {
		c, err := wgctrl.New()
		if err != nil {
			return nil, fmt.Errorf("wgmesh: open wgctrl: %w", err)
		}
		m.client, m.ownClient = c, true
	}
	if err := m.Resync(ctx); err != nil {
		if m.ownClient {
			m.client.Close()
		}
		return nil, err
	}
	return m, nil
}

// Resync reads the whole device now and takes on its key and peers. If the
// device is not the one last read (it was restarted or re-created), it
// first programs the peers this Mesh had and the new device lacks, as the
// next call would have. Calls do this by themselves (see the package doc);
// Resync is for a caller that wants it done at a time of its choosing.
func (m *Mesh) Resync(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reload(identify(m.device))
}

// refresh brings the cached peers in line with the device before a call
// relies on them. It reads the whole device only when the device's
// identity changed, a write failed, or the cache is older than the
// ResyncInterval; otherwise it costs one stat.
func (m *Mesh) refresh() error {
	id := identify(m.device)
	if !id.same(m.identity) || m.stale || (m.resyncInterval > 0 && time.Since(m.readAt) >= m.resyncInterval) {
		return m.reload(id)
	}
	return nil
}

// reload reads the whole device, whose identity is id, into the cache. On a
// new device it restores the peers of the old one that the new one lacks.
func (m *Mesh) reload(id deviceIdentity) error {
	dev, err := m.client.Device(m.device)
	if err != nil {
		return fmt.Errorf("wgmesh: read device %s: %w", m.device, err)
	}
	restarted := m.peers != nil && !id.same(m.identity)
	peers := make(map[wgkey.Key]mesh.Peer, max(len(dev.Peers), len(m.peers)))
	holders := new(allowedips.Table)
	var changed int
	for _, wp := range dev.Peers {
		p := fromWG(wp)
		if cached, ok := m.peers[p.PublicKey]; ok {
			// A peer that roamed keeps the endpoint it was given, so that
			// the next identical upsert does not send it back there.
			if p.Endpoint.IsValid() {
				p.Endpoint = cached.Endpoint
			}
			if !mesh.Equal(cached, p) {
				changed++
			}
		} else {
			changed++
		}
		peers[p.PublicKey] = p
		holders.Add(p.PublicKey, p.AllowedIPs)
	}
	var lost []mesh.Peer
	for key, p := range m.peers {
		if _, ok := peers[key]; !ok {
			lost = append(lost, p)
		}
	}
	slices.SortFunc(lost, func(a, b mesh.Peer) int { return mesh.CompareKeys(a.PublicKey, b.PublicKey) })
	if restarted && len(lost) > 0 {
		var restore []mesh.Peer
		var configs []wgtypes.PeerConfig
		for _, p := range lost {
			if err := holders.Conflict(p.PublicKey, p.AllowedIPs); err != nil {
				m.log.Warn("peer not restored on the new device", "device", m.device, "peer", p.PublicKey.String(), "error", err)
				continue
			}
			holders.Add(p.PublicKey, p.AllowedIPs)
			restore = append(restore, p)
			configs = append(configs, newPeerConfig(p))
		}
		if len(configs) > 0 {
			if err := m.client.ConfigureDevice(m.device, wgtypes.Config{Peers: configs}); err != nil {
				m.stale = true
				return fmt.Errorf("wgmesh: restore %d peers on restarted device %s: %w", len(configs), m.device, err)
			}
		}
		for _, p := range restore {
			peers[p.PublicKey] = p
		}
		m.log.Warn("device restarted; peers restored", "device", m.device, "restored", len(restore), "not_restored", len(lost)-len(restore))
	} else if m.peers != nil && (changed > 0 || len(lost) > 0) {
		m.log.Warn("device changed outside this mesh; its peers taken on", "device", m.device, "peers_changed_or_added", changed, "peers_removed", len(lost))
	}
	m.public = wgkey.Key(dev.PublicKey)
	m.peers, m.holders = peers, holders
	m.identity, m.readAt, m.stale = id, time.Now(), false
	return nil
}

// PublicKey implements mesh.Mesh.
func (m *Mesh) PublicKey(context.Context) (wgkey.Key, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.refresh(); err != nil {
		return wgkey.Key{}, err
	}
	return m.public, nil
}

// UpsertPeer implements mesh.Mesh, sending only what changed.
func (m *Mesh) UpsertPeer(_ context.Context, p mesh.Peer) error {
	p, err := mesh.Normalize(p)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.refresh(); err != nil {
		return err
	}
	if err := m.holders.Conflict(p.PublicKey, p.AllowedIPs); err != nil {
		return err
	}
	old, exists := m.peers[p.PublicKey]
	if exists && !p.Endpoint.IsValid() {
		p.Endpoint = old.Endpoint
	}
	if exists && mesh.Equal(old, p) {
		return nil
	}
	pc := newPeerConfig(p)
	if exists {
		pc = wgtypes.PeerConfig{PublicKey: wgtypes.Key(p.PublicKey), UpdateOnly: true}
		if !slices.Equal(old.AllowedIPs, p.AllowedIPs) {
			pc.ReplaceAllowedIPs = true
			pc.AllowedIPs = toIPNets(p.AllowedIPs)
		}
		if p.Endpoint.IsValid() && old.Endpoint != p.Endpoint {
			pc.Endpoint = net.UDPAddrFromAddrPort(p.Endpoint)
		}
		if old.PersistentKeepalive != p.PersistentKeepalive {
			keepalive := p.PersistentKeepalive
			pc.PersistentKeepaliveInterval = &keepalive
		}
	}
	if err := m.client.ConfigureDevice(m.device, wgtypes.Config{Peers: []wgtypes.PeerConfig{pc}}); err != nil {
		m.stale = true
		return fmt.Errorf("wgmesh: configure peer %s on %s: %w", p.PublicKey, m.device, err)
	}
	if exists {
		m.holders.Remove(old.PublicKey, old.AllowedIPs)
	}
	m.holders.Add(p.PublicKey, p.AllowedIPs)
	m.peers[p.PublicKey] = p
	m.log.Info("peer upserted", "device", m.device, "peer", p.PublicKey.String(), "allowed_ips", p.AllowedIPs, "new", !exists)
	return nil
}

// RemovePeer implements mesh.Mesh.
func (m *Mesh) RemovePeer(_ context.Context, key wgkey.Key) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.refresh(); err != nil {
		return err
	}
	old, ok := m.peers[key]
	if !ok {
		return mesh.ErrPeerNotFound
	}
	err := m.client.ConfigureDevice(m.device, wgtypes.Config{Peers: []wgtypes.PeerConfig{{PublicKey: wgtypes.Key(key), Remove: true}}})
	if err != nil {
		m.stale = true
		return fmt.Errorf("wgmesh: remove peer %s from %s: %w", key, m.device, err)
	}
	m.holders.Remove(key, old.AllowedIPs)
	delete(m.peers, key)
	m.log.Info("peer removed", "device", m.device, "peer", key.String())
	return nil
}

// Peers implements mesh.Mesh by reading the device, so it shows what
// WireGuard holds (including an endpoint the peer roamed to). On a
// restarted device it restores the peers first, as every call does.
func (m *Mesh) Peers(context.Context) ([]mesh.Peer, error) {
	m.mu.Lock()
	err := m.refresh()
	m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	dev, err := m.client.Device(m.device)
	if err != nil {
		return nil, fmt.Errorf("wgmesh: read device %s: %w", m.device, err)
	}
	out := make([]mesh.Peer, 0, len(dev.Peers))
	for _, wp := range dev.Peers {
		out = append(out, fromWG(wp))
	}
	slices.SortFunc(out, func(a, b mesh.Peer) int { return mesh.CompareKeys(a.PublicKey, b.PublicKey) })
	return out, nil
}

// Close implements mesh.Mesh; it closes the wgctrl client if New opened it.
func (m *Mesh) Close() error {
	if m.ownClient {
		return m.client.Close()
	}
	return nil
}

// newPeerConfig is the whole of p for a device that does not have it.
func newPeerConfig(p mesh.Peer) wgtypes.PeerConfig {
	keepalive := p.PersistentKeepalive
	pc := wgtypes.PeerConfig{
		PublicKey:                   wgtypes.Key(p.PublicKey),
		ReplaceAllowedIPs:           true,
		AllowedIPs:                  toIPNets(p.AllowedIPs),
		PersistentKeepaliveInterval: &keepalive,
	}
	if p.Endpoint.IsValid() {
		pc.Endpoint = net.UDPAddrFromAddrPort(p.Endpoint)
	}
	return pc
}

func fromWG(wp wgtypes.Peer) mesh.Peer {
	p := mesh.Peer{PublicKey: wgkey.Key(wp.PublicKey), PersistentKeepalive: wp.PersistentKeepaliveInterval}
	for _, ipn := range wp.AllowedIPs {
		addr, ok := netip.AddrFromSlice(ipn.IP)
		if !ok {
			continue
		}
		ones, _ := ipn.Mask.Size()
		p.AllowedIPs = append(p.AllowedIPs, netip.PrefixFrom(addr.Unmap(), ones))
	}
	slices.SortFunc(p.AllowedIPs, mesh.ComparePrefixes)
	if wp.Endpoint != nil {
		ap := wp.Endpoint.AddrPort()
		p.Endpoint = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return p
}

func toIPNets(prefixes []netip.Prefix) []net.IPNet {
	out := make([]net.IPNet, len(prefixes))
	for i, pfx := range prefixes {
		bits := 128
		if pfx.Addr().Is4() {
			bits = 32
		}
		out[i] = net.IPNet{IP: net.IP(pfx.Addr().AsSlice()), Mask: net.CIDRMask(pfx.Bits(), bits)}
	}
	return out
}

var _ mesh.Observer = (*Mesh)(nil)

// PeerStatus implements mesh.Observer from a reading of the device at
// most statusMaxAge old: WireGuard's interface reads a device whole, so
// one peer costs the whole device's read, shared by every call within
// statusMaxAge.
func (m *Mesh) PeerStatus(ctx context.Context, key wgkey.Key) (mesh.PeerStatus, error) {
	m.observedMu.Lock()
	defer m.observedMu.Unlock()
	if m.observed == nil || time.Since(m.observedAt) >= statusMaxAge {
		all, err := m.PeerStatuses(ctx)
		if err != nil {
			return mesh.PeerStatus{}, err
		}
		m.observed = make(map[wgkey.Key]mesh.PeerStatus, len(all))
		for _, st := range all {
			m.observed[st.PublicKey] = st
		}
		m.observedAt = time.Now()
	}
	m.mu.Lock()
	_, known := m.peers[key]
	m.mu.Unlock()
	if !known { // never there, or removed since the reading
		return mesh.PeerStatus{}, mesh.ErrPeerNotFound
	}
	if st, ok := m.observed[key]; ok {
		return st, nil
	}
	return mesh.PeerStatus{PublicKey: key}, nil // added since the reading
}

// PeerStatuses implements mesh.Observer: it reads the device now (the
// cache knows what was programmed, not what was observed), so each call
// costs one read of the whole device.
func (m *Mesh) PeerStatuses(context.Context) ([]mesh.PeerStatus, error) {
	m.mu.Lock()
	dev, err := m.client.Device(m.device)
	m.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("wgmesh: read device %s: %w", m.device, err)
	}
	out := make([]mesh.PeerStatus, len(dev.Peers))
	for i, wp := range dev.Peers {
		out[i] = mesh.PeerStatus{PublicKey: wgkey.Key(wp.PublicKey), LastHandshake: wp.LastHandshakeTime, RxBytes: wp.ReceiveBytes, TxBytes: wp.TransmitBytes}
		if wp.Endpoint != nil {
			ap := wp.Endpoint.AddrPort()
			out[i].Endpoint = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		}
	}
	slices.SortFunc(out, func(a, b mesh.PeerStatus) int { return mesh.CompareKeys(a.PublicKey, b.PublicKey) })
	return out, nil
}
