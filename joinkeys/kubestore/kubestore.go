package kubestore

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"

	"gridweave.dev/internal/keyedlock"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/addrpool"
	"gridweave.dev/mesh/wgkey"
)

// Options configure a Store. A nil *Options means defaults.
type Options struct {
	// StaleClaimAge is how old a claim whose node does not exist must be
	// before the store takes it back: the claim of a reservation whose
	// server died between taking the claim and creating the node. Default
	// two minutes, far longer than a reservation takes.
	StaleClaimAge time.Duration
	// Now is the clock claims are aged by; default time.Now.
	Now func() time.Time
	// Writer names this Store on every object it creates or updates
	// (WriterAnnotation): the identity of the replica whose writes it
	// makes, which the fence (FencePolicy) checks against the Lease's
	// holder. Empty: unsigned, which a fenced ledger refuses while a
	// replica holds the Lease.
	Writer string
}

// Store is a joinkeys.Store on the Kubernetes API, in one namespace.
// Several Stores, in one process or many, may share a namespace: every
// write is a compare-and-swap or a create, so they never overwrite each
// other.
type Store struct {
	namespace string
	writer    string
	keys      resource[keySpec]
	nodes     resource[nodeSpec]
	claims    resource[claimSpec]
	events    resource[eventSpec]
	tables    resource[tableSpec]
	staleAge  time.Duration
	now       func() time.Time
	closed    atomic.Bool
	// lastEvent is the time the last event name carried (eventTime).
	lastEvent atomic.Int64

	// writes queues this Store's writes of one key, or of the pod CIDR
	// table; the caches hold those objects as last written.
	writes     keyedlock.Locks
	cacheMu    sync.Mutex
	keyCache   map[string]object[keySpec]
	tableCache *object[tableSpec]
	// nodeCache holds nodes as this Store last read or wrote them. A
	// resourceVersion names one version of one object, so a cached node
	// at the revision a write is based on is that version exactly.
	nodeCache map[string]object[nodeSpec]

	// mu guards the address book: the addresses this Store knows to be
	// claimed, and per range the lowest address that may be free.
	mu      sync.Mutex
	loaded  bool
	claimed map[uint32]bool
	lowest  map[string]uint32
	// resting are claimed addresses whose node was released, and when:
	// quarantined until a reservation's ReleasedBefore is past that.
	resting map[uint32]time.Time
}

var _ joinkeys.Store = (*Store)(nil)

// New returns a Store keeping the ledger in namespace, which must exist,
// with the ledger's CRDs installed (InstallCRDs).
func New(cfg *rest.Config, namespace string, opts *Options) (*Store, error) {
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return nil, fmt.Errorf("kubestore: namespace %q: %s", namespace, errs[0])
	}
	client, err := restClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubestore: %w", err)
	}
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.StaleClaimAge <= 0 {
		o.StaleClaimAge = 2 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Store{
		namespace: namespace,
		writer:    o.Writer,
		keys:      resource[keySpec]{client, namespace, resourceKeys, "JoinKey", o.Writer},
		nodes:     resource[nodeSpec]{client, namespace, resourceNodes, "LedgerNode", o.Writer},
		claims:    resource[claimSpec]{client, namespace, resourceClaims, "LedgerClaim", o.Writer},
		events:    resource[eventSpec]{client, namespace, resourceEvents, "LedgerEvent", o.Writer},
		tables:    resource[tableSpec]{client, namespace, resourceTables, "PodCIDRTable", o.Writer},
		staleAge:  o.StaleClaimAge,
		now:       o.Now,
		claimed:   map[uint32]bool{},
		keyCache:  map[string]object[keySpec]{},
		nodeCache: map[string]object[nodeSpec]{},
		lowest:    map[string]uint32{},
	}, nil
}

// Namespace is the namespace the ledger lives in.
func (s *Store) Namespace() string { return s.namespace }

func (s *Store) check() error {
	if s.closed.Load() {
		return errors.New("kubestore: closed")
	}
	return nil
}

// Close implements joinkeys.Store; later calls fail.
func (s *Store) Close() error {
	s.closed.Store(true)
	return nil
}

// validName reports whether name can name an object; anything else is not
// in the ledger.
func validName(name string) bool {
	return len(validation.IsDNS1123Subdomain(name)) == 0
}

// ---- keys ----

// InsertKey implements joinkeys.Store.
func (s *Store) InsertKey(ctx context.Context, key joinkeys.KeyRecord) error {
	if err := s.check(); err != nil {
		return err
	}
	if !validName(key.ID) {
		return fmt.Errorf("kubestore: key id %q cannot name an object", key.ID)
	}
	spec := keySpec{
		Kind: key.Kind, Org: key.Org, Provider: key.Provider, Labels: key.Labels,
		CreatedBy: key.CreatedBy, CreatedAt: key.CreatedAt, ExpiresAt: key.ExpiresAt,
		MaxUses: key.MaxUses, Uses: key.Uses, RevokedAt: key.RevokedAt, LastUsed: key.LastUsed,
		SecretHash: key.SecretHash, InsertedAt: time.Now().UTC(),
	}
	_, err := s.keys.create(ctx, s.keys.new(key.ID, nil, spec))
	if apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubestore: key %s already exists", key.ID)
	}
	return err
}

func keyRecord(o object[keySpec]) joinkeys.KeyRecord {
	sp := o.Spec
	return joinkeys.KeyRecord{
		Key: joinkeys.Key{
			ID: o.Metadata.Name, Kind: sp.Kind, Org: sp.Org, Provider: sp.Provider, Labels: sp.Labels,
			CreatedBy: sp.CreatedBy, CreatedAt: sp.CreatedAt, ExpiresAt: sp.ExpiresAt,
			MaxUses: sp.MaxUses, Uses: sp.Uses, RevokedAt: sp.RevokedAt, LastUsed: sp.LastUsed,
		},
		SecretHash: sp.SecretHash,
	}
}

func (s *Store) getKey(ctx context.Context, id string) (object[keySpec], error) {
	if !validName(id) {
		return object[keySpec]{}, joinkeys.ErrKeyNotFound
	}
	o, err := s.keys.get(ctx, id)
	if apierrors.IsNotFound(err) {
		return o, joinkeys.ErrKeyNotFound
	}
	return o, err
}

// Key implements joinkeys.Store.
func (s *Store) Key(ctx context.Context, id string) (joinkeys.KeyRecord, error) {
	if err := s.check(); err != nil {
		return joinkeys.KeyRecord{}, err
	}
	o, err := s.getKey(ctx, id)
	if err != nil {
		return joinkeys.KeyRecord{}, err
	}
	return keyRecord(o), nil
}

// Keys implements joinkeys.Store.
func (s *Store) Keys(ctx context.Context) ([]joinkeys.KeyRecord, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var objs []object[keySpec]
	if err := s.keys.each(ctx, "", func(o object[keySpec]) bool { objs = append(objs, o); return true }); err != nil {
		return nil, err
	}
	slices.SortStableFunc(objs, func(a, b object[keySpec]) int {
		return cmp.Or(a.Spec.CreatedAt.Compare(b.Spec.CreatedAt), a.Spec.InsertedAt.Compare(b.Spec.InsertedAt), cmp.Compare(a.Metadata.Name, b.Metadata.Name))
	})
	out := make([]joinkeys.KeyRecord, len(objs))
	for i, o := range objs {
		out[i] = keyRecord(o)
	}
	return out, nil
}

// changeKey applies change to the key as stored and writes it back under
// its resourceVersion, from a fresh read when another write got in
// between. Writes of one key from this Store queue on a lock and start
// from the object the last one wrote, so a hot key costs one call per
// spend rather than a storm of conflicts.
func (s *Store) changeKey(ctx context.Context, id string, change func(*keySpec) error) (object[keySpec], error) {
	unlock, err := s.writes.Lock(ctx, "key/"+id)
	if err != nil {
		return object[keySpec]{}, err
	}
	defer unlock()
	o, cached := s.cachedKey(id)
	for {
		if !cached {
			if o, err = s.getKey(ctx, id); err != nil {
				s.cacheKey(id, nil)
				return o, err
			}
		}
		fromCache := cached
		cached = false
		if err := change(&o.Spec); err != nil {
			if fromCache {
				continue // decide from the stored key, not a remembered one
			}
			return o, err
		}
		written, err := s.keys.update(ctx, o)
		switch {
		case apierrors.IsConflict(err):
			continue
		case apierrors.IsNotFound(err):
			s.cacheKey(id, nil)
			return written, joinkeys.ErrKeyNotFound
		case err != nil:
			s.cacheKey(id, nil)
			return written, err
		}
		s.cacheKey(id, &written)
		return written, nil
	}
}

func (s *Store) cachedKey(id string) (object[keySpec], bool) {
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	o, ok := s.keyCache[id]
	return o, ok
}

// cacheKey remembers the key as last written (nil forgets it). The cache
// is bounded: it only saves a read, so it is emptied when full.
func (s *Store) cacheKey(id string, o *object[keySpec]) {
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	if o == nil {
		delete(s.keyCache, id)
		return
	}
	if len(s.keyCache) >= 1024 {
		clear(s.keyCache)
	}
	s.keyCache[id] = *o
}

// RevokeKey implements joinkeys.Store.
func (s *Store) RevokeKey(ctx context.Context, id string, at time.Time) (joinkeys.KeyRecord, error) {
	if err := s.check(); err != nil {
		return joinkeys.KeyRecord{}, err
	}
	o, err := s.changeKey(ctx, id, func(k *keySpec) error {
		if k.RevokedAt.IsZero() {
			k.RevokedAt = at
		}
		return nil
	})
	if err != nil {
		return joinkeys.KeyRecord{}, err
	}
	return keyRecord(o), nil
}

// spendKey spends one use of the key if it is usable at now, and returns
// the undo.
func (s *Store) spendKey(ctx context.Context, id string, now time.Time) (undo func(), err error) {
	var before time.Time
	_, err = s.changeKey(ctx, id, func(k *keySpec) error {
		rec := keyRecord(object[keySpec]{Spec: *k})
		if err := rec.UsableAt(now); err != nil {
			return fmt.Errorf("key %s: %w", id, err)
		}
		before = k.LastUsed
		k.Uses++
		k.LastUsed = now
		return nil
	})
	if err != nil {
		return nil, err
	}
	return func() {
		_, _ = s.changeKey(context.WithoutCancel(ctx), id, func(k *keySpec) error {
			if k.Uses > 0 {
				k.Uses--
			}
			if k.LastUsed.Equal(now) {
				k.LastUsed = before
			}
			return nil
		})
	}, nil
}

// ---- nodes ----

func nodeRecord(o object[nodeSpec]) (joinkeys.NodeRecord, error) {
	sp := o.Spec
	rev, err := o.Metadata.revision()
	if err != nil {
		return joinkeys.NodeRecord{}, err
	}
	pub, err := wgkey.Parse(sp.PublicKey)
	if err != nil {
		return joinkeys.NodeRecord{}, fmt.Errorf("kubestore: node %s: public key: %w", o.Metadata.Name, err)
	}
	ip, err := netip.ParseAddr(sp.VPNIP)
	if err != nil {
		return joinkeys.NodeRecord{}, fmt.Errorf("kubestore: node %s: VPN IP: %w", o.Metadata.Name, err)
	}
	var pod netip.Prefix
	if sp.PodCIDR != "" {
		if pod, err = netip.ParsePrefix(sp.PodCIDR); err != nil {
			return joinkeys.NodeRecord{}, fmt.Errorf("kubestore: node %s: pod CIDR: %w", o.Metadata.Name, err)
		}
	}
	return joinkeys.NodeRecord{
		Node: joinkeys.Node{
			Hostname: o.Metadata.Name, PublicKey: pub, VPNIP: ip, Org: sp.Org, JoinKeyID: sp.JoinKeyID,
			Version: sp.Version, GPUs: sp.GPUs, PodCIDR: pod, Status: sp.Status,
			CreatedAt: sp.CreatedAt, UpdatedAt: sp.UpdatedAt, RegisteredAt: sp.RegisteredAt, LastSeen: sp.LastSeen,
			Revision: rev,
		},
		TokenHash: sp.TokenHash,
		PoolID:    sp.PoolID,
	}, nil
}

func prefixString(p netip.Prefix) string {
	if !p.IsValid() {
		return ""
	}
	return p.String()
}

func (s *Store) getNode(ctx context.Context, hostname string) (object[nodeSpec], error) {
	if !validName(hostname) {
		return object[nodeSpec]{}, joinkeys.ErrNodeNotFound
	}
	o, err := s.nodes.get(ctx, hostname)
	if apierrors.IsNotFound(err) {
		s.cacheNode(hostname, nil)
		return o, joinkeys.ErrNodeNotFound
	}
	if err == nil {
		s.cacheNode(hostname, &o)
	}
	return o, err
}

// nodeAt returns the node with hostname as it was at revision: from the
// cache when it holds that version, else read.
func (s *Store) nodeAt(ctx context.Context, hostname string, revision int64) (object[nodeSpec], error) {
	s.cacheMu.Lock()
	o, ok := s.nodeCache[hostname]
	s.cacheMu.Unlock()
	if ok && o.Metadata.ResourceVersion == strconv.FormatInt(revision, 10) {
		o.Spec.GPUs = slices.Clone(o.Spec.GPUs)
		return o, nil
	}
	return s.getNode(ctx, hostname)
}

// cacheNode remembers a node as read or written (nil forgets it); like
// the key cache it is emptied when full.
func (s *Store) cacheNode(hostname string, o *object[nodeSpec]) {
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	if o == nil {
		delete(s.nodeCache, hostname)
		return
	}
	if len(s.nodeCache) >= 4096 {
		clear(s.nodeCache)
	}
	s.nodeCache[hostname] = *o
}

// Node implements joinkeys.Store.
func (s *Store) Node(ctx context.Context, hostname string) (joinkeys.NodeRecord, error) {
	if err := s.check(); err != nil {
		return joinkeys.NodeRecord{}, err
	}
	o, err := s.getNode(ctx, hostname)
	if err != nil {
		return joinkeys.NodeRecord{}, err
	}
	return nodeRecord(o)
}

func publicKeyClaim(key wgkey.Key) string { return "key." + hex.EncodeToString(key[:]) }

func addressClaim(ip netip.Addr) string { return "ip." + ip.String() }

// NodeByPublicKey implements joinkeys.Store.
func (s *Store) NodeByPublicKey(ctx context.Context, key wgkey.Key) (joinkeys.NodeRecord, error) {
	if err := s.check(); err != nil {
		return joinkeys.NodeRecord{}, err
	}
	c, err := s.claims.get(ctx, publicKeyClaim(key))
	if apierrors.IsNotFound(err) {
		return joinkeys.NodeRecord{}, joinkeys.ErrNodeNotFound
	}
	if err != nil {
		return joinkeys.NodeRecord{}, err
	}
	o, err := s.getNode(ctx, c.Spec.Hostname)
	if err != nil {
		return joinkeys.NodeRecord{}, err
	}
	n, err := nodeRecord(o)
	if err != nil {
		return joinkeys.NodeRecord{}, err
	}
	if n.PublicKey != key {
		// The claim's holder was released and its hostname taken by
		// another machine while the claim was being released.
		return joinkeys.NodeRecord{}, joinkeys.ErrNodeNotFound
	}
	return n, nil
}

// eachNode calls visit for every node in hostname order until it returns
// false.
func (s *Store) eachNode(ctx context.Context, visit func(joinkeys.NodeRecord) bool) error {
	var decodeErr error
	err := s.nodes.each(ctx, "", func(o object[nodeSpec]) bool {
		n, err := nodeRecord(o)
		if err != nil {
			decodeErr = err
			return false
		}
		return visit(n)
	})
	return cmp.Or(err, decodeErr)
}

// Nodes implements joinkeys.Store.
func (s *Store) Nodes(ctx context.Context) ([]joinkeys.NodeRecord, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var out []joinkeys.NodeRecord
	err := s.eachNode(ctx, func(n joinkeys.NodeRecord) bool { out = append(out, n); return true })
	slices.SortFunc(out, func(a, b joinkeys.NodeRecord) int { return cmp.Compare(a.Hostname, b.Hostname) })
	return out, err
}

// NodesAfter implements joinkeys.Store. The API server lists in name
// order, but cannot start a list at a name: the pages before after are
// read and skipped.
func (s *Store) NodesAfter(ctx context.Context, after string, limit int) ([]joinkeys.NodeRecord, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var out []joinkeys.NodeRecord
	if limit <= 0 {
		return out, nil
	}
	err := s.eachNode(ctx, func(n joinkeys.NodeRecord) bool {
		if n.Hostname > after {
			out = append(out, n)
		}
		return len(out) < limit
	})
	return out, err
}

// GPUKinds implements joinkeys.Store.
func (s *Store) GPUKinds(ctx context.Context) ([]joinkeys.GPUKind, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	counts := map[joinkeys.GPUKind]int{}
	err := s.eachNode(ctx, func(n joinkeys.NodeRecord) bool {
		if n.Status != joinkeys.StatusRegistered || len(n.GPUs) == 0 {
			return true
		}
		kind := joinkeys.GPUKind{Vendor: cmp.Or(n.GPUs[0].Vendor, joinkeys.VendorNVIDIA), Model: n.GPUs[0].Name, GPUs: len(n.GPUs)}
		counts[kind]++
		return true
	})
	if err != nil {
		return nil, err
	}
	out := make([]joinkeys.GPUKind, 0, len(counts))
	for kind, n := range counts {
		kind.Nodes = n
		out = append(out, kind)
	}
	return out, nil
}

func newReservationID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ReserveNode implements joinkeys.Store. The Kubernetes API has no
// transactions spanning objects, so a reservation takes its parts one by
// one, in this order: the public key's claim, the pod CIDR's entry, the
// address's claim, the key's use, and last the node object, whose
// creation commits the reservation (AlreadyExists: the hostname is
// taken). On an error the parts already taken are given back in the
// reverse order, the order DeleteNode releases them in too.
func (s *Store) ReserveNode(ctx context.Context, r joinkeys.Reservation) (_ joinkeys.NodeRecord, err error) {
	if err := s.check(); err != nil {
		return joinkeys.NodeRecord{}, err
	}
	n := r.Node
	if !validName(n.Hostname) {
		return joinkeys.NodeRecord{}, fmt.Errorf("kubestore: hostname %q cannot name an object", n.Hostname)
	}
	// A refusal for a hostname in use is known before anything is taken
	// when this Store holds the node; otherwise the node's creation below
	// decides (and the parts taken are given back).
	s.cacheMu.Lock()
	_, known := s.nodeCache[n.Hostname]
	s.cacheMu.Unlock()
	if known {
		if held, err := s.getNode(ctx, n.Hostname); err == nil {
			return joinkeys.NodeRecord{}, hostnameTaken(held)
		} else if !errors.Is(err, joinkeys.ErrNodeNotFound) {
			return joinkeys.NodeRecord{}, err
		}
	}

	reservation := newReservationID()
	var undo []func()
	committed := false
	defer func() {
		if err != nil && !committed {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	give := context.WithoutCancel(ctx)

	keyClaim, err := s.claimPublicKey(ctx, n.PublicKey, n.Hostname, reservation)
	if err != nil {
		return joinkeys.NodeRecord{}, err
	}
	undo = append(undo, func() { s.releaseClaim(give, keyClaim, reservation) })

	if n.PodCIDR.IsValid() {
		if err := s.claimPodCIDR(ctx, n.Hostname, reservation, n.PodCIDR, false); err != nil {
			return joinkeys.NodeRecord{}, err
		}
		undo = append(undo, func() { _ = s.releasePodCIDR(give, n.Hostname, reservation) })
	}

	addr, err := s.claimAddress(ctx, r.Addresses, n.Hostname, reservation, r.ReleasedBefore)
	if err != nil {
		return joinkeys.NodeRecord{}, err
	}
	undo = append(undo, func() { s.releaseAddress(give, addr, reservation) })

	if r.SpendKeyID != "" {
		giveBack, err := s.spendKey(ctx, r.SpendKeyID, r.Now)
		if err != nil {
			return joinkeys.NodeRecord{}, err
		}
		undo = append(undo, giveBack)
	}

	spec := nodeSpec{
		PublicKey: n.PublicKey.String(), VPNIP: addr.String(), Org: n.Org, JoinKeyID: n.JoinKeyID,
		Version: n.Version, GPUs: n.GPUs, PodCIDR: prefixString(n.PodCIDR), Status: n.Status,
		CreatedAt: n.CreatedAt, UpdatedAt: n.UpdatedAt, RegisteredAt: n.RegisteredAt, LastSeen: n.LastSeen,
		TokenHash: n.TokenHash, PoolID: r.Addresses.ID(), Reservation: reservation,
	}
	created, err := s.nodes.create(ctx, s.nodes.new(n.Hostname, nil, spec))
	if err != nil {
		// A create that timed out, or was retried, may have gone
		// through: the node holding this reservation is ours.
		held, getErr := s.getNode(give, n.Hostname)
		switch {
		case getErr == nil && held.Spec.Reservation == reservation:
			created, err = held, nil
		case getErr == nil && apierrors.IsAlreadyExists(err):
			return joinkeys.NodeRecord{}, hostnameTaken(held)
		case apierrors.IsAlreadyExists(err):
			return joinkeys.NodeRecord{}, &joinkeys.HostnameTakenError{Existing: joinkeys.Node{Hostname: n.Hostname}}
		case getErr != nil && !errors.Is(getErr, joinkeys.ErrNodeNotFound):
			// Unknown whether the node exists: keep what it would hold.
			committed = true
			return joinkeys.NodeRecord{}, fmt.Errorf("kubestore: creating node %s: %w (and reading it back: %v)", n.Hostname, err, getErr)
		default:
			return joinkeys.NodeRecord{}, err
		}
	}
	// The node exists: from here on nothing it holds is given back.
	committed = true
	s.cacheNode(n.Hostname, &created)
	rec, err := nodeRecord(created)
	if err != nil {
		return joinkeys.NodeRecord{}, err
	}
	if r.Event.Type != "" {
		if err := s.appendAudit(give, r.Event); err != nil {
			return rec, fmt.Errorf("kubestore: node %s reserved, but its audit event was not written: %w", n.Hostname, err)
		}
	}
	return rec, nil
}

func hostnameTaken(held object[nodeSpec]) error {
	n, err := nodeRecord(held)
	if err != nil {
		return err
	}
	return &joinkeys.HostnameTakenError{Existing: n.Node}
}

// claimPublicKey creates the public key's claim. A claim held by a node
// with that key means the key is taken; a claim without such a node is a
// reservation in flight (taken too) or, once older than StaleClaimAge,
// the leftover of a server that died in one, which is removed.
func (s *Store) claimPublicKey(ctx context.Context, key wgkey.Key, hostname, reservation string) (object[claimSpec], error) {
	name := publicKeyClaim(key)
	for attempt := 0; ; attempt++ {
		c, err := s.claims.create(ctx, s.claims.new(name, map[string]string{labelClaim: "public-key"}, claimSpec{Hostname: hostname, Reservation: reservation}))
		if !apierrors.IsAlreadyExists(err) {
			return c, err
		}
		held, err := s.claims.get(ctx, name)
		if apierrors.IsNotFound(err) && attempt < 3 {
			continue // released meanwhile
		}
		if err != nil {
			return c, err
		}
		holder, err := s.getNode(ctx, held.Spec.Hostname)
		switch {
		case err == nil && holder.Spec.Reservation == held.Spec.Reservation:
			n, err := nodeRecord(holder)
			if err != nil {
				return c, err
			}
			return c, &joinkeys.PublicKeyTakenError{Existing: n.Node}
		case err != nil && !errors.Is(err, joinkeys.ErrNodeNotFound):
			return c, err // not known to be a leftover
		}
		if s.stale(held) && attempt < 3 {
			if err := s.claims.remove(ctx, name, held.Metadata.UID, held.Metadata.ResourceVersion); err == nil || apierrors.IsNotFound(err) {
				continue
			}
		}
		return c, &joinkeys.PublicKeyTakenError{Existing: joinkeys.Node{Hostname: held.Spec.Hostname, PublicKey: key}}
	}
}

// stale reports whether a claim whose node does not hold it is old enough
// to be a dead server's leftover.
func (s *Store) stale(c object[claimSpec]) bool {
	return c.Metadata.CreationTimestamp != nil && s.now().Sub(*c.Metadata.CreationTimestamp) > s.staleAge
}

// releaseClaim deletes the claim if the reservation still holds it.
func (s *Store) releaseClaim(ctx context.Context, c object[claimSpec], reservation string) {
	if c.Spec.Reservation != reservation {
		return
	}
	_ = s.claims.remove(ctx, c.Metadata.Name, c.Metadata.UID, "")
}

// releaseClaimNamed deletes the claim with name if reservation holds it.
func (s *Store) releaseClaimNamed(ctx context.Context, name, reservation string) error {
	c, err := s.claims.get(ctx, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if c.Spec.Reservation != reservation {
		return nil
	}
	if err := s.claims.remove(ctx, name, c.Metadata.UID, ""); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// UpdateNode implements joinkeys.Store. A changed pod CIDR is entered in
// the table first and taken back if the node's write then fails.
func (s *Store) UpdateNode(ctx context.Context, n joinkeys.NodeRecord, event joinkeys.AuditEvent) (joinkeys.NodeRecord, error) {
	if err := s.check(); err != nil {
		return joinkeys.NodeRecord{}, err
	}
	cur, err := s.nodeAt(ctx, n.Hostname, n.Revision)
	if err != nil {
		return joinkeys.NodeRecord{}, err
	}
	if cur.Metadata.ResourceVersion != strconv.FormatInt(n.Revision, 10) {
		return joinkeys.NodeRecord{}, changed(n.Hostname, cur.Metadata.ResourceVersion, n.Revision)
	}
	give := context.WithoutCancel(ctx)
	newCIDR := prefixString(n.PodCIDR)
	// A new pod CIDR is entered beside the one the node holds before the
	// node is written, and replaces it after: both stay taken while the
	// write is in flight. A cleared one leaves the table after the write.
	claiming := newCIDR != cur.Spec.PodCIDR && n.PodCIDR.IsValid()
	clearing := newCIDR != cur.Spec.PodCIDR && !n.PodCIDR.IsValid()
	if claiming {
		if err := s.claimPodCIDR(ctx, n.Hostname, cur.Spec.Reservation, n.PodCIDR, true); err != nil {
			return joinkeys.NodeRecord{}, err
		}
	}
	sp := &cur.Spec
	sp.Version = n.Version
	sp.GPUs = n.GPUs
	sp.PodCIDR = newCIDR
	sp.Status = n.Status
	sp.UpdatedAt, sp.RegisteredAt, sp.LastSeen = n.UpdatedAt, n.RegisteredAt, n.LastSeen
	if len(n.TokenHash) > 0 {
		sp.TokenHash = n.TokenHash
	}
	written, err := s.nodes.update(ctx, cur)
	if claiming {
		_ = s.settlePodCIDR(give, n.Hostname, cur.Spec.Reservation, newCIDR, err == nil)
	}
	if err != nil {
		s.cacheNode(n.Hostname, nil)
		switch {
		case apierrors.IsNotFound(err):
			return joinkeys.NodeRecord{}, joinkeys.ErrNodeNotFound
		case apierrors.IsConflict(err):
			return joinkeys.NodeRecord{}, changed(n.Hostname, "", n.Revision)
		}
		return joinkeys.NodeRecord{}, err
	}
	if clearing {
		_ = s.releasePodCIDR(give, n.Hostname, cur.Spec.Reservation)
	}
	s.cacheNode(n.Hostname, &written)
	rec, err := nodeRecord(written)
	if err != nil {
		return joinkeys.NodeRecord{}, err
	}
	if event.Type != "" {
		if err := s.appendAudit(give, event); err != nil {
			return rec, fmt.Errorf("kubestore: node %s written, but its audit event was not: %w", n.Hostname, err)
		}
	}
	return rec, nil
}

func changed(hostname, stored string, based int64) error {
	if stored == "" {
		return fmt.Errorf("%w: %q was written since revision %d was read", joinkeys.ErrNodeChanged, hostname, based)
	}
	return fmt.Errorf("%w: %q is at revision %s, the write was based on %d", joinkeys.ErrNodeChanged, hostname, stored, based)
}

// DeleteNode implements joinkeys.Store: the node object goes first (under
// its resourceVersion), then its address's claim, its pod CIDR's entry and
// its public key's claim.
func (s *Store) DeleteNode(ctx context.Context, hostname string, revision int64, at time.Time) (joinkeys.NodeRecord, error) {
	if err := s.check(); err != nil {
		return joinkeys.NodeRecord{}, err
	}
	for {
		cur, err := s.getNode(ctx, hostname)
		if err != nil {
			return joinkeys.NodeRecord{}, err
		}
		if revision != 0 && cur.Metadata.ResourceVersion != strconv.FormatInt(revision, 10) {
			return joinkeys.NodeRecord{}, changed(hostname, cur.Metadata.ResourceVersion, revision)
		}
		n, err := nodeRecord(cur)
		if err != nil {
			return joinkeys.NodeRecord{}, err
		}
		err = s.nodes.remove(ctx, hostname, cur.Metadata.UID, cur.Metadata.ResourceVersion)
		switch {
		case apierrors.IsNotFound(err):
			return joinkeys.NodeRecord{}, joinkeys.ErrNodeNotFound
		case apierrors.IsConflict(err) && revision != 0:
			return joinkeys.NodeRecord{}, changed(hostname, "", revision)
		case apierrors.IsConflict(err):
			continue
		case err != nil:
			return joinkeys.NodeRecord{}, err
		}
		s.cacheNode(hostname, nil)
		give := context.WithoutCancel(ctx)
		s.restAddress(give, n.VPNIP, cur.Spec.Reservation, at)
		_ = s.releasePodCIDR(give, hostname, cur.Spec.Reservation)
		_ = s.releaseClaimNamed(give, publicKeyClaim(n.PublicKey), cur.Spec.Reservation)
		return n, nil
	}
}

// ---- addresses ----

// book is the addrpool.Book of one allocation, over the Store's address
// book (s.mu held). Released addresses are not kept in a list: the lowest
// address that may be free is, and the claims say which are taken; an
// address resting since after releasedBefore counts as taken.
type book struct {
	s              *Store
	releasedBefore time.Time
}

func (b book) PopFree(string) (uint32, bool, error) { return 0, false, nil }

func (b book) Next(id string, first uint32) (uint32, error) {
	low := first
	if l, ok := b.s.lowest[id]; ok && l > first {
		low = l
	}
	// An address that has rested long enough, below the mark, is free
	// again: the lowest free address is handed out, as in the other
	// stores.
	for ip, at := range b.s.resting {
		if ip >= first && ip < low && (b.releasedBefore.IsZero() || !at.After(b.releasedBefore)) {
			low = ip
		}
	}
	return low, nil
}

func (b book) SetNext(id string, next uint32) error { b.s.lowest[id] = next; return nil }

func (b book) InUse(ip uint32) (bool, error) {
	if at, ok := b.s.resting[ip]; ok {
		return !b.releasedBefore.IsZero() && at.After(b.releasedBefore), nil
	}
	return b.s.claimed[ip], nil
}

// claimAddress picks the lowest address this Store does not know to be
// claimed and creates its claim; AlreadyExists (another Store took it)
// moves on to the next. When the range looks full, the book is read again
// from the claims (other Stores may have released addresses) before
// ErrPoolExhausted.
func (s *Store) claimAddress(ctx context.Context, r addrpool.Range, hostname, reservation string, releasedBefore time.Time) (netip.Addr, error) {
	if err := s.loadAddresses(ctx, false); err != nil {
		return netip.Addr{}, err
	}
	reloaded := false
	for {
		s.mu.Lock()
		addr, err := r.Allocate(book{s, releasedBefore})
		rested := false
		if err == nil {
			_, rested = s.resting[addrpool.ToUint32(addr)]
			s.claimed[addrpool.ToUint32(addr)] = true
			delete(s.resting, addrpool.ToUint32(addr))
		}
		s.mu.Unlock()
		if errors.Is(err, addrpool.ErrExhausted) && !reloaded {
			if err := s.loadAddresses(ctx, true); err != nil {
				return netip.Addr{}, err
			}
			reloaded = true
			continue
		}
		if err != nil {
			return netip.Addr{}, err
		}
		if rested {
			// The address rested long enough: its claim is taken over, if
			// it is still the resting one.
			taken, err := s.takeRestingClaim(ctx, addr, hostname, reservation, releasedBefore)
			if err != nil {
				s.forgetAddress(addr)
				return netip.Addr{}, err
			}
			if taken {
				return addr, nil
			}
			continue
		}
		_, err = s.claims.create(ctx, s.claims.new(addressClaim(addr), map[string]string{labelClaim: "address"}, claimSpec{Hostname: hostname, Reservation: reservation}))
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			s.forgetAddress(addr)
			return netip.Addr{}, err
		}
		return addr, nil
	}
}

func (s *Store) forgetAddress(addr netip.Addr) {
	ip := addrpool.ToUint32(addr)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.claimed, ip)
	for id, low := range s.lowest {
		if ip < low {
			s.lowest[id] = ip
		}
	}
}

// releaseAddress deletes the address's claim if reservation holds it and
// puts the address back in the book (a reservation given back: the
// address was never a node's).
func (s *Store) releaseAddress(ctx context.Context, addr netip.Addr, reservation string) {
	if err := s.releaseClaimNamed(ctx, addressClaim(addr), reservation); err == nil {
		s.forgetAddress(addr)
	}
}

// restAddress keeps a released node's address claimed, marked released at
// at, if reservation still holds it: the address rests until a
// reservation's ReleasedBefore is past at (takeRestingClaim).
func (s *Store) restAddress(ctx context.Context, addr netip.Addr, reservation string, at time.Time) {
	for {
		c, err := s.claims.get(ctx, addressClaim(addr))
		if err != nil || c.Spec.Reservation != reservation {
			return
		}
		at := at.UTC()
		c.Spec = claimSpec{ReleasedAt: &at}
		if _, err := s.claims.update(ctx, c); apierrors.IsConflict(err) {
			continue
		} else if err != nil {
			return
		}
		s.mu.Lock()
		if s.resting == nil {
			s.resting = map[uint32]time.Time{}
		}
		s.resting[addrpool.ToUint32(addr)] = at
		s.mu.Unlock()
		return
	}
}

// takeRestingClaim gives the resting claim of addr to reservation when it
// has rested since at most releasedBefore; taken is false (and the book
// corrected) when another Store took it first or it rests still.
func (s *Store) takeRestingClaim(ctx context.Context, addr netip.Addr, hostname, reservation string, releasedBefore time.Time) (taken bool, err error) {
	c, err := s.claims.get(ctx, addressClaim(addr))
	if apierrors.IsNotFound(err) {
		_, err = s.claims.create(ctx, s.claims.new(addressClaim(addr), map[string]string{labelClaim: "address"}, claimSpec{Hostname: hostname, Reservation: reservation}))
		if apierrors.IsAlreadyExists(err) {
			return false, nil
		}
		return err == nil, err
	}
	if err != nil {
		return false, err
	}
	if c.Spec.ReleasedAt == nil || (!releasedBefore.IsZero() && c.Spec.ReleasedAt.After(releasedBefore)) {
		if c.Spec.ReleasedAt != nil { // it rests still: keep it so in the book
			s.mu.Lock()
			s.resting[addrpool.ToUint32(addr)] = *c.Spec.ReleasedAt
			s.mu.Unlock()
		}
		return false, nil
	}
	// A new object, not an update: its creation time is the claim's age,
	// which another Store's leftover check reads.
	err = s.claims.remove(ctx, c.Metadata.Name, c.Metadata.UID, c.Metadata.ResourceVersion)
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return false, nil // another Store took it first
	}
	if err != nil {
		return false, err
	}
	_, err = s.claims.create(ctx, s.claims.new(addressClaim(addr), map[string]string{labelClaim: "address"}, claimSpec{Hostname: hostname, Reservation: reservation}))
	if apierrors.IsAlreadyExists(err) {
		return false, nil
	}
	return err == nil, err
}

// loadAddresses reads the book from the address claims, once, or again
// when reload is set; a reload also removes the stale claims of
// reservations that never created their node.
func (s *Store) loadAddresses(ctx context.Context, reload bool) error {
	s.mu.Lock()
	loaded := s.loaded
	s.mu.Unlock()
	if loaded && !reload {
		return nil
	}
	var claims []object[claimSpec]
	if err := s.claims.each(ctx, selector(map[string]string{labelClaim: "address"}), func(c object[claimSpec]) bool {
		claims = append(claims, c)
		return true
	}); err != nil {
		return err
	}
	claimed := map[uint32]bool{}
	resting := map[uint32]time.Time{}
	for _, c := range claims {
		addr, err := netip.ParseAddr(c.Metadata.Name[len("ip."):])
		if err != nil {
			continue
		}
		if c.Spec.ReleasedAt != nil { // a released node's, resting
			claimed[addrpool.ToUint32(addr)] = true
			resting[addrpool.ToUint32(addr)] = *c.Spec.ReleasedAt
			continue
		}
		if reload && s.stale(c) && s.leftover(ctx, c, addr) {
			if err := s.claims.remove(ctx, c.Metadata.Name, c.Metadata.UID, c.Metadata.ResourceVersion); err == nil {
				continue
			}
		}
		claimed[addrpool.ToUint32(addr)] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.claimed, s.resting, s.lowest, s.loaded = claimed, resting, map[string]uint32{}, true
	return nil
}

// leftover reports whether no node holds the address claim c.
func (s *Store) leftover(ctx context.Context, c object[claimSpec], addr netip.Addr) bool {
	holder, err := s.getNode(ctx, c.Spec.Hostname)
	if errors.Is(err, joinkeys.ErrNodeNotFound) {
		return true
	}
	return err == nil && (holder.Spec.Reservation != c.Spec.Reservation || holder.Spec.VPNIP != addr.String())
}

// ---- pod CIDRs ----

// tableName names the one PodCIDRTable of a namespace.
const tableName = "pod-cidrs"

// changeTable applies change to the pod CIDR table under its
// resourceVersion, creating the table on first use. Like changeKey, it
// queues this Store's writes and starts from the table it last wrote.
func (s *Store) changeTable(ctx context.Context, change func(entries map[string]tableEntry) error) error {
	unlock, err := s.writes.Lock(ctx, "table")
	if err != nil {
		return err
	}
	defer unlock()
	s.cacheMu.Lock()
	cached := s.tableCache
	s.cacheMu.Unlock()
	for {
		var t object[tableSpec]
		fromCache := cached != nil
		if fromCache {
			t = *cached
			cached = nil
		} else {
			t, err = s.tables.get(ctx, tableName)
			if apierrors.IsNotFound(err) {
				_, err = s.tables.create(ctx, s.tables.new(tableName, nil, tableSpec{}))
				if err == nil || apierrors.IsAlreadyExists(err) {
					continue
				}
			}
			if err != nil {
				return err
			}
		}
		entries := maps.Clone(t.Spec.Entries)
		if entries == nil {
			entries = map[string]tableEntry{}
		}
		if err := change(entries); err != nil {
			if fromCache {
				continue
			}
			return err
		}
		t.Spec.Entries = entries
		written, err := s.tables.update(ctx, t)
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return err
		}
		s.cacheMu.Lock()
		s.tableCache = &written
		s.cacheMu.Unlock()
		return nil
	}
}

// claimPodCIDR enters hostname's pod CIDR in the table unless it overlaps
// another node's. pending enters it beside the one the node holds
// (settlePodCIDR decides between them after the node's write); otherwise
// it is the entry's. An overlapping entry older than StaleClaimAge is
// first brought to what its node holds (nothing, when no node of its
// reservation exists: a server died between a release and the entry's
// removal).
func (s *Store) claimPodCIDR(ctx context.Context, hostname, reservation string, cidr netip.Prefix, pending bool) error {
	return s.changeTable(ctx, func(entries map[string]tableEntry) error {
		for host, e := range entries {
			if host == hostname {
				continue
			}
			held, overlaps := e.overlapping(cidr)
			if !overlaps {
				continue
			}
			if e.Since.IsZero() || s.now().Sub(e.Since) <= s.staleAge {
				return joinkeys.NodePodCIDRConflict(cidr, host, held)
			}
			fixed, err := s.heldEntry(ctx, host, e)
			if err != nil {
				return err
			}
			if fixed == nil {
				delete(entries, host)
				continue
			}
			entries[host] = *fixed
			if held, overlaps := fixed.overlapping(cidr); overlaps {
				return joinkeys.NodePodCIDRConflict(cidr, host, held)
			}
		}
		e := entries[hostname]
		if e.Reservation != reservation {
			e = tableEntry{Reservation: reservation}
		}
		if pending {
			e.Next = cidr.String()
		} else {
			e.CIDR, e.Next = cidr.String(), ""
		}
		e.Since = s.now().UTC()
		entries[hostname] = e
		return nil
	})
}

// overlapping returns the prefix of e (held or pending) that overlaps
// cidr.
func (e tableEntry) overlapping(cidr netip.Prefix) (netip.Prefix, bool) {
	for _, c := range []string{e.CIDR, e.Next} {
		if held, err := netip.ParsePrefix(c); err == nil && held.Overlaps(cidr) {
			return held, true
		}
	}
	return netip.Prefix{}, false
}

// heldEntry is hostname's entry e brought to what its node holds: nil
// when no node of e's reservation exists or it holds no pod CIDR.
func (s *Store) heldEntry(ctx context.Context, hostname string, e tableEntry) (*tableEntry, error) {
	cur, err := s.getNode(ctx, hostname)
	switch {
	case errors.Is(err, joinkeys.ErrNodeNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case cur.Spec.Reservation != e.Reservation || cur.Spec.PodCIDR == "":
		return nil, nil
	}
	return &tableEntry{CIDR: cur.Spec.PodCIDR, Reservation: e.Reservation, Since: s.now().UTC()}, nil
}

var errUnchanged = errors.New("unchanged")

// settlePodCIDR ends a pending entry after the node's write: written, the
// pending CIDR becomes the entry's; not written, it is dropped and the one
// the node holds stays.
func (s *Store) settlePodCIDR(ctx context.Context, hostname, reservation, cidr string, written bool) error {
	err := s.changeTable(ctx, func(entries map[string]tableEntry) error {
		e, ok := entries[hostname]
		if !ok || e.Reservation != reservation || e.Next != cidr {
			return errUnchanged
		}
		if written {
			e.CIDR = cidr
		}
		e.Next, e.Since = "", s.now().UTC()
		if e.CIDR == "" {
			delete(entries, hostname)
		} else {
			entries[hostname] = e
		}
		return nil
	})
	if errors.Is(err, errUnchanged) {
		return nil
	}
	return err
}

// releasePodCIDR removes hostname's entry if reservation holds it.
func (s *Store) releasePodCIDR(ctx context.Context, hostname, reservation string) error {
	err := s.changeTable(ctx, func(entries map[string]tableEntry) error {
		if e, ok := entries[hostname]; !ok || e.Reservation != reservation {
			return errUnchanged
		}
		delete(entries, hostname)
		return nil
	})
	if errors.Is(err, errUnchanged) {
		return nil
	}
	return err
}

// ---- audit ----

// AppendAudit implements joinkeys.Store.
func (s *Store) AppendAudit(ctx context.Context, e joinkeys.AuditEvent) error {
	if err := s.check(); err != nil {
		return err
	}
	return s.appendAudit(ctx, e)
}

func labelValue(v string) bool { return v != "" && len(validation.IsValidLabelValue(v)) == 0 }

func (s *Store) appendAudit(ctx context.Context, e joinkeys.AuditEvent) error {
	labels := map[string]string{}
	for k, v := range map[string]string{labelType: string(e.Type), labelHostname: e.Hostname, labelKey: e.KeyID} {
		if labelValue(v) {
			labels[k] = v
		}
	}
	_, err := s.events.create(ctx, s.events.new(eventName(s.eventTime(e.At)), labels, eventSpec{At: e.At, Type: e.Type, KeyID: e.KeyID, Hostname: e.Hostname, Actor: e.Actor, Reason: e.Reason}))
	return err
}

// eventTime is the time an event's name carries: at, or just after the
// last this Store named when that is later (a clock that did not move, or
// moved back), so that this Store's names sort in the order it wrote them.
func (s *Store) eventTime(at time.Time) int64 {
	for {
		last := s.lastEvent.Load()
		next := max(at.UnixNano(), last+1)
		if s.lastEvent.CompareAndSwap(last, next) {
			return next
		}
	}
}

// eventName names an event made at at (nanoseconds) so that names sort
// newest first (the time counted down from the largest 63-bit nanosecond
// count), then at random: the API server lists in name order, so the
// newest events are read without reading the others. Events named before
// this scheme (ev-<random hex>) sort after every such name (ea- < ev-).
// Several replicas name events by their own clocks: skew between them
// orders their events by those clocks.
func eventName(at int64) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return fmt.Sprintf("ea-%019d-%s", math.MaxInt64-at, hex.EncodeToString(b))
}

// timeSorted reports whether an event's name is eventName's (ea-, 19
// digits, -, 6 hex), not the random one events had before.
func timeSorted(name string) bool {
	if len(name) != 3+19+1+6 || name[:3] != "ea-" || name[22] != '-' {
		return false
	}
	for _, c := range name[3:22] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Audit implements joinkeys.Store. An event's ID is the resourceVersion
// it was created at. The query's fields select on the API server where
// they are valid label values, and here otherwise; with a Limit, events
// are read newest first and no more pages than the limit needs.
func (s *Store) Audit(ctx context.Context, q joinkeys.AuditQuery) ([]joinkeys.AuditEvent, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	sel := map[string]string{}
	for k, v := range map[string]string{labelType: string(q.Type), labelHostname: q.Hostname, labelKey: q.KeyID} {
		if labelValue(v) {
			sel[k] = v
		}
	}
	size := listPageSize
	if q.Limit > 0 {
		size = min(q.Limit, listPageSize)
	}
	var out []joinkeys.AuditEvent
	var decodeErr error
	sorted := 0 // events read under time-sorted names
	err := s.events.eachPaged(ctx, selector(sel), size, func(o object[eventSpec]) bool {
		sp := o.Spec
		if (q.Type != "" && sp.Type != q.Type) || (q.Hostname != "" && sp.Hostname != q.Hostname) || (q.KeyID != "" && sp.KeyID != q.KeyID) {
			return true
		}
		e, err := auditEvent(o)
		if err != nil {
			decodeErr = err
			return false
		}
		out = append(out, e)
		// Once the limit's newest are read under time-sorted names, the
		// rest are older: those names sort newest first, and an event named
		// before that scheme is older than all of them.
		if timeSorted(o.Metadata.Name) {
			sorted++
		}
		return q.Limit <= 0 || sorted < q.Limit
	})
	if err := cmp.Or(err, decodeErr); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b joinkeys.AuditEvent) int { return cmp.Compare(a.ID, b.ID) })
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[len(out)-q.Limit:]
	}
	return out, nil
}

func auditEvent(o object[eventSpec]) (joinkeys.AuditEvent, error) {
	id, err := o.Metadata.revision()
	if err != nil {
		return joinkeys.AuditEvent{}, err
	}
	sp := o.Spec
	return joinkeys.AuditEvent{ID: id, At: sp.At, Type: sp.Type, KeyID: sp.KeyID, Hostname: sp.Hostname, Actor: sp.Actor, Reason: sp.Reason}, nil
}

// PruneAudit implements joinkeys.Store: it reads the trail (bounded by
// the retention it keeps) and deletes each event it does not keep.
func (s *Store) PruneAudit(ctx context.Context, r joinkeys.AuditRetention, now time.Time) (int, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	type named struct {
		joinkeys.AuditEvent
		name, uid string
	}
	var all []named
	var decodeErr error
	err := s.events.each(ctx, "", func(o object[eventSpec]) bool {
		e, err := auditEvent(o)
		if err != nil {
			decodeErr = err
			return false
		}
		all = append(all, named{e, o.Metadata.Name, o.Metadata.UID})
		return true
	})
	if err := cmp.Or(err, decodeErr); err != nil {
		return 0, err
	}
	slices.SortFunc(all, func(a, b named) int { return cmp.Compare(a.ID, b.ID) })
	trail := make([]joinkeys.AuditEvent, len(all))
	for i, n := range all {
		trail[i] = n.AuditEvent
	}
	kept := map[int64]bool{}
	for _, e := range joinkeys.Retained(trail, r, now) {
		kept[e.ID] = true
	}
	removed := 0
	for _, n := range all { // oldest first
		if kept[n.ID] {
			continue
		}
		if removed == maxPrunedPerCall {
			break // the rest at the next call: a backlog never stalls the caller
		}
		if err := s.events.remove(ctx, n.name, n.uid, ""); err != nil && !apierrors.IsNotFound(err) {
			return removed, err
		}
		removed++
	}
	return removed, nil
}

// maxPrunedPerCall bounds the events one PruneAudit deletes (a request
// each).
const maxPrunedPerCall = 1000
