package joinkeys

import (
	"net/netip"
	"time"

	"gridweave.dev/wgkey"
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

// usableAt returns nil if the key may be used at now, or the reason it may not.
func (k Key) usableAt(now time.Time) error {
	switch {
	case k.Revoked():
		return ErrKeyRevoked
	case !now.Before(k.ExpiresAt):
		return ErrKeyExpired
	case now.Before(k.CreatedAt.Add(-maxClockSkew)):
		return ErrKeyNotYetValid
	case k.MaxUses > 0 && k.Uses >= k.MaxUses:
		return ErrKeyExhausted
	}
	return nil
}

// CheckSpend is the rule a Store applies, inside its transaction, before it
// spends one use of a key at now: nil if the key may be used.
func CheckSpend(k Key, now time.Time) error { return k.usableAt(now) }

// maxClockSkew is the tolerance for clocks of the minting and checking hosts.
const maxClockSkew = time.Minute

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

// GPU is one GPU a node reported.
type GPU struct {
	Index     int    `json:"index"`
	Name      string `json:"name"`
	MemoryMiB int    `json:"memory_mib"`
	UUID      string `json:"uuid"`
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

// AuditQuery selects audit events, newest last. Zero fields select all.
type AuditQuery struct {
	Type     EventType
	Hostname string
	KeyID    string
	Limit    int // the newest Limit events; 0 means all
}
