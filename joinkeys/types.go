package joinkeys

import (
	"net/netip"
	"time"

	"gridweave.dev/mesh/wgkey"
)

// Kind is the kind of a join key.
type Kind string

const (
	// KindOrg is a random secret owned by an organisation.
	KindOrg Kind = "org"
	// KindProvider is an HS256 JWT naming a GPU provider; it also
	// authenticates that provider.
	KindProvider Kind = "provider"
)

// Key describes a join key. It never holds the secret.
type Key struct {
	ID        string
	Kind      Kind
	Org       string
	Provider  string // the JWT subject of a provider key; empty for org keys
	Labels    map[string]string
	CreatedBy string
	CreatedAt time.Time
	ExpiresAt time.Time
	MaxUses   int // 0 means unlimited
	Uses      int
	RevokedAt time.Time // zero while not revoked
	LastUsed  time.Time // zero until first used
}

// Revoked reports whether the key was revoked.
func (k Key) Revoked() bool { return !k.RevokedAt.IsZero() }

// UsableAt returns nil if the key may be used to admit a node at now, or
// the reason it may not: ErrKeyRevoked, ErrKeyExpired (expiry is exact),
// ErrKeyNotYetValid (its creation is more than MaxClockSkew ahead of now) or
// ErrKeyExhausted. A Store applies it, inside its transaction, before it
// spends a use.
func (k Key) UsableAt(now time.Time) error {
	switch {
	case k.Revoked():
		return ErrKeyRevoked
	case !now.Before(k.ExpiresAt):
		return ErrKeyExpired
	case now.Before(k.CreatedAt.Add(-MaxClockSkew)):
		return ErrKeyNotYetValid
	case k.MaxUses > 0 && k.Uses >= k.MaxUses:
		return ErrKeyExhausted
	}
	return nil
}

// MaxClockSkew is how far the clock of a host checking a key may run behind
// the host that minted it: a key's creation (an org key's CreatedAt, a
// provider key's iat and nbf) may lie this far in the future. Expiry has no
// such leeway, for either kind: an expired key is expired.
const MaxClockSkew = time.Minute

// Status is where a node is in the join flow.
type Status string

const (
	// StatusValidated: the key was accepted and a VPN IP reserved.
	StatusValidated Status = "validated"
	// StatusRegistered: the node brought up its tunnel and agent and registered.
	StatusRegistered Status = "registered"
	// StatusDisconnected: the node is known but its tunnel is down.
	StatusDisconnected Status = "disconnected"
)

// GPU vendors a node may report.
const (
	VendorNVIDIA = "nvidia"
	VendorAMD    = "amd"
)

// GPU is one GPU a node reported.
type GPU struct {
	Index     int    `json:"index"`
	Vendor    string `json:"vendor"` // VendorNVIDIA or VendorAMD; empty if unknown
	Name      string `json:"name"`
	MemoryMiB int    `json:"memory_mib"`
	UUID      string `json:"uuid"`
}

// GPUKind is a kind of GPU machine and how many registered nodes are of
// it.
type GPUKind struct {
	Vendor string // VendorNVIDIA or VendorAMD
	Model  string // the first GPU's name
	GPUs   int    // GPUs per node
	Nodes  int
}

// Node is one machine in the ledger.
type Node struct {
	Hostname     string
	PublicKey    wgkey.Key
	VPNIP        netip.Addr
	Org          string
	JoinKeyID    string // the key that first admitted it
	Version      string
	GPUs         []GPU
	PodCIDR      netip.Prefix // invalid until known
	Status       Status
	CreatedAt    time.Time
	UpdatedAt    time.Time
	RegisteredAt time.Time
	LastSeen     time.Time
	// Revision changes with every write of the node. Revisions increase
	// store-wide and are never reused, also not by a new node under a
	// released hostname, so a write conditioned on one cannot land on
	// another machine's record.
	Revision int64
}

// EventType names an audit event.
type EventType string

const (
	EventKeyMinted          EventType = "key_minted"
	EventKeyRevoked         EventType = "key_revoked"
	EventValidationAccepted EventType = "validation_accepted"
	EventValidationRejected EventType = "validation_rejected"
	EventNodeRegistered     EventType = "node_registered"
	EventNodeDisconnected   EventType = "node_disconnected"
	EventNodeReleased       EventType = "node_released"
	// EventVersionReported: a node reported a version other than the one
	// the ledger held (an agent updated, or a first report).
	EventVersionReported EventType = "version_reported"
)

// AuditEvent is one entry of the audit trail. It never holds a secret.
type AuditEvent struct {
	ID       int64 // assigned by the store, increasing
	At       time.Time
	Type     EventType
	KeyID    string
	Hostname string
	Actor    string
	Reason   string // why a validation was rejected; free text otherwise
}

// AuditRetention bounds the audit trail: Store.PruneAudit removes the
// events beyond it, oldest first. Rejected attempts
// (EventValidationRejected, which anyone can cause) and every other
// event are bounded apart, so a flood of the first never evicts the
// second.
type AuditRetention struct {
	// MaxEvents is the most events kept in all, rejected attempts aside.
	MaxEvents int
	// MaxRejected is the most rejected attempts kept in all.
	MaxRejected int
	// MaxPerHostname is the most events kept of one hostname, rejected
	// attempts and the rest each (events that name none count toward the
	// totals only).
	MaxPerHostname int
	// MaxAge is how old an event may grow before it goes.
	MaxAge time.Duration
}

// DefaultAuditRetention is what a Keyring keeps unless
// Options.AuditRetention says otherwise: 20,000 events and 5,000
// rejected attempts, 200 of each of a hostname, none older than 90 days.
var DefaultAuditRetention = AuditRetention{MaxEvents: 20_000, MaxRejected: 5_000, MaxPerHostname: 200, MaxAge: 90 * 24 * time.Hour}

// AuditQuery selects audit events, newest last. Zero fields select all.
type AuditQuery struct {
	Type     EventType
	Hostname string
	KeyID    string
	Limit    int // the newest Limit events; 0 means all
}
