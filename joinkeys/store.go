package joinkeys

import (
	"context"
	"time"

	"gridweave.dev/joinkeys/addrpool"
	"gridweave.dev/mesh/wgkey"
)

// Store keeps the ledger. It only stores: every decision about keys, tokens
// and identities is the Keyring's. A Store must be safe for concurrent use,
// make ReserveNode atomic (the key spend, the address allocation and the
// node insert happen together or not at all), keep hostname, public key and
// VPN IP unique among stored nodes, keep pod CIDRs from overlapping, and
// write nodes only under their revision (compare-and-swap), so that a write
// based on a stale read never lands.
//
// joinkeys/sqlitestore and joinkeys/memstore implement it;
// joinkeys/storetest.Run checks an implementation.
type Store interface {
	// InsertKey stores a new key. The ID is unique.
	InsertKey(ctx context.Context, key KeyRecord) error
	// Key returns the key with id, or ErrKeyNotFound.
	Key(ctx context.Context, id string) (KeyRecord, error)
	// Keys returns every key, oldest first.
	Keys(ctx context.Context) ([]KeyRecord, error)
	// RevokeKey marks the key revoked at at (keeping an earlier revocation
	// time) and returns it, or ErrKeyNotFound.
	RevokeKey(ctx context.Context, id string, at time.Time) (KeyRecord, error)
	// ReturnKeyUse gives back one use of the key with id, spent by a
	// reservation whose node was removed again (the join it admitted
	// failed further on): Uses goes down by one, never below zero, and
	// the key is returned as stored, or ErrKeyNotFound.
	ReturnKeyUse(ctx context.Context, id string) (KeyRecord, error)

	// ReserveNode inserts a node and gives it an address from r.Addresses,
	// in one transaction, with a new Revision. If r.SpendKeyID is set, it
	// first spends one use of that key: the key must exist (ErrKeyNotFound)
	// and be UsableAt r.Now; its use count and last-used time are updated.
	// A hostname held by another node yields *HostnameTakenError, a public
	// key held by another node *PublicKeyTakenError, a pod CIDR overlapping
	// another node's *PodCIDRConflictError, an exhausted range
	// ErrPoolExhausted; on any error nothing is written. If r.Event.Type is
	// set, the event is appended to the audit trail in the same transaction.
	ReserveNode(ctx context.Context, r Reservation) (NodeRecord, error)
	// Node returns the node with hostname, or ErrNodeNotFound.
	Node(ctx context.Context, hostname string) (NodeRecord, error)
	// NodeByPublicKey returns the node with the public key, or ErrNodeNotFound.
	NodeByPublicKey(ctx context.Context, key wgkey.Key) (NodeRecord, error)
	// Nodes returns every node ordered by hostname.
	Nodes(ctx context.Context) ([]NodeRecord, error)
	// GPUKinds counts the registered nodes with GPUs by kind of machine:
	// the first GPU's vendor (empty: VendorNVIDIA), its model and the
	// number of GPUs, without reading the nodes one by one.
	GPUKinds(ctx context.Context) ([]GPUKind, error)
	// NodesAfter returns at most limit nodes whose hostnames sort after
	// after ("" for the first), ordered by hostname: one page of Nodes,
	// read without reading the others.
	NodesAfter(ctx context.Context, after string, limit int) ([]NodeRecord, error)
	// UpdateNode replaces the mutable fields (Version, GPUs, PodCIDR,
	// Status, UpdatedAt, RegisteredAt, LastSeen, TokenHash) of the node
	// with n.Hostname if its stored Revision is still n.Revision, gives it a
	// new Revision and returns it as stored. ErrNodeNotFound if there is no
	// such node, ErrNodeChanged if it was written (or released and taken
	// again) since n was read, *PodCIDRConflictError if n.PodCIDR overlaps
	// another node's; on any error nothing is written. If event.Type is
	// set, the event is appended to the audit trail in the same
	// transaction.
	UpdateNode(ctx context.Context, n NodeRecord, event AuditEvent) (NodeRecord, error)
	// DeleteNode removes the node with hostname and returns its address to
	// the free list of its range, released at at: a reservation hands it
	// out again only once Reservation.ReleasedBefore is past at. If
	// revision is not zero, the node is removed only if its stored
	// Revision is still revision (ErrNodeChanged otherwise).
	// ErrNodeNotFound if there is no such node.
	DeleteNode(ctx context.Context, hostname string, revision int64, at time.Time) (NodeRecord, error)

	// AppendAudit stores an event; the store assigns its ID.
	AppendAudit(ctx context.Context, e AuditEvent) error
	// Audit returns the events q selects, oldest first.
	Audit(ctx context.Context, q AuditQuery) ([]AuditEvent, error)
	// PruneAudit removes the events r does not keep as of now: older than
	// r.MaxAge, beyond the newest r.MaxPerHostname of their hostname, and
	// beyond the newest r.MaxEvents of all. A zero bound keeps all on its
	// count. It returns how many went.
	PruneAudit(ctx context.Context, r AuditRetention, now time.Time) (int, error)

	// Close releases the store's resources.
	Close() error
}

// KeyRecord is a Key as stored: with the hash of an org key's secret.
type KeyRecord struct {
	Key
	SecretHash []byte // SHA-256 of the secret; empty for provider keys
}

// NodeRecord is a Node as stored: with the hash of its node token and the
// pool its address came from.
type NodeRecord struct {
	Node
	TokenHash []byte
	PoolID    string
}

// Reservation is the argument of Store.ReserveNode: insert Node with an
// address from Addresses, spending one use of SpendKeyID if set.
type Reservation struct {
	Node       NodeRecord // VPNIP, PoolID and Revision are set by the store
	Addresses  addrpool.Range
	SpendKeyID string
	Now        time.Time
	// ReleasedBefore quarantines released addresses: one released after
	// it is not handed out (zero: none is quarantined). When only such
	// addresses are left the range is exhausted.
	ReleasedBefore time.Time
	// Event, if its Type is set, is audited atomically with the reservation.
	Event AuditEvent
}
