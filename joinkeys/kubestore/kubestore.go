package kubestore

import (
	"cmp"
	"context"
	"encoding/base32"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"

	"gridweave.dev/internal/groupcommit"
	"gridweave.dev/internal/keyedlock"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/addrpool"
	"gridweave.dev/mesh/wgkey"
)

// Options configure a Store. A nil *Options means defaults.
type Options struct {
	// Writer names this Store on every object it creates or updates
	// (WriterAnnotation): the identity of the replica whose writes it
	// makes, which the fence (FencePolicy) checks against the Lease's
	// holder. Empty: unsigned, which a fenced ledger refuses while a
	// replica holds the Lease (its deletes are plain deletes, unmarked,
	// which the fence lets through).
	Writer string
}

// Store is a joinkeys.Store on the Kubernetes API, in one namespace. One
// Store writes a namespace's ledger (with several replicas, the leader's,
// held to it by the fence); any number read it.
type Store struct {
	namespace string
	writer    string
	keys      resource[keySpec]
	nodes     resource[nodeSpec]
	claims    resource[claimSpec]
	events    resource[eventSpec]
	tables    resource[tableSpec]
	closed    atomic.Bool
	// lastEvent is the time the last event name carried (eventTime);
	// audit batches the audit events, spends the uses of each key.
	lastEvent atomic.Int64
	audit     groupcommit.Batcher[struct{}, joinkeys.AuditEvent, error]
	spends    groupcommit.Batcher[string, time.Time, spent]

	// writes queues this Store's writes of one key or one node; keyCache
	// holds keys as last written.
	writes   keyedlock.Locks
	cacheMu  sync.Mutex
	keyCache map[string]object[keySpec]

	// loadMu serialises loading the index; mu guards ix, nil until this
	// Store first writes: then it holds the whole ledger, which only it
	// writes, and reads are answered from it.
	loadMu sync.Mutex
	mu     sync.Mutex
	ix     *ledgerIndex
	// inflight counts the writes under way; stopped refuses new ones
	// (StopWriting) until the next Reload; idle is closed when inflight
	// falls to zero while StopWriting waits.
	inflight int
	stopped  bool
	idle     chan struct{}
}

// writeTimeout bounds one write's calls that the caller cannot cancel (a
// create whose outcome must be known, the undo of a failed reservation).
const writeTimeout = 30 * time.Second

// beginWrite counts a write under way; end ends it. A closed Store
// refuses it, and so does one that stopped writing (joinkeys.ErrFenced:
// another replica writes now).
func (s *Store) beginWrite() (end func(), err error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil, errStopped
	}
	s.inflight++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.inflight--
		if s.inflight == 0 && s.idle != nil {
			close(s.idle)
			s.idle = nil
		}
	}, nil
}

// StopWriting refuses every new write, drops the index and waits, until
// ctx ends, for the writes under way to end: a leader that hands over
// calls it before it gives up the Lease, so that none of its writes lands
// after the next writer read the ledger. Reload starts writing again.
func (s *Store) StopWriting(ctx context.Context) error {
	s.mu.Lock()
	s.stopped, s.ix = true, nil
	if s.inflight == 0 {
		s.mu.Unlock()
		return nil
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	idle := s.idle
	s.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("kubestore: writes still under way: %w", ctx.Err())
	}
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
	s := &Store{
		namespace: namespace,
		writer:    o.Writer,
		keys:      resource[keySpec]{client, namespace, resourceKeys, "JoinKey", o.Writer},
		nodes:     resource[nodeSpec]{client, namespace, resourceNodes, "LedgerNode", o.Writer},
		claims:    resource[claimSpec]{client, namespace, resourceClaims, "LedgerClaim", o.Writer},
		events:    resource[eventSpec]{client, namespace, resourceEvents, "LedgerEvent", o.Writer},
		tables:    resource[tableSpec]{client, namespace, resourceTables, "PodCIDRTable", o.Writer},
		keyCache:  map[string]object[keySpec]{},
	}
	s.audit = groupcommit.Batcher[struct{}, joinkeys.AuditEvent, error]{Write: s.writeAudit, MaxBatch: maxEventsPerBatch}
	s.spends = groupcommit.Batcher[string, time.Time, spent]{Write: s.writeSpends, MaxBatch: maxSpendsPerWrite}
	return s, nil
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

// ---- the index ----

// ledgerIndex is the whole ledger as its one writer holds it: the
// uniqueness of hostnames, public keys and VPN addresses and the overlap
// of pod CIDRs are decided here, before any object is written. A
// reservation in flight holds its hostname, key, address and pod CIDR
// (pending) until its node is created or it gives them back.
type ledgerIndex struct {
	nodes   map[string]object[nodeSpec] // by hostname
	pending map[string]bool             // hostnames of reservations in flight
	byKey   map[wgkey.Key]string
	byIP    map[uint32]string
	// pods holds each node's pod CIDR; next a CIDR a node is being given,
	// held beside its own until the write ends.
	pods map[string]netip.Prefix
	next map[string]netip.Prefix
	// resting are released addresses, quarantined until a reservation's
	// ReleasedBefore is past their release (their LedgerClaim records
	// it); lowest is per range the lowest address that may be free.
	resting map[uint32]object[claimSpec]
	lowest  map[string]uint32
	keys    map[string]object[keySpec]
	// unsureKeys and unsureNodes name the keys and nodes a write of this
	// Store may have changed without the index knowing (its answer was
	// lost, and reading it back failed): their reads go to the API
	// server until one succeeds, so a revocation or a node token
	// replaced counts although its answer did not come.
	unsureKeys  map[string]bool
	unsureNodes map[string]bool
	// restIfGone holds, by hostname, the rest of the address of a node
	// whose delete's outcome is not known: should the node turn out gone,
	// its address rests as after any release.
	restIfGone map[string]object[claimSpec]
}

// loaded returns the index if this Store has loaded it.
func (s *Store) loaded() *ledgerIndex {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ix
}

// index returns the index, loading it first: the Store is about to write.
func (s *Store) index(ctx context.Context) (*ledgerIndex, error) {
	if ix := s.loaded(); ix != nil {
		return ix, nil
	}
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	if ix := s.loaded(); ix != nil {
		return ix, nil
	}
	// A Store that stopped writing does not load again (a write under way
	// as it stopped would): until Reload, it reads the API server.
	if s.stoppedWriting() {
		return nil, errStopped
	}
	ix, err := s.load(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return nil, errStopped
	}
	s.ix = ix
	return ix, nil
}

// errStopped refuses a write of a Store that stopped writing.
var errStopped = fmt.Errorf("%w (this Store stopped writing)", joinkeys.ErrFenced)

func (s *Store) stoppedWriting() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped
}

// Reload drops the index and loads it again from the API server, and
// lets a Store that stopped writing write again: a replica that takes
// over the writes (after another wrote) calls it. AwaitWrites does.
func (s *Store) Reload(ctx context.Context) error {
	s.loadMu.Lock()
	s.mu.Lock()
	s.ix, s.stopped = nil, false
	s.mu.Unlock()
	s.loadMu.Unlock()
	_, err := s.index(ctx)
	return err
}

// load reads the ledger. It also brings a ledger written before the one
// writer up to date: the claims of live nodes' addresses and public keys
// and the pod CIDR table are removed (the index holds what they did), and
// nodes are labelled with their public keys (readers find a node by its
// key with one list).
func (s *Store) load(ctx context.Context) (*ledgerIndex, error) {
	ix := &ledgerIndex{nodes: map[string]object[nodeSpec]{}, pending: map[string]bool{}, byKey: map[wgkey.Key]string{},
		byIP: map[uint32]string{}, pods: map[string]netip.Prefix{}, next: map[string]netip.Prefix{},
		resting: map[uint32]object[claimSpec]{}, lowest: map[string]uint32{}, keys: map[string]object[keySpec]{}}
	var unlabelled []object[nodeSpec]
	var decodeErr error
	if err := s.nodes.each(ctx, "", func(o object[nodeSpec]) bool {
		n, err := nodeRecord(o)
		if err != nil {
			decodeErr = err
			return false
		}
		if err := ix.indexNode(o); err != nil {
			decodeErr = err
			return false
		}
		if unmarked, wasMarked := withoutOthersMark(o, s.writer); wasMarked || o.Metadata.Labels[labelPublicKey] != publicKeyLabel(n.PublicKey) {
			unlabelled = append(unlabelled, unmarked)
		}
		return true
	}); err != nil {
		return nil, err
	}
	if decodeErr != nil {
		return nil, decodeErr
	}
	for _, o := range unlabelled {
		written, err := s.writeNode(ctx, o)
		if err == nil {
			if err := s.keepDropped(ctx, o.Spec.Events, written); err != nil {
				return nil, err
			}
		}
		switch {
		case apierrors.IsNotFound(err):
			// Deleted since the list (an administrator): not in the ledger.
			ix.unindexNode(ix.nodes[o.Metadata.Name])
			continue
		case apierrors.IsConflict(err):
			// Written since the list: the next load labels or clears it.
			if written, err = s.nodes.get(ctx, o.Metadata.Name); err == nil {
				err = ix.indexNode(written)
			} else if apierrors.IsNotFound(err) {
				ix.unindexNode(ix.nodes[o.Metadata.Name])
				continue
			}
		}
		if err != nil {
			return nil, fmt.Errorf("kubestore: labelling node %s with its public key, or clearing a deletion's mark: %w", o.Metadata.Name, err)
		}
		ix.nodes[o.Metadata.Name] = written
	}
	var claims []object[claimSpec]
	if err := s.claims.each(ctx, "", func(c object[claimSpec]) bool { claims = append(claims, c); return true }); err != nil {
		return nil, err
	}
	for _, c := range claims {
		addr, isAddress := claimedAddress(c)
		if isAddress && c.Spec.ReleasedAt != nil {
			if _, held := ix.byIP[addrpool.ToUint32(addr)]; !held {
				if unmarked, wasMarked := withoutOthersMark(c, s.writer); wasMarked {
					written, err := s.claims.update(ctx, unmarked)
					switch {
					case apierrors.IsNotFound(err):
						continue // taken away since the list: no longer resting
					case apierrors.IsConflict(err):
						// Written since the list: kept as read; the next
						// load clears its mark.
					case err != nil:
						return nil, fmt.Errorf("kubestore: clearing a deletion's mark on the claim %s: %w", c.Metadata.Name, err)
					default:
						c = written
					}
				}
				ix.resting[addrpool.ToUint32(addr)] = c
				continue
			}
		}
		// A live node's claim (the index holds it now), or a resting
		// address a node holds again.
		if _, err := s.claims.removeSigned(ctx, c); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("kubestore: removing the claim %s: %w", c.Metadata.Name, err)
		}
	}
	if err := s.tables.remove(ctx, tableName, "", ""); err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("kubestore: removing the pod CIDR table: %w", err)
	}
	if err := s.keys.each(ctx, "", func(o object[keySpec]) bool { ix.keys[o.Metadata.Name] = o; return true }); err != nil {
		return nil, err
	}
	return ix, nil
}

// withoutOthersMark is o without the mark of a deletion
// (DeletingAnnotation) a writer other than writer left, and whether it had one. A
// mark outlives a delete that failed after it (refused by the fence, cut
// off): the next writer clears it as it loads, so that the mark of a
// writer that no longer leads does not keep the fence refusing others'
// deletes of the object. This writer's own mark stays: its delete may be
// under way, and the fence lets others delete what the holder marked.
func withoutOthersMark[S any](o object[S], writer string) (object[S], bool) {
	by, ok := o.Metadata.Annotations[DeletingAnnotation]
	if !ok || by == writer {
		return o, false
	}
	o.Metadata.Annotations = maps.Clone(o.Metadata.Annotations)
	delete(o.Metadata.Annotations, DeletingAnnotation)
	return o, true
}

// indexNode enters o in the index: its hostname, public key, address and
// pod CIDR (s.mu held, or ix not yet shared).
func (ix *ledgerIndex) indexNode(o object[nodeSpec]) error {
	n, err := nodeRecord(o)
	if err != nil {
		return err
	}
	if old, ok := ix.nodes[n.Hostname]; ok {
		ix.unindexNode(old)
	}
	ix.nodes[n.Hostname] = o
	ix.byKey[n.PublicKey] = n.Hostname
	ix.byIP[addrpool.ToUint32(n.VPNIP)] = n.Hostname
	if n.PodCIDR.IsValid() {
		ix.pods[n.Hostname] = n.PodCIDR
	} else {
		delete(ix.pods, n.Hostname)
	}
	return nil
}

// unindexNode takes o out of the index (s.mu held).
func (ix *ledgerIndex) unindexNode(o object[nodeSpec]) {
	hostname := o.Metadata.Name
	delete(ix.nodes, hostname)
	delete(ix.pods, hostname)
	if pub, err := wgkey.Parse(o.Spec.PublicKey); err == nil && ix.byKey[pub] == hostname {
		delete(ix.byKey, pub)
	}
	if ip, err := netip.ParseAddr(o.Spec.VPNIP); err == nil && ix.byIP[addrpool.ToUint32(ip)] == hostname {
		delete(ix.byIP, addrpool.ToUint32(ip))
	}
}

// tableName names the PodCIDRTable a ledger written before the one writer
// kept its pod CIDRs in; loading the index removes it.
const tableName = "pod-cidrs"

// claimedAddress is the address of an address's claim (ip.<address>).
func claimedAddress(c object[claimSpec]) (netip.Addr, bool) {
	rest, ok := strings.CutPrefix(c.Metadata.Name, "ip.")
	if !ok {
		return netip.Addr{}, false
	}
	addr, err := netip.ParseAddr(rest)
	return addr, err == nil
}

func addressClaim(ip netip.Addr) string { return "ip." + ip.String() }

// publicKeyLabel is a public key as a label value: base32, lower case,
// without padding (52 characters).
func publicKeyLabel(key wgkey.Key) string {
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(key[:]))
}

// writeNode updates o, labelled with its public key.
func (s *Store) writeNode(ctx context.Context, o object[nodeSpec]) (object[nodeSpec], error) {
	return s.nodes.update(ctx, withKeyLabel(o))
}

func withKeyLabel(o object[nodeSpec]) object[nodeSpec] {
	labels := make(map[string]string, len(o.Metadata.Labels)+1)
	for k, v := range o.Metadata.Labels {
		labels[k] = v
	}
	if pub, err := wgkey.Parse(o.Spec.PublicKey); err == nil {
		labels[labelPublicKey] = publicKeyLabel(pub)
	}
	o.Metadata.Labels = labels
	return o
}

// ---- keys ----

// InsertKey implements joinkeys.Store.
func (s *Store) InsertKey(ctx context.Context, key joinkeys.KeyRecord) error {
	end, err := s.beginWrite()
	if err != nil {
		return err
	}
	defer end()
	if !validName(key.ID) {
		return fmt.Errorf("kubestore: key id %q cannot name an object", key.ID)
	}
	ix, err := s.index(ctx)
	if err != nil {
		return err
	}
	spec := keySpec{
		Kind: key.Kind, Org: key.Org, Provider: key.Provider, Labels: key.Labels,
		CreatedBy: key.CreatedBy, CreatedAt: key.CreatedAt, ExpiresAt: key.ExpiresAt,
		MaxUses: key.MaxUses, Uses: key.Uses, RevokedAt: key.RevokedAt, LastUsed: key.LastUsed,
		SecretHash: key.SecretHash, InsertedAt: time.Now().UTC(),
	}
	created, err := s.keys.create(ctx, s.keys.new(key.ID, nil, spec))
	if apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubestore: key %s already exists", key.ID)
	}
	if err != nil {
		return err
	}
	s.mu.Lock()
	ix.keys[key.ID] = created
	s.mu.Unlock()
	return nil
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

// Key implements joinkeys.Store: the writer's from its index, a reader's
// from the API server (always fresh: a revocation counts at once).
func (s *Store) Key(ctx context.Context, id string) (joinkeys.KeyRecord, error) {
	if err := s.check(); err != nil {
		return joinkeys.KeyRecord{}, err
	}
	if ix := s.loaded(); ix != nil {
		s.mu.Lock()
		o, ok := ix.keys[id]
		unsure := ix.unsureKeys[id]
		s.mu.Unlock()
		switch {
		case unsure:
			return s.readUnsureKey(ctx, ix, id)
		case !ok:
			return joinkeys.KeyRecord{}, joinkeys.ErrKeyNotFound
		}
		return keyRecord(o), nil
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
	if ix := s.loaded(); ix != nil {
		s.settleUnsure(ctx, ix, unsureKeys, "key/", func(ctx context.Context, id string) { _, _ = s.settleKey(ctx, ix, id) })
		s.mu.Lock()
		for _, o := range ix.keys {
			objs = append(objs, o)
		}
		s.mu.Unlock()
	} else if err := s.keys.each(ctx, "", func(o object[keySpec]) bool { objs = append(objs, o); return true }); err != nil {
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

// changeKey applies change to the key and writes it back under its
// resourceVersion, from a fresh read when another write got in between.
// Writes of one key queue on a lock and start from the object the last
// one wrote, so a hot key costs one call per spend.
func (s *Store) changeKey(ctx context.Context, id string, change func(*keySpec) error) (object[keySpec], error) {
	ix, err := s.index(ctx)
	switch {
	case errors.Is(err, errStopped):
		// A write under way as this Store stopped writing (a use spent,
		// or given back, for a reservation in flight) ends without the
		// index, which is gone.
		ix = nil
	case err != nil:
		return object[keySpec]{}, err
	}
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
			if ix != nil && !refusedUnwritten(err) {
				// Perhaps written: the index reads it again.
				_, _ = s.settleKey(context.WithoutCancel(ctx), ix, id)
			}
			return written, err
		}
		s.cacheKey(id, &written)
		if ix != nil {
			s.mu.Lock()
			ix.keys[id] = written
			delete(ix.unsureKeys, id)
			s.mu.Unlock()
		}
		return written, nil
	}
}

// readUnsureKey reads an unsure key (ledgerIndex.unsureKeys) from the
// API server, under the key's write lock, so that a write of the key
// meanwhile is not undone by an older read; a write that settled it first
// is what the index says.
func (s *Store) readUnsureKey(ctx context.Context, ix *ledgerIndex, id string) (joinkeys.KeyRecord, error) {
	unlock, err := s.writes.Lock(ctx, "key/"+id)
	if err != nil {
		return joinkeys.KeyRecord{}, err
	}
	defer unlock()
	s.mu.Lock()
	o, ok := ix.keys[id]
	unsure := ix.unsureKeys[id]
	s.mu.Unlock()
	if unsure {
		if o, err = s.settleKey(ctx, ix, id); err != nil {
			return joinkeys.KeyRecord{}, err
		}
	} else if !ok {
		return joinkeys.KeyRecord{}, joinkeys.ErrKeyNotFound
	}
	return keyRecord(o), nil
}

// settleKey reads key id from the API server into the index, within
// writeTimeout: the key a write may have changed unseen. While it cannot
// be read, the key is unsure (ledgerIndex.unsureKeys) and its error is
// returned.
func (s *Store) settleKey(ctx context.Context, ix *ledgerIndex, id string) (object[keySpec], error) {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	o, err := s.getKey(ctx, id)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err == nil:
		ix.keys[id] = o
	case errors.Is(err, joinkeys.ErrKeyNotFound):
		delete(ix.keys, id)
	default:
		if ix.unsureKeys == nil {
			ix.unsureKeys = map[string]bool{}
		}
		ix.unsureKeys[id] = true
		return o, err
	}
	delete(ix.unsureKeys, id)
	return o, err
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
	end, err := s.beginWrite()
	if err != nil {
		return joinkeys.KeyRecord{}, err
	}
	defer end()
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

// ReturnKeyUse implements joinkeys.Store.
func (s *Store) ReturnKeyUse(ctx context.Context, id string) (joinkeys.KeyRecord, error) {
	end, err := s.beginWrite()
	if err != nil {
		return joinkeys.KeyRecord{}, err
	}
	defer end()
	o, err := s.changeKey(ctx, id, func(k *keySpec) error {
		if k.Uses > 0 {
			k.Uses--
		}
		return nil
	})
	if err != nil {
		return joinkeys.KeyRecord{}, err
	}
	return keyRecord(o), nil
}

// spendKey spends one use of key id at now, in a write it may share with
// the other spends of that key under way (one compare-and-swap of the
// JoinKey for all of them); undo gives the use back.
func (s *Store) spendKey(_ context.Context, id string, now time.Time) (undo func() error, err error) {
	defer func() {
		// A panic of the shared write is this spend's error: the
		// reservation gives back what it holds.
		if p := recover(); p != nil {
			undo, err = nil, fmt.Errorf("kubestore: spending a use of key %s: %v", id, p)
		}
	}()
	r := s.spends.Do(id, now)
	return r.undo, r.err
}

// spent is one spend's outcome.
type spent struct {
	undo func() error
	err  error
}

// errNoneSpent is writeSpends' change when the key allows none of its
// spends: nothing is written.
var errNoneSpent = errors.New("kubestore: no use spent")

// maxSpendsPerWrite bounds the uses one write of a key spends.
const maxSpendsPerWrite = 256

// writeSpends spends the uses of key id at each of times, in order, in one
// write: each spend the key allows (not expired, revoked or used up by
// the spends before it) is counted, each other refused with its reason;
// when none is allowed nothing is written.
func (s *Store) writeSpends(id string, times []time.Time) []spent {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	out := make([]spent, len(times))
	before := make([]time.Time, len(times)) // LastUsed before each spend
	_, err := s.changeKey(ctx, id, func(k *keySpec) error {
		counted := 0
		for i, now := range times {
			rec := keyRecord(object[keySpec]{Spec: *k})
			if err := rec.UsableAt(now); err != nil {
				out[i] = spent{err: fmt.Errorf("key %s: %w", id, err)}
				continue
			}
			out[i] = spent{}
			before[i] = k.LastUsed
			k.Uses++
			k.LastUsed = now
			counted++
		}
		if counted == 0 {
			return errNoneSpent
		}
		return nil
	})
	for i, now := range times {
		switch {
		case errors.Is(err, errNoneSpent):
			// Each was refused, with its reason.
		case err != nil:
			out[i] = spent{err: err}
		case out[i].err == nil:
			out[i].undo = func() error { return s.giveBackUse(id, now, before[i]) }
		}
	}
	return out
}

// giveBackUse gives back a use spent at now, when the reservation it was
// spent for failed; before is the key's LastUsed before that spend.
func (s *Store) giveBackUse(id string, now, before time.Time) error {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	_, err := s.changeKey(ctx, id, func(k *keySpec) error {
		if k.Uses > 0 {
			k.Uses--
		}
		if k.LastUsed.Equal(now) {
			k.LastUsed = before
		}
		return nil
	})
	return err
}

// useKept is the error of a reservation that wrote no node, err, once
// its key's use was to be given back (undoErr: how that went). When the
// use stays spent, an error that says nothing was written (ErrFenced:
// another replica took the lead) would be untrue, and err no longer is
// one.
func useKept(err, undoErr error) error {
	if undoErr == nil || !errors.Is(err, joinkeys.ErrFenced) {
		return err
	}
	return fmt.Errorf("kubestore: the node was not reserved, but its key's use stays spent (giving it back: %v): %v", undoErr, err)
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
		return o, joinkeys.ErrNodeNotFound
	}
	return o, err
}

// Node implements joinkeys.Store: the writer's from its index, a
// reader's from the API server.
func (s *Store) Node(ctx context.Context, hostname string) (joinkeys.NodeRecord, error) {
	if err := s.check(); err != nil {
		return joinkeys.NodeRecord{}, err
	}
	if ix := s.loaded(); ix != nil {
		s.mu.Lock()
		o, ok := ix.nodes[hostname]
		unsure := ix.unsureNodes[hostname]
		s.mu.Unlock()
		switch {
		case unsure:
			return s.readUnsureNode(ctx, ix, hostname)
		case !ok:
			return joinkeys.NodeRecord{}, joinkeys.ErrNodeNotFound
		}
		return nodeRecord(o)
	}
	o, err := s.getNode(ctx, hostname)
	if err != nil {
		return joinkeys.NodeRecord{}, err
	}
	return nodeRecord(o)
}

// readUnsureNode reads an unsure node (ledgerIndex.unsureNodes) from the
// API server, under the node's write lock, so that a write of the node
// meanwhile is not undone by an older read; a write that settled it first
// is what the index says.
func (s *Store) readUnsureNode(ctx context.Context, ix *ledgerIndex, hostname string) (joinkeys.NodeRecord, error) {
	unlock, err := s.writes.Lock(ctx, "node/"+hostname)
	if err != nil {
		return joinkeys.NodeRecord{}, err
	}
	defer unlock()
	s.mu.Lock()
	o, ok := ix.nodes[hostname]
	unsure := ix.unsureNodes[hostname]
	s.mu.Unlock()
	if unsure {
		if _, err := s.refreshNode(ctx, ix, hostname); err != nil {
			return joinkeys.NodeRecord{}, err
		}
		s.mu.Lock()
		o, ok = ix.nodes[hostname]
		s.mu.Unlock()
	}
	if !ok {
		return joinkeys.NodeRecord{}, joinkeys.ErrNodeNotFound
	}
	return nodeRecord(o)
}

// settleUnsure reads the unsure entries of the index that unsure picks
// (ledgerIndex.unsureKeys or unsureNodes: what writes of unknown outcome
// may have changed; lockPrefix is their write locks' prefix) from the API
// server with settle, so that a listing answers what landed. A listing
// is fresh at best: an entry whose write is under way (that write settles
// it) or that cannot be read is listed as the index holds it, and no
// listing waits on a write or fails for it.
func (s *Store) settleUnsure(ctx context.Context, ix *ledgerIndex, unsure func(*ledgerIndex) map[string]bool, lockPrefix string, settle func(ctx context.Context, name string)) {
	s.mu.Lock()
	names := slices.Collect(maps.Keys(unsure(ix)))
	s.mu.Unlock()
	if len(names) == 0 {
		return // the listing's usual case: nothing to read
	}
	ctx, cancel := context.WithTimeout(ctx, listingSettleTimeout)
	defer cancel()
	for _, name := range names {
		unlock, free := s.writes.TryLock(lockPrefix + name)
		if !free {
			continue
		}
		s.mu.Lock()
		still := unsure(ix)[name]
		s.mu.Unlock()
		if still {
			settle(ctx, name)
		}
		unlock()
	}
}

// listingSettleTimeout bounds the reads a listing makes of the unsure
// keys, or nodes, of the index.
const listingSettleTimeout = 2 * time.Second

func unsureKeys(ix *ledgerIndex) map[string]bool  { return ix.unsureKeys }
func unsureNodes(ix *ledgerIndex) map[string]bool { return ix.unsureNodes }

// NodeByPublicKey implements joinkeys.Store: a reader lists the nodes
// labelled with the key, from the API server's watch cache.
func (s *Store) NodeByPublicKey(ctx context.Context, key wgkey.Key) (joinkeys.NodeRecord, error) {
	if err := s.check(); err != nil {
		return joinkeys.NodeRecord{}, err
	}
	if ix := s.loaded(); ix != nil {
		s.mu.Lock()
		hostname := ix.byKey[key]
		o, ok := ix.nodes[hostname]
		unsure := ok && ix.unsureNodes[hostname]
		s.mu.Unlock()
		switch {
		case unsure:
			// Read as by its name (a node keeps its public key): what
			// a write of unknown outcome landed, a release included.
			n, err := s.readUnsureNode(ctx, ix, hostname)
			if err == nil && n.PublicKey != key {
				return joinkeys.NodeRecord{}, joinkeys.ErrNodeNotFound
			}
			return n, err
		case !ok:
			return joinkeys.NodeRecord{}, joinkeys.ErrNodeNotFound
		}
		return nodeRecord(o)
	}
	// From the API server's watch cache: a node that joined a moment ago
	// may be missing, and the reservation that follows is then refused by
	// the writer, whose index is whole (ErrPublicKeyTaken).
	objs, err := s.nodes.cached(ctx, selector(map[string]string{labelPublicKey: publicKeyLabel(key)}))
	if err != nil {
		return joinkeys.NodeRecord{}, err
	}
	var found *joinkeys.NodeRecord
	for _, o := range objs {
		n, err := nodeRecord(o)
		if err != nil {
			return joinkeys.NodeRecord{}, err
		}
		if n.PublicKey == key {
			found = &n
			break
		}
	}
	if found == nil {
		return joinkeys.NodeRecord{}, joinkeys.ErrNodeNotFound
	}
	return *found, nil
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

// visitNodes calls visit for every node in hostname order until it
// returns false: the writer's from its index.
func (s *Store) visitNodes(ctx context.Context, visit func(joinkeys.NodeRecord) bool) error {
	ix := s.loaded()
	if ix == nil {
		return s.eachNode(ctx, visit)
	}
	s.settleUnsure(ctx, ix, unsureNodes, "node/", func(ctx context.Context, hostname string) { _, _ = s.refreshNode(ctx, ix, hostname) })
	s.mu.Lock()
	objs := make([]object[nodeSpec], 0, len(ix.nodes))
	for _, o := range ix.nodes {
		objs = append(objs, o)
	}
	s.mu.Unlock()
	slices.SortFunc(objs, func(a, b object[nodeSpec]) int { return cmp.Compare(a.Metadata.Name, b.Metadata.Name) })
	for _, o := range objs {
		n, err := nodeRecord(o)
		if err != nil {
			return err
		}
		if !visit(n) {
			return nil
		}
	}
	return nil
}

// Nodes implements joinkeys.Store.
func (s *Store) Nodes(ctx context.Context) ([]joinkeys.NodeRecord, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var out []joinkeys.NodeRecord
	err := s.visitNodes(ctx, func(n joinkeys.NodeRecord) bool { out = append(out, n); return true })
	slices.SortFunc(out, func(a, b joinkeys.NodeRecord) int { return cmp.Compare(a.Hostname, b.Hostname) })
	return out, err
}

// NodesAfter implements joinkeys.Store. A reader lists from the API
// server, which lists in name order but cannot start a list at a name:
// the pages before after are read and skipped.
func (s *Store) NodesAfter(ctx context.Context, after string, limit int) ([]joinkeys.NodeRecord, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var out []joinkeys.NodeRecord
	if limit <= 0 {
		return out, nil
	}
	err := s.visitNodes(ctx, func(n joinkeys.NodeRecord) bool {
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
	err := s.visitNodes(ctx, func(n joinkeys.NodeRecord) bool {
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

// overlappingPod returns a pod CIDR held (or being given) to a node other
// than hostname that overlaps cidr (ix held under s.mu).
func (ix *ledgerIndex) overlappingPod(hostname string, cidr netip.Prefix) (string, netip.Prefix, bool) {
	for _, held := range []map[string]netip.Prefix{ix.pods, ix.next} {
		for h, p := range held {
			if h != hostname && p.Overlaps(cidr) {
				return h, p, true
			}
		}
	}
	return "", netip.Prefix{}, false
}

// ReserveNode implements joinkeys.Store. The index decides: the hostname,
// the public key and the pod CIDR must be free, and it picks the address;
// they are held for the reservation while the key's use is spent (a
// compare-and-swap of the JoinKey) and the node is created, which commits
// it. On an error before the commit both are given back; nothing else was
// written. A creation whose outcome is unknown keeps them while settle
// finds out.
func (s *Store) ReserveNode(ctx context.Context, r joinkeys.Reservation) (joinkeys.NodeRecord, error) {
	end, err := s.beginWrite()
	if err != nil {
		return joinkeys.NodeRecord{}, err
	}
	defer end()
	n := r.Node
	if !validName(n.Hostname) {
		return joinkeys.NodeRecord{}, fmt.Errorf("kubestore: hostname %q cannot name an object", n.Hostname)
	}
	ix, err := s.index(ctx)
	if err != nil {
		return joinkeys.NodeRecord{}, err
	}
	// Reservations of one hostname, or of one public key, queue: the one
	// refused names the node that won.
	for _, name := range []string{"node/" + n.Hostname, "public-key/" + n.PublicKey.String()} {
		unlock, err := s.writes.Lock(ctx, name)
		if err != nil {
			return joinkeys.NodeRecord{}, err
		}
		defer unlock()
	}
	addr, resting, err := s.hold(ix, r)
	if err != nil {
		return joinkeys.NodeRecord{}, err
	}
	giveBack := func() { s.release(ix, n, addr, resting) }
	undoSpend := func() error { return nil }
	if r.SpendKeyID != "" {
		undo, err := s.spendKey(ctx, r.SpendKeyID, r.Now)
		if err != nil {
			giveBack()
			return joinkeys.NodeRecord{}, err
		}
		undoSpend = undo
	}
	// What follows runs to its end even when the caller goes away: a
	// create whose outcome is not known would leave the index unsure.
	// Its time starts once the use is spent (a busy key's spends queue).
	give, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	spec := nodeSpec{
		PublicKey: n.PublicKey.String(), VPNIP: addr.String(), Org: n.Org, JoinKeyID: n.JoinKeyID,
		Version: n.Version, GPUs: n.GPUs, PodCIDR: prefixString(n.PodCIDR), Status: n.Status,
		CreatedAt: n.CreatedAt, UpdatedAt: n.UpdatedAt, RegisteredAt: n.RegisteredAt, LastSeen: n.LastSeen,
		TokenHash: n.TokenHash, PoolID: r.Addresses.ID(),
	}
	if r.Event.Type != "" {
		spec.Events = []eventEntry{entryOf(r.Event)}
	}
	sent := time.Now()
	created, err := s.nodes.create(give, withKeyLabel(s.nodes.new(n.Hostname, nil, spec)))
	if err != nil {
		held, getErr := s.getNode(give, n.Hostname)
		switch {
		case getErr == nil && sameReservation(held, spec):
			// A create that timed out, or was retried, went through.
			created, err = held, nil
		case getErr == nil || refusedUnwritten(err):
			undoErr := undoSpend()
			giveBack()
			if getErr == nil && apierrors.IsAlreadyExists(err) {
				// Written by no Store of this index: take it in.
				s.mu.Lock()
				_ = ix.indexNode(held)
				s.mu.Unlock()
				return joinkeys.NodeRecord{}, hostnameTaken(held)
			}
			return joinkeys.NodeRecord{}, useKept(err, undoErr)
		default:
			// Unknown whether the create lands: what it holds stays held,
			// and its use spent, while reads find out.
			held, landed, settleErr := s.settle(n.Hostname, spec, sent)
			switch {
			case settleErr != nil:
				// Still unknown: held until the index is loaded again.
				return joinkeys.NodeRecord{}, fmt.Errorf("kubestore: creating node %s: %w; whether it landed is not known (reading it back: %v)", n.Hostname, err, settleErr)
			case !landed:
				undoErr := undoSpend()
				giveBack()
				if held.Metadata.UID != "" {
					// Another's node: take it in.
					s.mu.Lock()
					_ = ix.indexNode(held)
					s.mu.Unlock()
					return joinkeys.NodeRecord{}, hostnameTaken(held)
				}
				return joinkeys.NodeRecord{}, useKept(err, undoErr)
			}
			created, err = held, nil
			// What follows has its time anew.
			var cancelAfter context.CancelFunc
			give, cancelAfter = context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
			defer cancelAfter()
		}
	}
	s.committed(give, ix, created, resting)
	rec, err := nodeRecord(created)
	if err != nil {
		return joinkeys.NodeRecord{}, err
	}
	if r.Event.Type != "" && len(created.Spec.Events) == 0 {
		// A LedgerNode CRD of an earlier version dropped the event: the
		// trail holds it, as it did then.
		if err := s.appendAudit(give, r.Event); err != nil {
			return s.undoReservation(give, ix, created, rec, undoSpend, err)
		}
	}
	return rec, nil
}

// undoReservation removes the node a reservation created when its audit
// event could not be written (auditErr), and gives its use back, so that
// the error means nothing was written. When the removal fails too, the
// node stays reserved, as the error says, and the index holds it.
func (s *Store) undoReservation(ctx context.Context, ix *ledgerIndex, created object[nodeSpec], rec joinkeys.NodeRecord, undoSpend func() error, auditErr error) (joinkeys.NodeRecord, error) {
	marked, err := s.nodes.removeSigned(ctx, created)
	switch {
	case err == nil || apierrors.IsNotFound(err):
		s.mu.Lock()
		if ix.nodes[created.Metadata.Name].Metadata.UID == created.Metadata.UID {
			ix.unindexNode(created)
		}
		ix.freed(addrpool.ToUint32(rec.VPNIP))
		s.mu.Unlock()
		undoErr := undoSpend()
		return joinkeys.NodeRecord{}, useKept(fmt.Errorf("kubestore: node %s not reserved: its audit event was not written: %w", rec.Hostname, auditErr), undoErr)
	case marked.Metadata.UID != "":
		// Marked, not removed: the index holds the node as marked.
		s.mu.Lock()
		if ix.nodes[created.Metadata.Name].Metadata.ResourceVersion == created.Metadata.ResourceVersion {
			ix.nodes[created.Metadata.Name] = marked
		}
		s.mu.Unlock()
	}
	// Not wrapped: the node was written, whatever the audit's error says
	// (the fence's refusal means nothing was).
	return rec, fmt.Errorf("kubestore: node %s reserved, but its audit event was not written (%v), and removing it failed: %v", rec.Hostname, auditErr, err)
}

// hold checks a reservation against the index and holds its hostname,
// public key, pod CIDR and a new address (resting: the record of a
// released address it takes over).
func (s *Store) hold(ix *ledgerIndex, r joinkeys.Reservation) (netip.Addr, *object[claimSpec], error) {
	n := r.Node
	s.mu.Lock()
	defer s.mu.Unlock()
	if held, ok := ix.nodes[n.Hostname]; ok {
		return netip.Addr{}, nil, hostnameTaken(held)
	}
	if ix.pending[n.Hostname] {
		return netip.Addr{}, nil, &joinkeys.HostnameTakenError{Existing: joinkeys.Node{Hostname: n.Hostname}}
	}
	if h, ok := ix.byKey[n.PublicKey]; ok {
		existing := joinkeys.Node{Hostname: h, PublicKey: n.PublicKey}
		if o, ok := ix.nodes[h]; ok {
			if rec, err := nodeRecord(o); err == nil {
				existing = rec.Node
			}
		}
		return netip.Addr{}, nil, &joinkeys.PublicKeyTakenError{Existing: existing}
	}
	if n.PodCIDR.IsValid() {
		if h, held, ok := ix.overlappingPod(n.Hostname, n.PodCIDR); ok {
			return netip.Addr{}, nil, joinkeys.NodePodCIDRConflict(n.PodCIDR, h, held)
		}
	}
	addr, err := r.Addresses.Allocate(indexBook{ix, r.ReleasedBefore})
	if err != nil {
		return netip.Addr{}, nil, err
	}
	ip := addrpool.ToUint32(addr)
	var resting *object[claimSpec]
	if c, ok := ix.resting[ip]; ok {
		resting = &c
		delete(ix.resting, ip)
	}
	ix.pending[n.Hostname] = true
	ix.byKey[n.PublicKey] = n.Hostname
	ix.byIP[ip] = n.Hostname
	if n.PodCIDR.IsValid() {
		ix.pods[n.Hostname] = n.PodCIDR
	}
	return addr, resting, nil
}

// release gives back what hold held for a reservation that failed.
func (s *Store) release(ix *ledgerIndex, n joinkeys.NodeRecord, addr netip.Addr, resting *object[claimSpec]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ip := addrpool.ToUint32(addr)
	delete(ix.pending, n.Hostname)
	delete(ix.byKey, n.PublicKey)
	delete(ix.byIP, ip)
	delete(ix.pods, n.Hostname)
	if resting != nil {
		ix.resting[ip] = *resting
	}
	ix.freed(ip)
}

// freed lowers each range's lowest maybe-free address to ip, an address
// just given back.
func (ix *ledgerIndex) freed(ip uint32) {
	for id, low := range ix.lowest {
		if ip < low {
			ix.lowest[id] = ip
		}
	}
}

func hostnameTaken(held object[nodeSpec]) error {
	n, err := nodeRecord(held)
	if err != nil {
		return err
	}
	return &joinkeys.HostnameTakenError{Existing: n.Node}
}

// beginNodeWrite begins a write of the node with hostname: counted, on
// the index, after the other writes of that node; done ends it.
func (s *Store) beginNodeWrite(ctx context.Context, hostname string) (ix *ledgerIndex, done func(), err error) {
	end, err := s.beginWrite()
	if err != nil {
		return nil, nil, err
	}
	if ix, err = s.index(ctx); err != nil {
		end()
		return nil, nil, err
	}
	unlock, err := s.writes.Lock(ctx, "node/"+hostname)
	if err != nil {
		end()
		return nil, nil, err
	}
	return ix, func() { unlock(); end() }, nil
}

// UpdateNode implements joinkeys.Store. A new pod CIDR is held beside the
// node's own while the write is in flight, so that no other node takes
// an overlapping one meanwhile.
func (s *Store) UpdateNode(ctx context.Context, n joinkeys.NodeRecord, event joinkeys.AuditEvent) (joinkeys.NodeRecord, error) {
	ix, done, err := s.beginNodeWrite(ctx, n.Hostname)
	if err != nil {
		return joinkeys.NodeRecord{}, err
	}
	defer done()
	s.mu.Lock()
	cur, ok := ix.nodes[n.Hostname]
	if !ok {
		s.mu.Unlock()
		return joinkeys.NodeRecord{}, joinkeys.ErrNodeNotFound
	}
	if rev, _ := cur.Metadata.revision(); rev != n.Revision {
		s.mu.Unlock()
		return joinkeys.NodeRecord{}, changed(n.Hostname, cur.Metadata.ResourceVersion, n.Revision)
	}
	newCIDR := prefixString(n.PodCIDR)
	claiming := newCIDR != cur.Spec.PodCIDR && n.PodCIDR.IsValid()
	if claiming {
		if h, held, ok := ix.overlappingPod(n.Hostname, n.PodCIDR); ok {
			s.mu.Unlock()
			return joinkeys.NodeRecord{}, joinkeys.NodePodCIDRConflict(n.PodCIDR, h, held)
		}
		ix.next[n.Hostname] = n.PodCIDR
	}
	s.mu.Unlock()
	give, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	cur.Spec.GPUs = slices.Clone(cur.Spec.GPUs)
	sp := &cur.Spec
	sp.Version = n.Version
	sp.GPUs = n.GPUs
	sp.PodCIDR = newCIDR
	sp.Status = n.Status
	sp.UpdatedAt, sp.RegisteredAt, sp.LastSeen = n.UpdatedAt, n.RegisteredAt, n.LastSeen
	if len(n.TokenHash) > 0 {
		sp.TokenHash = n.TokenHash
	}
	if event.Type != "" {
		sp.Events = append(slices.Clone(sp.Events), entryOf(event))
		if over := len(sp.Events) - maxCarriedEvents; over > 0 {
			// The oldest go to the trail first: written twice should the
			// node's write fail (a read shows them once), never lost.
			if err := s.writeEntries(give, sp.Events[:over]); err != nil {
				s.mu.Lock()
				delete(ix.next, n.Hostname)
				s.mu.Unlock()
				return joinkeys.NodeRecord{}, fmt.Errorf("kubestore: node %s not written: moving its oldest audit events to the trail: %w", n.Hostname, err)
			}
			sp.Events = sp.Events[over:]
		}
	}
	written, err := s.writeNode(ctx, cur)
	s.mu.Lock()
	delete(ix.next, n.Hostname)
	if err == nil {
		ix.nodes[n.Hostname] = written
		delete(ix.unsureNodes, n.Hostname)
		delete(ix.restIfGone, n.Hostname)
		if n.PodCIDR.IsValid() {
			ix.pods[n.Hostname] = n.PodCIDR
		} else {
			delete(ix.pods, n.Hostname)
		}
	}
	s.mu.Unlock()
	if err != nil {
		switch {
		case apierrors.IsNotFound(err):
			s.forgetNode(ix, n.Hostname)
			return joinkeys.NodeRecord{}, joinkeys.ErrNodeNotFound
		case apierrors.IsConflict(err):
			s.refreshNode(give, ix, n.Hostname)
			return joinkeys.NodeRecord{}, changed(n.Hostname, "", n.Revision)
		}
		// Perhaps written: the index reads it again.
		s.refreshNode(give, ix, n.Hostname)
		return joinkeys.NodeRecord{}, err
	}
	rec, err := nodeRecord(written)
	if err != nil {
		return joinkeys.NodeRecord{}, err
	}
	// A LedgerNode CRD of an earlier version dropped the events: the
	// trail holds them, as it did then.
	if err := s.keepDropped(give, sp.Events, written); err != nil {
		// Not wrapped: the node is written, so the audit write's error
		// (ErrFenced above all, which says nothing was) is not this
		// write's.
		return rec, fmt.Errorf("kubestore: node %s written, but its audit events were not (the event of this write, and those the node carried): %v", n.Hostname, err)
	}
	return rec, nil
}

// forgetNode drops a node the API server no longer holds from the index
// (its address is not quarantined: the release was not this Store's).
func (s *Store) forgetNode(ix *ledgerIndex, hostname string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := ix.nodes[hostname]; ok {
		ix.unindexNode(o)
	}
	delete(ix.unsureNodes, hostname)
	if c, ok := ix.restIfGone[hostname]; ok {
		// This Store's delete landed after all.
		if addr, isAddress := claimedAddress(c); isAddress {
			ix.resting[addrpool.ToUint32(addr)] = c
		}
		delete(ix.restIfGone, hostname)
	}
}

// refreshNode reads a node another writer changed, or a write of this
// Store may have, into the index, and returns it; while it cannot be
// read the node is unsure (ledgerIndex.unsureNodes).
func (s *Store) refreshNode(ctx context.Context, ix *ledgerIndex, hostname string) (object[nodeSpec], error) {
	o, err := s.getNode(ctx, hostname)
	switch {
	case errors.Is(err, joinkeys.ErrNodeNotFound):
		s.forgetNode(ix, hostname)
	case err == nil:
		s.mu.Lock()
		_ = ix.indexNode(o)
		delete(ix.restIfGone, hostname)
		s.mu.Unlock()
	default:
		// Not known: reads of the node ask the API server until one
		// is answered.
		s.mu.Lock()
		if ix.unsureNodes == nil {
			ix.unsureNodes = map[string]bool{}
		}
		ix.unsureNodes[hostname] = true
		s.mu.Unlock()
		return o, err
	}
	s.mu.Lock()
	delete(ix.unsureNodes, hostname)
	s.mu.Unlock()
	return o, err
}

// committed records a reservation's node, created, in the index; the
// record of the resting address it took goes.
func (s *Store) committed(ctx context.Context, ix *ledgerIndex, created object[nodeSpec], resting *object[claimSpec]) {
	s.mu.Lock()
	delete(ix.pending, created.Metadata.Name)
	ix.nodes[created.Metadata.Name] = created
	s.mu.Unlock()
	if resting != nil {
		// The address rested long enough; its record goes.
		_, _ = s.claims.removeSigned(ctx, *resting)
	}
}

// sameReservation reports whether the stored node is the one spec
// reserved: its key, address and token.
func sameReservation(held object[nodeSpec], spec nodeSpec) bool {
	return held.Spec.PublicKey == spec.PublicKey && held.Spec.VPNIP == spec.VPNIP && string(held.Spec.TokenHash) == string(spec.TokenHash)
}

// refusedUnwritten reports whether err is the API server's refusal of a
// request it did not carry out. Any other error (a timeout, a lost
// connection, an internal error of the API server or etcd) leaves it
// unknown whether the write lands.
func refusedUnwritten(err error) bool {
	if errors.Is(err, joinkeys.ErrFenced) {
		return true
	}
	switch apierrors.ReasonForError(err) {
	case metav1.StatusReasonAlreadyExists, metav1.StatusReasonConflict, metav1.StatusReasonInvalid,
		metav1.StatusReasonForbidden, metav1.StatusReasonUnauthorized, metav1.StatusReasonBadRequest,
		metav1.StatusReasonNotFound, metav1.StatusReasonTooManyRequests, metav1.StatusReasonMethodNotAllowed,
		metav1.StatusReasonRequestEntityTooLarge, metav1.StatusReasonUnsupportedMediaType, metav1.StatusReasonNotAcceptable:
		return true
	}
	return false
}

// settleCreate is how long after it was sent a create may still land:
// the API server ends a request within a minute.
var settleCreate = 2 * time.Minute

// settleEvery bounds the wait between two reads of a create whose outcome
// is not known.
var settleEvery = 10 * time.Second

// settle reads, until it knows, whether the create of a reservation's
// node (spec), sent at sent, landed: it answers the node stored under
// hostname and whether it is the reservation's; nothing stored once
// settleCreate passed means it never will be. It answers an error when
// reads failed until then, or the Store was closed: still unknown.
func (s *Store) settle(hostname string, spec nodeSpec, sent time.Time) (held object[nodeSpec], landed bool, err error) {
	for wait := settleEvery / 8; ; wait = min(2*wait, settleEvery) {
		time.Sleep(wait)
		if s.closed.Load() {
			return object[nodeSpec]{}, false, errors.New("kubestore: closed")
		}
		ctx, cancel := context.WithTimeout(context.Background(), settleEvery)
		held, err = s.getNode(ctx, hostname)
		cancel()
		switch {
		case err == nil:
			return held, sameReservation(held, spec), nil
		case errors.Is(err, joinkeys.ErrNodeNotFound) && time.Since(sent) > settleCreate:
			return object[nodeSpec]{}, false, nil
		case !errors.Is(err, joinkeys.ErrNodeNotFound) && time.Since(sent) > settleCreate:
			return object[nodeSpec]{}, false, err
		}
	}
}

func changed(hostname, stored string, based int64) error {
	if stored == "" {
		return fmt.Errorf("%w: %q was written since revision %d was read", joinkeys.ErrNodeChanged, hostname, based)
	}
	return fmt.Errorf("%w: %q is at revision %s, the write was based on %d", joinkeys.ErrNodeChanged, hostname, stored, based)
}

// DeleteNode implements joinkeys.Store: the node object goes (under its
// resourceVersion), and its address rests, recorded as a LedgerClaim
// marked released at at, until a reservation's ReleasedBefore is past it.
func (s *Store) DeleteNode(ctx context.Context, hostname string, revision int64, at time.Time) (joinkeys.NodeRecord, error) {
	ix, done, err := s.beginNodeWrite(ctx, hostname)
	if err != nil {
		return joinkeys.NodeRecord{}, err
	}
	defer done()
	give, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	moved := map[int64]bool{} // the IDs of the events moved to the trail
	for {
		s.mu.Lock()
		cur, ok := ix.nodes[hostname]
		s.mu.Unlock()
		if !ok {
			return joinkeys.NodeRecord{}, joinkeys.ErrNodeNotFound
		}
		if revision != 0 && cur.Metadata.ResourceVersion != fmt.Sprint(revision) {
			return joinkeys.NodeRecord{}, changed(hostname, cur.Metadata.ResourceVersion, revision)
		}
		n, err := nodeRecord(cur)
		if err != nil {
			return joinkeys.NodeRecord{}, err
		}
		// The node's events go to the trail before the node: moved and
		// not released, a read shows them once.
		var carried []eventEntry
		for _, e := range cur.Spec.Events {
			if !moved[e.ID] {
				carried = append(carried, e)
			}
		}
		if len(carried) > 0 {
			if err := s.writeEntries(give, carried); err != nil {
				return joinkeys.NodeRecord{}, fmt.Errorf("kubestore: node %s not released: moving its audit events to the trail: %w", hostname, err)
			}
			for _, e := range carried {
				moved[e.ID] = true
			}
		}
		// The address's rest is recorded before the node goes, so that
		// the next writer's load finds it quarantined: a rest that cannot
		// be recorded stops the release (nothing is released, try again).
		// Should the node stay after all, the next load removes the
		// claim of an address a node holds.
		released := at.UTC()
		claim, err := s.rest(give, s.claims.new(addressClaim(n.VPNIP), nil, claimSpec{Hostname: hostname, ReleasedAt: &released}))
		if err != nil {
			return joinkeys.NodeRecord{}, fmt.Errorf("kubestore: node %s not released: recording its address's rest: %w", hostname, err)
		}
		marked, err := s.nodes.removeSigned(ctx, cur)
		if err != nil && marked.Metadata.UID != "" {
			// Marked, not deleted: the index holds the node as marked.
			s.mu.Lock()
			if ix.nodes[hostname].Metadata.ResourceVersion == cur.Metadata.ResourceVersion {
				ix.nodes[hostname] = marked
			}
			s.mu.Unlock()
		}
		if err != nil && !refusedUnwritten(err) {
			// Unknown whether the delete landed: a read tells, and a node
			// gone is released here, its address resting as after any
			// delete.
			if _, getErr := s.getNode(give, hostname); errors.Is(getErr, joinkeys.ErrNodeNotFound) {
				err = nil
			} else {
				s.mu.Lock()
				if ix.restIfGone == nil {
					ix.restIfGone = map[string]object[claimSpec]{}
				}
				ix.restIfGone[hostname] = claim
				s.mu.Unlock()
				s.refreshNode(give, ix, hostname) // unsure while it cannot be read
			}
		}
		switch {
		case apierrors.IsNotFound(err):
			s.forgetNode(ix, hostname)
			return joinkeys.NodeRecord{}, joinkeys.ErrNodeNotFound
		case apierrors.IsConflict(err):
			s.refreshNode(give, ix, hostname)
			if revision != 0 {
				return joinkeys.NodeRecord{}, changed(hostname, "", revision)
			}
			continue
		case err != nil:
			return joinkeys.NodeRecord{}, err
		}
		s.mu.Lock()
		ix.unindexNode(cur)
		ix.resting[addrpool.ToUint32(n.VPNIP)] = claim
		s.mu.Unlock()
		return n, nil
	}
}

// rest records a released address's rest: its claim, made or replaced.
func (s *Store) rest(ctx context.Context, claim object[claimSpec]) (object[claimSpec], error) {
	written, err := s.claims.create(ctx, claim)
	if !apierrors.IsAlreadyExists(err) {
		return written, err
	}
	old, err := s.claims.get(ctx, claim.Metadata.Name)
	if err != nil {
		return old, err
	}
	old.Spec = claim.Spec
	return s.claims.update(ctx, old)
}

// ---- addresses ----

// indexBook is the addrpool.Book of one allocation, over the index (s.mu
// held). Released addresses are not kept in a list: the lowest address
// that may be free is, and the index says which are taken; an address
// resting since after releasedBefore counts as taken.
type indexBook struct {
	ix             *ledgerIndex
	releasedBefore time.Time
}

func (b indexBook) PopFree(string) (uint32, bool, error) { return 0, false, nil }

func (b indexBook) Next(id string, first uint32) (uint32, error) {
	low := first
	if l, ok := b.ix.lowest[id]; ok && l > first {
		low = l
	}
	// An address that has rested long enough, below the mark, is free
	// again: the lowest free address is handed out, as in the other
	// stores.
	for ip, c := range b.ix.resting {
		if ip >= first && ip < low && b.restedEnough(c) {
			low = ip
		}
	}
	return low, nil
}

func (b indexBook) SetNext(id string, next uint32) error { b.ix.lowest[id] = next; return nil }

func (b indexBook) InUse(ip uint32) (bool, error) {
	if _, held := b.ix.byIP[ip]; held {
		return true, nil
	}
	if c, ok := b.ix.resting[ip]; ok {
		return !b.restedEnough(c), nil
	}
	return false, nil
}

func (b indexBook) restedEnough(c object[claimSpec]) bool {
	return b.releasedBefore.IsZero() || c.Spec.ReleasedAt == nil || !c.Spec.ReleasedAt.After(b.releasedBefore)
}
