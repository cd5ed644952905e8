package memstore

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/addrpool"
	"gridweave.dev/mesh/wgkey"
)

// Store is an in-memory joinkeys.Store. The zero value is ready to use.
type Store struct {
	mu     sync.Mutex
	keys   map[string]joinkeys.KeyRecord
	keyIDs []string // insertion order
	nodes  map[string]joinkeys.NodeRecord
	byKey  map[wgkey.Key]string // public key → hostname
	byIP   map[uint32]string    // VPN IP → hostname
	next   map[string]uint32    // pool → high-water mark
	free   map[string]*addrHeap // pool → released addresses
	// releasedAt is when each address of a free list was released.
	releasedAt map[uint32]time.Time
	audit      []joinkeys.AuditEvent
	auditID    int64
	rev        int64 // the last revision given to a node
	closed     bool
}

var _ joinkeys.Store = (*Store)(nil)

// New returns an empty Store; it is the same as new(Store).
func New() *Store { return &Store{} }

func (s *Store) init() error {
	if s.closed {
		return fmt.Errorf("memstore: closed")
	}
	if s.keys == nil {
		s.keys = map[string]joinkeys.KeyRecord{}
		s.nodes = map[string]joinkeys.NodeRecord{}
		s.byKey = map[wgkey.Key]string{}
		s.byIP = map[uint32]string{}
		s.next = map[string]uint32{}
		s.free = map[string]*addrHeap{}
		s.releasedAt = map[uint32]time.Time{}
	}
	return nil
}

func (s *Store) lock() error {
	s.mu.Lock()
	if err := s.init(); err != nil {
		s.mu.Unlock()
		return err
	}
	return nil
}

// InsertKey implements joinkeys.Store.
func (s *Store) InsertKey(_ context.Context, key joinkeys.KeyRecord) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, dup := s.keys[key.ID]; dup {
		return fmt.Errorf("memstore: key %s already exists", key.ID)
	}
	s.keys[key.ID] = cloneKey(key)
	s.keyIDs = append(s.keyIDs, key.ID)
	return nil
}

// Key implements joinkeys.Store.
func (s *Store) Key(_ context.Context, id string) (joinkeys.KeyRecord, error) {
	if err := s.lock(); err != nil {
		return joinkeys.KeyRecord{}, err
	}
	defer s.mu.Unlock()
	k, ok := s.keys[id]
	if !ok {
		return joinkeys.KeyRecord{}, joinkeys.ErrKeyNotFound
	}
	return cloneKey(k), nil
}

// Keys implements joinkeys.Store.
func (s *Store) Keys(context.Context) ([]joinkeys.KeyRecord, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := make([]joinkeys.KeyRecord, 0, len(s.keyIDs))
	for _, id := range s.keyIDs {
		out = append(out, cloneKey(s.keys[id]))
	}
	return out, nil
}

// RevokeKey implements joinkeys.Store.
func (s *Store) RevokeKey(_ context.Context, id string, at time.Time) (joinkeys.KeyRecord, error) {
	return s.changeKey(id, func(k *joinkeys.KeyRecord) {
		if k.RevokedAt.IsZero() {
			k.RevokedAt = at
		}
	})
}

// ReturnKeyUse implements joinkeys.Store.
func (s *Store) ReturnKeyUse(_ context.Context, id string) (joinkeys.KeyRecord, error) {
	return s.changeKey(id, func(k *joinkeys.KeyRecord) {
		if k.Uses > 0 {
			k.Uses--
		}
	})
}

// changeKey applies change to the key with id and returns it as stored.
func (s *Store) changeKey(id string, change func(*joinkeys.KeyRecord)) (joinkeys.KeyRecord, error) {
	if err := s.lock(); err != nil {
		return joinkeys.KeyRecord{}, err
	}
	defer s.mu.Unlock()
	k, ok := s.keys[id]
	if !ok {
		return joinkeys.KeyRecord{}, joinkeys.ErrKeyNotFound
	}
	change(&k)
	s.keys[id] = k
	return cloneKey(k), nil
}

// ReserveNode implements joinkeys.Store.
func (s *Store) ReserveNode(_ context.Context, r joinkeys.Reservation) (joinkeys.NodeRecord, error) {
	if err := s.lock(); err != nil {
		return joinkeys.NodeRecord{}, err
	}
	defer s.mu.Unlock()

	var spent joinkeys.KeyRecord
	if r.SpendKeyID != "" {
		k, ok := s.keys[r.SpendKeyID]
		if !ok {
			return joinkeys.NodeRecord{}, joinkeys.ErrKeyNotFound
		}
		if err := k.UsableAt(r.Now); err != nil {
			return joinkeys.NodeRecord{}, fmt.Errorf("key %s: %w", k.ID, err)
		}
		spent = k
	}
	n := r.Node
	if holder, ok := s.nodes[n.Hostname]; ok {
		return joinkeys.NodeRecord{}, &joinkeys.HostnameTakenError{Existing: cloneNode(holder).Node}
	}
	if host, ok := s.byKey[n.PublicKey]; ok {
		return joinkeys.NodeRecord{}, &joinkeys.PublicKeyTakenError{Existing: cloneNode(s.nodes[host]).Node}
	}
	if err := s.checkPodCIDR(n); err != nil {
		return joinkeys.NodeRecord{}, err
	}
	// Allocation mutates the free list and high-water mark; work on a
	// transaction view and commit only on success.
	tx := &book{s: s, next: map[string]uint32{}, releasedBefore: r.ReleasedBefore}
	addr, err := r.Addresses.Allocate(tx)
	if err != nil {
		tx.rollback()
		return joinkeys.NodeRecord{}, err
	}
	for pool, next := range tx.next {
		s.next[pool] = next
	}
	if r.SpendKeyID != "" {
		spent.Uses++
		spent.LastUsed = r.Now
		s.keys[spent.ID] = spent
	}
	n.VPNIP = addr
	n.PoolID = r.Addresses.ID()
	s.rev++
	n.Revision = s.rev
	n = cloneNode(n)
	s.nodes[n.Hostname] = n
	s.byKey[n.PublicKey] = n.Hostname
	s.byIP[addrpool.ToUint32(addr)] = n.Hostname
	if r.Event.Type != "" {
		s.appendAudit(r.Event)
	}
	return cloneNode(n), nil
}

// Node implements joinkeys.Store.
func (s *Store) Node(_ context.Context, hostname string) (joinkeys.NodeRecord, error) {
	if err := s.lock(); err != nil {
		return joinkeys.NodeRecord{}, err
	}
	defer s.mu.Unlock()
	n, ok := s.nodes[hostname]
	if !ok {
		return joinkeys.NodeRecord{}, joinkeys.ErrNodeNotFound
	}
	return cloneNode(n), nil
}

// NodeByPublicKey implements joinkeys.Store.
func (s *Store) NodeByPublicKey(_ context.Context, key wgkey.Key) (joinkeys.NodeRecord, error) {
	if err := s.lock(); err != nil {
		return joinkeys.NodeRecord{}, err
	}
	defer s.mu.Unlock()
	host, ok := s.byKey[key]
	if !ok {
		return joinkeys.NodeRecord{}, joinkeys.ErrNodeNotFound
	}
	return cloneNode(s.nodes[host]), nil
}

// Nodes implements joinkeys.Store.
func (s *Store) Nodes(context.Context) ([]joinkeys.NodeRecord, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := make([]joinkeys.NodeRecord, 0, len(s.nodes))
	for _, n := range s.nodes {
		out = append(out, cloneNode(n))
	}
	slices.SortFunc(out, func(a, b joinkeys.NodeRecord) int { return cmp.Compare(a.Hostname, b.Hostname) })
	return out, nil
}

// GPUKinds implements joinkeys.Store.
func (s *Store) GPUKinds(context.Context) ([]joinkeys.GPUKind, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	counts := map[joinkeys.GPUKind]int{}
	for _, n := range s.nodes {
		if n.Status != joinkeys.StatusRegistered || len(n.GPUs) == 0 {
			continue
		}
		kind := joinkeys.GPUKind{Vendor: n.GPUs[0].Vendor, Model: n.GPUs[0].Name, GPUs: len(n.GPUs)}
		if kind.Vendor == "" {
			kind.Vendor = joinkeys.VendorNVIDIA
		}
		counts[kind]++
	}
	out := make([]joinkeys.GPUKind, 0, len(counts))
	for kind, n := range counts {
		kind.Nodes = n
		out = append(out, kind)
	}
	return out, nil
}

// NodesAfter implements joinkeys.Store.
func (s *Store) NodesAfter(_ context.Context, after string, limit int) ([]joinkeys.NodeRecord, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.nodes))
	for h := range s.nodes {
		if h > after {
			names = append(names, h)
		}
	}
	slices.Sort(names)
	out := make([]joinkeys.NodeRecord, 0, min(limit, len(names)))
	for _, h := range names[:min(limit, len(names))] {
		out = append(out, cloneNode(s.nodes[h]))
	}
	return out, nil
}

// UpdateNode implements joinkeys.Store.
func (s *Store) UpdateNode(_ context.Context, n joinkeys.NodeRecord, event joinkeys.AuditEvent) (joinkeys.NodeRecord, error) {
	if err := s.lock(); err != nil {
		return joinkeys.NodeRecord{}, err
	}
	defer s.mu.Unlock()
	cur, ok := s.nodes[n.Hostname]
	if !ok {
		return joinkeys.NodeRecord{}, joinkeys.ErrNodeNotFound
	}
	if cur.Revision != n.Revision {
		return joinkeys.NodeRecord{}, fmt.Errorf("%w: %q is at revision %d, the write was based on %d", joinkeys.ErrNodeChanged, n.Hostname, cur.Revision, n.Revision)
	}
	if n.PodCIDR != cur.PodCIDR {
		if err := s.checkPodCIDR(n); err != nil {
			return joinkeys.NodeRecord{}, err
		}
	}
	cur.Version = n.Version
	cur.GPUs = slices.Clone(n.GPUs)
	cur.PodCIDR = n.PodCIDR
	cur.Status = n.Status
	cur.UpdatedAt = n.UpdatedAt
	cur.RegisteredAt = n.RegisteredAt
	cur.LastSeen = n.LastSeen
	if len(n.TokenHash) > 0 {
		cur.TokenHash = slices.Clone(n.TokenHash)
	}
	s.rev++
	cur.Revision = s.rev
	s.nodes[n.Hostname] = cur
	if event.Type != "" {
		s.appendAudit(event)
	}
	return cloneNode(cur), nil
}

// checkPodCIDR refuses n's pod CIDR if it overlaps another node's.
func (s *Store) checkPodCIDR(n joinkeys.NodeRecord) error {
	if !n.PodCIDR.IsValid() {
		return nil
	}
	for host, other := range s.nodes {
		if host != n.Hostname && other.PodCIDR.IsValid() && other.PodCIDR.Overlaps(n.PodCIDR) {
			return joinkeys.NodePodCIDRConflict(n.PodCIDR, host, other.PodCIDR)
		}
	}
	return nil
}

// DeleteNode implements joinkeys.Store.
func (s *Store) DeleteNode(_ context.Context, hostname string, revision int64, at time.Time) (joinkeys.NodeRecord, error) {
	if err := s.lock(); err != nil {
		return joinkeys.NodeRecord{}, err
	}
	defer s.mu.Unlock()
	n, ok := s.nodes[hostname]
	if !ok {
		return joinkeys.NodeRecord{}, joinkeys.ErrNodeNotFound
	}
	if revision != 0 && n.Revision != revision {
		return joinkeys.NodeRecord{}, fmt.Errorf("%w: %q is at revision %d, the release was based on %d", joinkeys.ErrNodeChanged, hostname, n.Revision, revision)
	}
	ip := addrpool.ToUint32(n.VPNIP)
	delete(s.nodes, hostname)
	delete(s.byKey, n.PublicKey)
	delete(s.byIP, ip)
	h := s.free[n.PoolID]
	if h == nil {
		h = &addrHeap{}
		s.free[n.PoolID] = h
	}
	if _, listed := s.releasedAt[ip]; !listed {
		heap.Push(h, ip)
	}
	s.releasedAt[ip] = at
	return cloneNode(n), nil
}

// AppendAudit implements joinkeys.Store.
func (s *Store) AppendAudit(_ context.Context, e joinkeys.AuditEvent) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	s.appendAudit(e)
	return nil
}

func (s *Store) appendAudit(e joinkeys.AuditEvent) {
	s.auditID++
	e.ID = s.auditID
	s.audit = append(s.audit, e)
}

// Audit implements joinkeys.Store.
func (s *Store) Audit(_ context.Context, q joinkeys.AuditQuery) ([]joinkeys.AuditEvent, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []joinkeys.AuditEvent
	for _, e := range s.audit {
		if (q.Type == "" || e.Type == q.Type) && (q.Hostname == "" || e.Hostname == q.Hostname) && (q.KeyID == "" || e.KeyID == q.KeyID) {
			out = append(out, e)
		}
	}
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[len(out)-q.Limit:]
	}
	return slices.Clone(out), nil
}

// PruneAudit implements joinkeys.Store.
func (s *Store) PruneAudit(_ context.Context, r joinkeys.AuditRetention, now time.Time) (int, error) {
	if err := s.lock(); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	keep := joinkeys.Retained(s.audit, r, now)
	removed := len(s.audit) - len(keep)
	s.audit = keep
	return removed, nil
}

// Close implements joinkeys.Store; later calls fail.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// book is the addrpool.Book of one reservation. Pops from the free
// list are remembered so a failed allocation can put them back.
type book struct {
	s      *Store
	next   map[string]uint32
	popped []poppedAddr
	// releasedBefore: an address released after it rests (quarantine;
	// zero: none does).
	releasedBefore time.Time
}

type poppedAddr struct {
	pool string
	ip   uint32
	at   time.Time
}

func (b *book) PopFree(pool string) (uint32, bool, error) {
	h := b.s.free[pool]
	var resting []uint32 // released too lately: put back
	defer func() {
		for _, ip := range resting {
			heap.Push(h, ip)
		}
	}()
	for h != nil && h.Len() > 0 {
		ip := heap.Pop(h).(uint32)
		if at := b.s.releasedAt[ip]; !b.releasedBefore.IsZero() && at.After(b.releasedBefore) {
			resting = append(resting, ip)
			continue
		}
		b.popped = append(b.popped, poppedAddr{pool, ip, b.s.releasedAt[ip]})
		delete(b.s.releasedAt, ip)
		return ip, true, nil
	}
	return 0, false, nil
}

func (b *book) Next(pool string, first uint32) (uint32, error) {
	if n, ok := b.next[pool]; ok {
		return n, nil
	}
	if n, ok := b.s.next[pool]; ok {
		return n, nil
	}
	return first, nil
}

func (b *book) SetNext(pool string, next uint32) error {
	b.next[pool] = next
	return nil
}

func (b *book) InUse(ip uint32) (bool, error) {
	_, used := b.s.byIP[ip]
	return used, nil
}

func (b *book) rollback() {
	for _, p := range b.popped {
		heap.Push(b.s.free[p.pool], p.ip)
		b.s.releasedAt[p.ip] = p.at
	}
}

// addrHeap is a min-heap of released addresses.
type addrHeap []uint32

func (h addrHeap) Len() int           { return len(h) }
func (h addrHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h addrHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *addrHeap) Push(x any)        { *h = append(*h, x.(uint32)) }
func (h *addrHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func cloneKey(k joinkeys.KeyRecord) joinkeys.KeyRecord {
	k.Labels = maps.Clone(k.Labels)
	k.SecretHash = slices.Clone(k.SecretHash)
	return k
}

func cloneNode(n joinkeys.NodeRecord) joinkeys.NodeRecord {
	n.GPUs = slices.Clone(n.GPUs)
	n.TokenHash = slices.Clone(n.TokenHash)
	return n
}
