package wgmesh

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"

	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"gridweave.dev/mesh"
	"gridweave.dev/mesh/internal/allowedips"
	"gridweave.dev/wgkey"
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
}

// Mesh is the mesh.Mesh of one WireGuard device.
type Mesh struct {
	device    string
	client    Client
	ownClient bool
	log       *slog.Logger

	mu      sync.Mutex
	public  wgkey.Key
	peers   map[wgkey.Key]mesh.Peer
	holders *allowedips.Table
}

var _ mesh.Mesh = (*Mesh)(nil)

// New opens the device by name and reads its key and peers.
func New(ctx context.Context, device string, opts *Options) (*Mesh, error) {
	if opts == nil {
		opts = &Options{}
	}
	m := &Mesh{device: device, client: opts.Client, log: opts.Logger}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
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

// Resync re-reads the device's key and peers.
func (m *Mesh) Resync(context.Context) error {
	dev, err := m.client.Device(m.device)
	if err != nil {
		return fmt.Errorf("wgmesh: read device %s: %w", m.device, err)
	}
	peers := make(map[wgkey.Key]mesh.Peer, len(dev.Peers))
	holders := new(allowedips.Table)
	for _, wp := range dev.Peers {
		p := fromWG(wp)
		peers[p.PublicKey] = p
		holders.Add(p.PublicKey, p.AllowedIPs)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.public = wgkey.Key(dev.PublicKey)
	m.peers, m.holders = peers, holders
	return nil
}

// PublicKey implements mesh.Mesh.
func (m *Mesh) PublicKey(context.Context) (wgkey.Key, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
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
	pc := wgtypes.PeerConfig{PublicKey: wgtypes.Key(p.PublicKey)}
	if !exists || !slices.Equal(old.AllowedIPs, p.AllowedIPs) {
		pc.ReplaceAllowedIPs = true
		pc.AllowedIPs = toIPNets(p.AllowedIPs)
	}
	if p.Endpoint.IsValid() && (!exists || old.Endpoint != p.Endpoint) {
		pc.Endpoint = net.UDPAddrFromAddrPort(p.Endpoint)
	}
	if !exists || old.PersistentKeepalive != p.PersistentKeepalive {
		keepalive := p.PersistentKeepalive
		pc.PersistentKeepaliveInterval = &keepalive
	}
	if exists {
		pc.UpdateOnly = true
	}
	if err := m.client.ConfigureDevice(m.device, wgtypes.Config{Peers: []wgtypes.PeerConfig{pc}}); err != nil {
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
	old, ok := m.peers[key]
	if !ok {
		return mesh.ErrPeerNotFound
	}
	err := m.client.ConfigureDevice(m.device, wgtypes.Config{Peers: []wgtypes.PeerConfig{{PublicKey: wgtypes.Key(key), Remove: true}}})
	if err != nil {
		return fmt.Errorf("wgmesh: remove peer %s from %s: %w", key, m.device, err)
	}
	m.holders.Remove(key, old.AllowedIPs)
	delete(m.peers, key)
	m.log.Info("peer removed", "device", m.device, "peer", key.String())
	return nil
}

// Peers implements mesh.Mesh by reading the device, so it shows what
// WireGuard holds (including an endpoint the peer roamed to).
func (m *Mesh) Peers(context.Context) ([]mesh.Peer, error) {
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
