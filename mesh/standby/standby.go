package standby

import (
	"context"
	"errors"
	"net/netip"
	"sync"

	"gridweave.dev/mesh"
	"gridweave.dev/mesh/memmesh"
	"gridweave.dev/mesh/wgkey"
)

// Mesh is a mesh.Mesh and a mesh.Observer that is in memory until a
// device is attached. Its public key is the device's, the one key every
// replica shares.
type Mesh struct {
	key    wgkey.Key
	memory *memmesh.Mesh

	mu     sync.RWMutex
	device mesh.Mesh
	// leaders answers what is observed while no device is attached.
	leaders mesh.Observer
}

var (
	_ mesh.Mesh     = (*Mesh)(nil)
	_ mesh.Observer = (*Mesh)(nil)
)

// New returns a Mesh with no device, with public key key.
func New(key wgkey.Key) *Mesh { return &Mesh{key: key, memory: memmesh.New(key)} }

// Attach hands every later call to device (the leader's).
func (m *Mesh) Attach(device mesh.Mesh) {
	m.mu.Lock()
	m.device = device
	m.mu.Unlock()
}

// Detach takes the device back and returns it (nil if none was attached).
func (m *Mesh) Detach() mesh.Mesh {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.device
	m.device = nil
	return d
}

// Observe makes o answer PeerStatuses and PeerStatus while no device is
// attached: what the leader's device observed, so that every replica
// shows the same. When o fails, nothing observed is the answer.
func (m *Mesh) Observe(o mesh.Observer) {
	m.mu.Lock()
	m.leaders = o
	m.mu.Unlock()
}

// observer is the attached device's observer, or else the leader's
// (either may be nil).
func (m *Mesh) observer() (device mesh.Observer, leaders mesh.Observer) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.device != nil {
		o, _ := m.device.(mesh.Observer)
		return o, nil
	}
	return nil, m.leaders
}

// Device returns the attached device, or nil.
func (m *Mesh) Device() mesh.Mesh {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.device
}

func (m *Mesh) current() mesh.Mesh {
	if d := m.Device(); d != nil {
		return d
	}
	return m.memory
}

// PublicKey implements mesh.Mesh.
func (m *Mesh) PublicKey(context.Context) (wgkey.Key, error) { return m.key, nil }

// UpsertPeer implements mesh.Mesh.
func (m *Mesh) UpsertPeer(ctx context.Context, p mesh.Peer) error {
	return m.current().UpsertPeer(ctx, p)
}

// RemovePeer implements mesh.Mesh. Without a device, a peer this replica
// never saw is not an error: the leader's device may hold it, and the
// leader removes it when it follows the ledger.
func (m *Mesh) RemovePeer(ctx context.Context, key wgkey.Key) error {
	if d := m.Device(); d != nil {
		return d.RemovePeer(ctx, key)
	}
	if err := m.memory.RemovePeer(ctx, key); err != nil && !errors.Is(err, mesh.ErrPeerNotFound) {
		return err
	}
	return nil
}

// Peers implements mesh.Mesh.
func (m *Mesh) Peers(ctx context.Context) ([]mesh.Peer, error) { return m.current().Peers(ctx) }

// PeerStatuses implements mesh.Observer: the device's; without one, the
// leader's (Observe), or none observed.
func (m *Mesh) PeerStatuses(ctx context.Context) ([]mesh.PeerStatus, error) {
	device, leaders := m.observer()
	switch {
	case device != nil:
		return device.PeerStatuses(ctx)
	case leaders != nil:
		if statuses, err := leaders.PeerStatuses(ctx); err == nil {
			return statuses, nil
		}
	}
	if d := m.Device(); d != nil {
		return nil, nil // a device that observes nothing
	}
	return m.memory.PeerStatuses(ctx)
}

// PeerStatus implements mesh.Observer: the device's; without one, the
// leader's (Observe), or nothing observed of a peer the standby holds.
func (m *Mesh) PeerStatus(ctx context.Context, key wgkey.Key) (mesh.PeerStatus, error) {
	device, leaders := m.observer()
	switch {
	case device != nil:
		return device.PeerStatus(ctx, key)
	case leaders != nil:
		if st, err := leaders.PeerStatus(ctx, key); err == nil {
			return st, nil
		}
	}
	d := m.Device()
	if d == nil {
		return m.memory.PeerStatus(ctx, key)
	}
	peers, err := d.Peers(ctx) // a device that observes nothing
	if err != nil {
		return mesh.PeerStatus{}, err
	}
	for _, p := range peers {
		if p.PublicKey == key {
			return mesh.PeerStatus{PublicKey: key}, nil
		}
	}
	return mesh.PeerStatus{}, mesh.ErrPeerNotFound
}

// Close implements mesh.Mesh; an attached device is the caller's to close.
func (m *Mesh) Close() error { return m.memory.Close() }

// RouteTable routes prefixes through a device: fleet.Routes.
type RouteTable interface {
	Replace(ctx context.Context, prefix netip.Prefix) error
	Delete(ctx context.Context, prefix netip.Prefix) error
}

// Routes is a RouteTable that does nothing until one is attached.
type Routes struct {
	mu    sync.RWMutex
	table RouteTable
}

// Attach hands every later call to table (nil detaches).
func (r *Routes) Attach(table RouteTable) {
	r.mu.Lock()
	r.table = table
	r.mu.Unlock()
}

func (r *Routes) current() RouteTable {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.table
}

// Replace implements RouteTable.
func (r *Routes) Replace(ctx context.Context, prefix netip.Prefix) error {
	if t := r.current(); t != nil {
		return t.Replace(ctx, prefix)
	}
	return nil
}

// Delete implements RouteTable.
func (r *Routes) Delete(ctx context.Context, prefix netip.Prefix) error {
	if t := r.current(); t != nil {
		return t.Delete(ctx, prefix)
	}
	return nil
}
