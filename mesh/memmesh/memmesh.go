package memmesh

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"

	"gridweave.dev/mesh"
	"gridweave.dev/mesh/internal/allowedips"
	"gridweave.dev/mesh/wgkey"
)

// Mesh is an in-memory mesh.Mesh.
type Mesh struct {
	mu      sync.Mutex
	key     wgkey.Key
	peers   map[wgkey.Key]mesh.Peer
	holders allowedips.Table
	status  map[wgkey.Key]mesh.PeerStatus
	closed  bool
}

var (
	_ mesh.Mesh     = (*Mesh)(nil)
	_ mesh.Observer = (*Mesh)(nil)
)

// New returns a Mesh whose device has the given public key.
func New(publicKey wgkey.Key) *Mesh { return &Mesh{key: publicKey} }

var errClosed = errors.New("memmesh: closed")

func (m *Mesh) lock() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return errClosed
	}
	if m.peers == nil {
		m.peers = map[wgkey.Key]mesh.Peer{}
	}
	if m.key.IsZero() {
		var err error
		if _, m.key, err = wgkey.GeneratePair(); err != nil {
			m.mu.Unlock()
			return err
		}
	}
	return nil
}

// PublicKey implements mesh.Mesh.
func (m *Mesh) PublicKey(context.Context) (wgkey.Key, error) {
	if err := m.lock(); err != nil {
		return wgkey.Key{}, err
	}
	defer m.mu.Unlock()
	return m.key, nil
}

// UpsertPeer implements mesh.Mesh.
func (m *Mesh) UpsertPeer(_ context.Context, p mesh.Peer) error {
	p, err := mesh.Normalize(p)
	if err != nil {
		return err
	}
	if err := m.lock(); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if err := m.holders.Conflict(p.PublicKey, p.AllowedIPs); err != nil {
		return err
	}
	if old, ok := m.peers[p.PublicKey]; ok {
		m.holders.Remove(old.PublicKey, old.AllowedIPs)
		if !p.Endpoint.IsValid() {
			p.Endpoint = old.Endpoint
		}
	}
	m.holders.Add(p.PublicKey, p.AllowedIPs)
	m.peers[p.PublicKey] = p
	return nil
}

// RemovePeer implements mesh.Mesh.
func (m *Mesh) RemovePeer(_ context.Context, key wgkey.Key) error {
	if err := m.lock(); err != nil {
		return err
	}
	defer m.mu.Unlock()
	old, ok := m.peers[key]
	if !ok {
		return mesh.ErrPeerNotFound
	}
	m.holders.Remove(key, old.AllowedIPs)
	delete(m.peers, key)
	delete(m.status, key)
	return nil
}

// Peers implements mesh.Mesh.
func (m *Mesh) Peers(context.Context) ([]mesh.Peer, error) {
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	out := slices.Collect(maps.Values(m.peers))
	for i := range out {
		out[i].AllowedIPs = slices.Clone(out[i].AllowedIPs)
	}
	slices.SortFunc(out, func(a, b mesh.Peer) int { return mesh.CompareKeys(a.PublicKey, b.PublicKey) })
	return out, nil
}

// Close implements mesh.Mesh; later calls fail.
func (m *Mesh) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

// SetStatus sets what the in-memory device observed of a peer (its
// endpoint, last handshake and bytes), as a real device would report it.
// A peer that is not there is ErrPeerNotFound.
func (m *Mesh) SetStatus(st mesh.PeerStatus) error {
	if err := m.lock(); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if _, ok := m.peers[st.PublicKey]; !ok {
		return mesh.ErrPeerNotFound
	}
	if m.status == nil {
		m.status = map[wgkey.Key]mesh.PeerStatus{}
	}
	m.status[st.PublicKey] = st
	return nil
}

// PeerStatus implements mesh.Observer.
func (m *Mesh) PeerStatus(_ context.Context, key wgkey.Key) (mesh.PeerStatus, error) {
	if err := m.lock(); err != nil {
		return mesh.PeerStatus{}, err
	}
	defer m.mu.Unlock()
	p, ok := m.peers[key]
	if !ok {
		return mesh.PeerStatus{}, mesh.ErrPeerNotFound
	}
	if st, ok := m.status[key]; ok {
		return st, nil
	}
	return mesh.PeerStatus{PublicKey: key, Endpoint: p.Endpoint}, nil
}

// PeerStatuses implements mesh.Observer: every peer, with what SetStatus
// gave it (nothing observed otherwise; a peer's endpoint until then is the
// one it was given).
func (m *Mesh) PeerStatuses(context.Context) ([]mesh.PeerStatus, error) {
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	out := make([]mesh.PeerStatus, 0, len(m.peers))
	for key, p := range m.peers {
		st, ok := m.status[key]
		if !ok {
			st = mesh.PeerStatus{PublicKey: key, Endpoint: p.Endpoint}
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b mesh.PeerStatus) int { return mesh.CompareKeys(a.PublicKey, b.PublicKey) })
	return out, nil
}
