package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"

	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/addrpool"
)

var _ joinkeys.Importer = (*Store)(nil)

// Import implements joinkeys.Importer: the whole ledger in one
// transaction, or nothing. Nodes get new revisions; addresses already
// held are skipped by later allocations.
func (s *Store) Import(ctx context.Context, l joinkeys.Ledger) error {
	return s.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var held int
		if err := tx.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM join_keys) + (SELECT count(*) FROM nodes) + (SELECT count(*) FROM audit_events)`).Scan(&held); err != nil {
			return err
		}
		if held > 0 {
			return joinkeys.ErrNotEmpty
		}
		for _, k := range l.Keys {
			labels := []byte("{}")
			if len(k.Labels) > 0 {
				var err error
				if labels, err = json.Marshal(k.Labels); err != nil {
					return err
				}
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO join_keys (`+keyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				k.ID, string(k.Kind), k.Org, k.Provider, k.SecretHash, string(labels), k.CreatedBy,
				toNanos(k.CreatedAt), toNanos(k.ExpiresAt), k.MaxUses, k.Uses, toNanos(k.RevokedAt), toNanos(k.LastUsed)); err != nil {
				return err
			}
		}
		for _, n := range l.Nodes {
			gpus, err := marshalGPUs(n.GPUs)
			if err != nil {
				return err
			}
			if err := checkPodCIDR(ctx, tx, n); err != nil {
				return err
			}
			if n.Revision, err = nextRevision(ctx, tx); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO nodes (`+nodeColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				n.Hostname, n.PublicKey[:], int64(addrpool.ToUint32(n.VPNIP)), n.PoolID, n.Org, n.JoinKeyID, n.TokenHash, n.Version,
				gpus, prefixString(n.PodCIDR), string(n.Status),
				toNanos(n.CreatedAt), toNanos(n.UpdatedAt), toNanos(n.RegisteredAt), toNanos(n.LastSeen), n.Revision); err != nil {
				return mapConstraint(err, n.Hostname)
			}
		}
		for _, e := range l.Audit {
			if err := appendAudit(ctx, tx, e); err != nil {
				return err
			}
		}
		return nil
	})
}
