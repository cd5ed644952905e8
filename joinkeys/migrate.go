package joinkeys

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Ledger is a whole ledger: what Export reads and an Importer writes.
type Ledger struct {
	Keys  []KeyRecord
	Nodes []NodeRecord
	Audit []AuditEvent // oldest first
}

// Importer is a Store that can take in a whole ledger as it is, the
// target of a migration: nodes keep their addresses, pod CIDRs, token
// hashes and times, keys their use counts and secret hashes, the audit
// trail its order (its IDs and the nodes' revisions are the importer's).
// Import refuses a store that is not empty.
type Importer interface {
	Store
	Import(ctx context.Context, l Ledger) error
}

// ErrNotEmpty is returned by Import when the target holds a ledger
// already.
var ErrNotEmpty = errors.New("the target ledger is not empty")

// Export reads the whole ledger of s.
func Export(ctx context.Context, s Store) (Ledger, error) {
	var l Ledger
	var err error
	if l.Keys, err = s.Keys(ctx); err != nil {
		return Ledger{}, fmt.Errorf("export keys: %w", err)
	}
	if l.Nodes, err = s.Nodes(ctx); err != nil {
		return Ledger{}, fmt.Errorf("export nodes: %w", err)
	}
	if l.Audit, err = s.Audit(ctx, AuditQuery{}); err != nil {
		return Ledger{}, fmt.Errorf("export the audit trail: %w", err)
	}
	return l, nil
}

// Empty reports whether l holds nothing.
func (l Ledger) Empty() bool { return len(l.Keys) == 0 && len(l.Nodes) == 0 && len(l.Audit) == 0 }

// Migrate copies the ledger of from into to, which must be empty, and
// verifies the copy: read back from to, it holds the same keys, nodes and
// audit trail. It returns what it copied.
func Migrate(ctx context.Context, from Store, to Importer) (Ledger, error) {
	l, err := Export(ctx, from)
	if err != nil {
		return Ledger{}, err
	}
	if err := to.Import(ctx, l); err != nil {
		return Ledger{}, fmt.Errorf("import: %w", err)
	}
	copied, err := Export(ctx, to)
	if err != nil {
		return Ledger{}, fmt.Errorf("reading the copy back: %w", err)
	}
	if err := SameLedger(l, copied); err != nil {
		return Ledger{}, fmt.Errorf("the copy differs from the source: %w", err)
	}
	return l, nil
}

// SameLedger returns nil if a and b hold the same keys, nodes and audit
// trail (in order), and otherwise an error naming the first difference.
// Node revisions and audit IDs are each store's own and are not compared.
func SameLedger(a, b Ledger) error {
	if len(a.Keys) != len(b.Keys) {
		return fmt.Errorf("%d keys, the other holds %d", len(a.Keys), len(b.Keys))
	}
	keys := map[string]KeyRecord{}
	for _, k := range b.Keys {
		keys[k.ID] = k
	}
	for _, k := range a.Keys {
		o, ok := keys[k.ID]
		if !ok || !sameKey(k, o) {
			return fmt.Errorf("key %s differs", k.ID)
		}
	}
	if len(a.Nodes) != len(b.Nodes) {
		return fmt.Errorf("%d nodes, the other holds %d", len(a.Nodes), len(b.Nodes))
	}
	nodes := map[string]NodeRecord{}
	for _, n := range b.Nodes {
		nodes[n.Hostname] = n
	}
	for _, n := range a.Nodes {
		o, ok := nodes[n.Hostname]
		if !ok || !sameNode(n, o) {
			return fmt.Errorf("node %s differs", n.Hostname)
		}
	}
	if len(a.Audit) != len(b.Audit) {
		return fmt.Errorf("%d audit events, the other holds %d", len(a.Audit), len(b.Audit))
	}
	for i, e := range a.Audit {
		o := b.Audit[i]
		e.ID, o.ID = 0, 0
		if !e.At.Equal(o.At) || e.Type != o.Type || e.KeyID != o.KeyID || e.Hostname != o.Hostname || e.Actor != o.Actor || e.Reason != o.Reason {
			return fmt.Errorf("audit event %d (%s) differs", i+1, e.Type)
		}
	}
	return nil
}

func sameTime(a, b time.Time) bool { return a.Equal(b) }

func sameKey(a, b KeyRecord) bool {
	return a.ID == b.ID && a.Kind == b.Kind && a.Org == b.Org && a.Provider == b.Provider &&
		(len(a.Labels) == 0 && len(b.Labels) == 0 || maps.Equal(a.Labels, b.Labels)) && a.CreatedBy == b.CreatedBy &&
		sameTime(a.CreatedAt, b.CreatedAt) && sameTime(a.ExpiresAt, b.ExpiresAt) && a.MaxUses == b.MaxUses &&
		a.Uses == b.Uses && sameTime(a.RevokedAt, b.RevokedAt) && sameTime(a.LastUsed, b.LastUsed) &&
		slices.Equal(a.SecretHash, b.SecretHash)
}

func sameNode(a, b NodeRecord) bool {
	return a.Hostname == b.Hostname && a.PublicKey == b.PublicKey && a.VPNIP == b.VPNIP && a.Org == b.Org &&
		a.JoinKeyID == b.JoinKeyID && a.Version == b.Version && slices.Equal(a.GPUs, b.GPUs) && a.PodCIDR == b.PodCIDR &&
		a.Status == b.Status && sameTime(a.CreatedAt, b.CreatedAt) && sameTime(a.UpdatedAt, b.UpdatedAt) &&
		sameTime(a.RegisteredAt, b.RegisteredAt) && sameTime(a.LastSeen, b.LastSeen) &&
		slices.Equal(a.TokenHash, b.TokenHash) && a.PoolID == b.PoolID
}
