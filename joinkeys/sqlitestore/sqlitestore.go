package sqlitestore

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/netip"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mattn/go-sqlite3"

	"gridweave.dev/internal/groupcommit"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/addrpool"
	"gridweave.dev/mesh/wgkey"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is a joinkeys.Store in a SQLite database file.
type Store struct {
	write *sql.DB // one connection: every write transaction queues here
	read  *sql.DB // read-only connections

	// writes shares one transaction, and so one commit, among the writes
	// that queue while another commits (see inTx).
	writes groupcommit.Batcher[struct{}, txWrite, txResult]

	// Prepared reads on the hot paths of key checks and joins.
	keyByID, nodeByHostname, nodeByPublicKey *sql.Stmt
}

var _ joinkeys.Store = (*Store)(nil)

// statementCache is how many compiled statements each connection keeps;
// the store has fewer distinct queries than this.
const statementCache = 64

// Options tune a Store; nil means defaults.
type Options struct {
	// BusyTimeout is how long a connection waits for another process's
	// lock before failing with SQLITE_BUSY; default 10s.
	BusyTimeout time.Duration
	// ReadConns is the size of the read pool; default 4.
	ReadConns int
	// Sync says when a commit reaches the disk; default SyncFull.
	Sync Sync
}

// Sync is how durable a commit is (SQLite's synchronous setting, in WAL
// mode).
type Sync int

const (
	// SyncFull syncs the log at every commit: a committed write survives
	// a crash of the process and a loss of power.
	SyncFull Sync = iota
	// SyncNormal syncs at checkpoints only: a committed write survives a
	// crash of the process; the last writes before a loss of power may be
	// lost, and the database is never corrupted. About twice the write
	// rate of SyncFull where a sync costs a millisecond or more.
	SyncNormal
)

// Open opens (creating if needed) the database at path and applies pending
// migrations.
func Open(ctx context.Context, path string, opts *Options) (*Store, error) {
	if path == "" {
		return nil, errors.New("sqlitestore: empty database path")
	}
	if opts == nil {
		opts = &Options{}
	}
	if opts.Sync != SyncFull && opts.Sync != SyncNormal {
		return nil, fmt.Errorf("sqlitestore: unknown Sync %d", opts.Sync)
	}
	busy := opts.BusyTimeout
	if busy == 0 {
		busy = 10 * time.Second
	}
	readConns := opts.ReadConns
	if readConns == 0 {
		readConns = 4
	}
	dsn := func(extra string) string {
		q := url.Values{}
		q.Set("_journal_mode", "WAL")
		q.Set("_synchronous", map[Sync]string{SyncFull: "FULL", SyncNormal: "NORMAL"}[opts.Sync])
		q.Set("_busy_timeout", strconv.FormatInt(busy.Milliseconds(), 10))
		q.Set("_foreign_keys", "on")
		// Each connection keeps its statements compiled (single
		// statements only): compiling them was a third of a join's
		// time in SQLite.
		q.Set("_stmt_cache_size", strconv.Itoa(statementCache))
		return "file:" + path + "?" + q.Encode() + extra
	}
	write, err := sql.Open("sqlite3", dsn("&_txlock=immediate"))
	if err != nil {
		return nil, err
	}
	write.SetMaxOpenConns(1)
	write.SetConnMaxIdleTime(0)
	s := &Store{write: write}
	s.writes.Write, s.writes.MaxBatch = s.commitBatch, maxWriteBatch
	if err := s.migrate(ctx); err != nil {
		write.Close()
		return nil, fmt.Errorf("sqlitestore: migrate %s: %w", path, err)
	}
	read, err := sql.Open("sqlite3", dsn("&_query_only=true"))
	if err != nil {
		write.Close()
		return nil, err
	}
	read.SetMaxOpenConns(readConns)
	read.SetMaxIdleConns(readConns)
	s.read = read
	for stmt, query := range map[**sql.Stmt]string{
		&s.keyByID:         `SELECT ` + keyColumns + ` FROM join_keys WHERE id = ?`,
		&s.nodeByHostname:  `SELECT ` + nodeColumns + ` FROM nodes WHERE hostname = ?`,
		&s.nodeByPublicKey: `SELECT ` + nodeColumns + ` FROM nodes WHERE public_key = ?`,
	} {
		if *stmt, err = read.PrepareContext(ctx, query); err != nil {
			s.Close()
			return nil, fmt.Errorf("sqlitestore: prepare: %w", err)
		}
	}
	return s, nil
}

// SchemaVersion returns the newest migration applied.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.write.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}

// IntegrityCheck runs PRAGMA integrity_check and returns nil if it says ok.
func (s *Store) IntegrityCheck(ctx context.Context) error {
	rows, err := s.write.QueryContext(ctx, `PRAGMA integrity_check`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return err
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(problems) > 0 {
		return fmt.Errorf("integrity_check: %s", strings.Join(problems, "; "))
	}
	return nil
}

func (s *Store) migrate(ctx context.Context) error {
	if _, err := s.write.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`); err != nil {
		return err
	}
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	slices.Sort(names)
	for _, name := range names {
		base := path.Base(name)
		version, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil {
			return fmt.Errorf("migration %s: name must start with its number", base)
		}
		body, err := migrations.ReadFile(name)
		if err != nil {
			return err
		}
		err = s.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
			var applied int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, version).Scan(&applied); err != nil {
				return err
			}
			if applied > 0 {
				return nil
			}
			if _, err := tx.ExecContext(ctx, string(body)); err != nil {
				return fmt.Errorf("migration %s: %w", base, err)
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				version, base, time.Now().UnixNano())
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Close closes the database.
func (s *Store) Close() error {
	var errs []error
	for _, stmt := range []*sql.Stmt{s.keyByID, s.nodeByHostname, s.nodeByPublicKey} {
		if stmt != nil {
			errs = append(errs, stmt.Close())
		}
	}
	if s.read != nil {
		errs = append(errs, s.read.Close())
	}
	errs = append(errs, s.write.Close())
	return errors.Join(errs...)
}

// ---- keys

const keyColumns = `id, kind, org, provider, secret_hash, labels, created_by, created_at, expires_at, max_uses, uses, revoked_at, last_used_at`

type scanner interface{ Scan(dest ...any) error }

func scanKey(row scanner) (joinkeys.KeyRecord, error) {
	var (
		k                                   joinkeys.KeyRecord
		kind, labels                        string
		created, expires, revoked, lastUsed int64
	)
	err := row.Scan(&k.ID, &kind, &k.Org, &k.Provider, &k.SecretHash, &labels, &k.CreatedBy,
		&created, &expires, &k.MaxUses, &k.Uses, &revoked, &lastUsed)
	if errors.Is(err, sql.ErrNoRows) {
		return k, joinkeys.ErrKeyNotFound
	}
	if err != nil {
		return k, err
	}
	k.Kind = joinkeys.Kind(kind)
	if labels != "{}" && labels != "" {
		if err := json.Unmarshal([]byte(labels), &k.Labels); err != nil {
			return k, fmt.Errorf("key %s labels: %w", k.ID, err)
		}
	}
	k.CreatedAt, k.ExpiresAt, k.RevokedAt, k.LastUsed = fromNanos(created), fromNanos(expires), fromNanos(revoked), fromNanos(lastUsed)
	return k, nil
}

// InsertKey implements joinkeys.Store.
func (s *Store) InsertKey(ctx context.Context, k joinkeys.KeyRecord) error {
	labels := []byte("{}")
	if len(k.Labels) > 0 {
		var err error
		if labels, err = json.Marshal(k.Labels); err != nil {
			return err
		}
	}
	return s.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO join_keys (`+keyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			k.ID, string(k.Kind), k.Org, k.Provider, k.SecretHash, string(labels), k.CreatedBy,
			toNanos(k.CreatedAt), toNanos(k.ExpiresAt), k.MaxUses, k.Uses, toNanos(k.RevokedAt), toNanos(k.LastUsed))
		return err
	})
}

// Key implements joinkeys.Store.
func (s *Store) Key(ctx context.Context, id string) (joinkeys.KeyRecord, error) {
	return scanKey(s.keyByID.QueryRowContext(ctx, id))
}

// Keys implements joinkeys.Store.
func (s *Store) Keys(ctx context.Context) ([]joinkeys.KeyRecord, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+keyColumns+` FROM join_keys ORDER BY created_at, rowid`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []joinkeys.KeyRecord
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// RevokeKey implements joinkeys.Store.
func (s *Store) RevokeKey(ctx context.Context, id string, at time.Time) (joinkeys.KeyRecord, error) {
	var k joinkeys.KeyRecord
	err := s.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE join_keys SET revoked_at = ? WHERE id = ? AND revoked_at = 0`, toNanos(at), id); err != nil {
			return err
		}
		var err error
		k, err = scanKey(tx.QueryRowContext(ctx, `SELECT `+keyColumns+` FROM join_keys WHERE id = ?`, id))
		return err
	})
	if err != nil { // k may hold what a rolled-back run read
		return joinkeys.KeyRecord{}, err
	}
	return k, nil
}

// ReturnKeyUse implements joinkeys.Store.
func (s *Store) ReturnKeyUse(ctx context.Context, id string) (joinkeys.KeyRecord, error) {
	var k joinkeys.KeyRecord
	err := s.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE join_keys SET uses = uses - 1 WHERE id = ? AND uses > 0`, id); err != nil {
			return err
		}
		var err error
		k, err = scanKey(tx.QueryRowContext(ctx, `SELECT `+keyColumns+` FROM join_keys WHERE id = ?`, id))
		return err
	})
	if err != nil { // k may hold what a rolled-back run read
		return joinkeys.KeyRecord{}, err
	}
	return k, nil
}

// ---- nodes

const nodeColumns = `hostname, public_key, vpn_ip, pool, org, join_key_id, token_hash, version, gpus, pod_cidr, status, created_at, updated_at, registered_at, last_seen_at, revision`

func scanNode(row scanner) (joinkeys.NodeRecord, error) {
	var (
		n                                  joinkeys.NodeRecord
		pub                                []byte
		ip                                 int64
		gpus, podCIDR, status              string
		created, updated, registered, seen int64
	)
	err := row.Scan(&n.Hostname, &pub, &ip, &n.PoolID, &n.Org, &n.JoinKeyID, &n.TokenHash, &n.Version, &gpus, &podCIDR, &status,
		&created, &updated, &registered, &seen, &n.Revision)
	if errors.Is(err, sql.ErrNoRows) {
		return n, joinkeys.ErrNodeNotFound
	}
	if err != nil {
		return n, err
	}
	if len(pub) != wgkey.Len {
		return n, fmt.Errorf("node %s: stored public key has %d bytes", n.Hostname, len(pub))
	}
	copy(n.PublicKey[:], pub)
	n.VPNIP = addrpool.FromUint32(uint32(ip))
	if gpus != "[]" && gpus != "" {
		if err := json.Unmarshal([]byte(gpus), &n.GPUs); err != nil {
			return n, fmt.Errorf("node %s gpus: %w", n.Hostname, err)
		}
	}
	if podCIDR != "" {
		if n.PodCIDR, err = netip.ParsePrefix(podCIDR); err != nil {
			return n, fmt.Errorf("node %s pod_cidr: %w", n.Hostname, err)
		}
	}
	n.Status = joinkeys.Status(status)
	n.CreatedAt, n.UpdatedAt, n.RegisteredAt, n.LastSeen = fromNanos(created), fromNanos(updated), fromNanos(registered), fromNanos(seen)
	return n, nil
}

// ReserveNode implements joinkeys.Store in one write (inTx): all of it is
// committed, or none.
func (s *Store) ReserveNode(ctx context.Context, r joinkeys.Reservation) (joinkeys.NodeRecord, error) {
	n := r.Node
	gpus, err := marshalGPUs(n.GPUs)
	if err != nil {
		return joinkeys.NodeRecord{}, err
	}
	err = s.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if r.SpendKeyID != "" {
			k, err := scanKey(tx.QueryRowContext(ctx, `SELECT `+keyColumns+` FROM join_keys WHERE id = ?`, r.SpendKeyID))
			if err != nil {
				return err
			}
			if err := k.UsableAt(r.Now); err != nil {
				return fmt.Errorf("key %s: %w", k.ID, err)
			}
			res, err := tx.ExecContext(ctx, `UPDATE join_keys SET uses = uses + 1, last_used_at = ?
				WHERE id = ? AND revoked_at = 0 AND expires_at > ? AND (max_uses = 0 OR uses < max_uses)`,
				toNanos(r.Now), r.SpendKeyID, toNanos(r.Now))
			if err != nil {
				return err
			}
			if affected, _ := res.RowsAffected(); affected != 1 {
				return fmt.Errorf("key %s: %w", k.ID, joinkeys.ErrKeyExhausted)
			}
		}
		if holder, err := scanNode(tx.QueryRowContext(ctx, `SELECT `+nodeColumns+` FROM nodes WHERE hostname = ?`, n.Hostname)); err == nil {
			return &joinkeys.HostnameTakenError{Existing: holder.Node}
		} else if !errors.Is(err, joinkeys.ErrNodeNotFound) {
			return err
		}
		if holder, err := scanNode(tx.QueryRowContext(ctx, `SELECT `+nodeColumns+` FROM nodes WHERE public_key = ?`, n.PublicKey[:])); err == nil {
			return &joinkeys.PublicKeyTakenError{Existing: holder.Node}
		} else if !errors.Is(err, joinkeys.ErrNodeNotFound) {
			return err
		}
		if err := checkPodCIDR(ctx, tx, n); err != nil {
			return err
		}
		addr, err := r.Addresses.Allocate(&txBook{ctx: ctx, tx: tx, releasedBefore: r.ReleasedBefore})
		if err != nil {
			return err
		}
		n.VPNIP = addr
		n.PoolID = r.Addresses.ID()
		if n.Revision, err = nextRevision(ctx, tx); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO nodes (`+nodeColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			n.Hostname, n.PublicKey[:], int64(addrpool.ToUint32(addr)), n.PoolID, n.Org, n.JoinKeyID, n.TokenHash, n.Version,
			gpus, prefixString(n.PodCIDR), string(n.Status),
			toNanos(n.CreatedAt), toNanos(n.UpdatedAt), toNanos(n.RegisteredAt), toNanos(n.LastSeen), n.Revision)
		if err != nil {
			return mapConstraint(err, n.Hostname)
		}
		if r.Event.Type != "" {
			return appendAudit(ctx, tx, r.Event)
		}
		return nil
	})
	if err != nil {
		return joinkeys.NodeRecord{}, err
	}
	return n, nil
}

// mapConstraint turns a UNIQUE violation (which the checks above make
// unreachable within one writer, but another process could cause) into the
// package's errors.
func mapConstraint(err error, hostname string) error {
	var se sqlite3.Error
	if errors.As(err, &se) && se.ExtendedCode == sqlite3.ErrConstraintUnique {
		switch {
		case strings.Contains(se.Error(), "nodes.hostname"):
			return fmt.Errorf("%w: %q", joinkeys.ErrHostnameTaken, hostname)
		case strings.Contains(se.Error(), "nodes.public_key"):
			return fmt.Errorf("%w: %q", joinkeys.ErrPublicKeyTaken, hostname)
		}
	}
	return err
}

// nextRevision takes the next value of the store-wide node revision counter.
func nextRevision(ctx context.Context, tx *sql.Tx) (int64, error) {
	var rev int64
	err := tx.QueryRowContext(ctx, `UPDATE node_revision SET value = value + 1 WHERE id = 1 RETURNING value`).Scan(&rev)
	return rev, err
}

// checkPodCIDR refuses n's pod CIDR if it overlaps another node's.
func checkPodCIDR(ctx context.Context, tx *sql.Tx, n joinkeys.NodeRecord) error {
	if !n.PodCIDR.IsValid() {
		return nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT hostname, pod_cidr FROM nodes WHERE pod_cidr != '' AND hostname != ?`, n.Hostname)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var host, cidr string
		if err := rows.Scan(&host, &cidr); err != nil {
			return err
		}
		other, err := netip.ParsePrefix(cidr)
		if err != nil {
			return fmt.Errorf("node %s pod_cidr: %w", host, err)
		}
		if other.Overlaps(n.PodCIDR) {
			return joinkeys.NodePodCIDRConflict(n.PodCIDR, host, other)
		}
	}
	return rows.Err()
}

// txBook is the addrpool.Book of one reservation transaction.
type txBook struct {
	ctx context.Context
	tx  *sql.Tx
	// releasedBefore: an address released after it rests (quarantine).
	releasedBefore time.Time
}

func (b *txBook) PopFree(pool string) (uint32, bool, error) {
	var ip int64
	cutoff := int64(math.MaxInt64) // no quarantine
	if !b.releasedBefore.IsZero() {
		cutoff = toNanos(b.releasedBefore)
	}
	err := b.tx.QueryRowContext(b.ctx, `SELECT ip FROM ip_free WHERE pool = ? AND released_at <= ? ORDER BY ip LIMIT 1`, pool, cutoff).Scan(&ip)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if _, err := b.tx.ExecContext(b.ctx, `DELETE FROM ip_free WHERE pool = ? AND ip = ?`, pool, ip); err != nil {
		return 0, false, err
	}
	return uint32(ip), true, nil
}

func (b *txBook) Next(pool string, first uint32) (uint32, error) {
	var next int64
	err := b.tx.QueryRowContext(b.ctx, `SELECT next FROM ip_next WHERE pool = ?`, pool).Scan(&next)
	if errors.Is(err, sql.ErrNoRows) {
		return first, nil
	}
	return uint32(next), err
}

func (b *txBook) SetNext(pool string, next uint32) error {
	_, err := b.tx.ExecContext(b.ctx, `INSERT INTO ip_next (pool, next) VALUES (?, ?)
		ON CONFLICT (pool) DO UPDATE SET next = excluded.next`, pool, int64(next))
	return err
}

func (b *txBook) InUse(ip uint32) (bool, error) {
	var one int
	err := b.tx.QueryRowContext(b.ctx, `SELECT 1 FROM nodes WHERE vpn_ip = ?`, int64(ip)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// Node implements joinkeys.Store.
func (s *Store) Node(ctx context.Context, hostname string) (joinkeys.NodeRecord, error) {
	return scanNode(s.nodeByHostname.QueryRowContext(ctx, hostname))
}

// NodeByPublicKey implements joinkeys.Store.
func (s *Store) NodeByPublicKey(ctx context.Context, key wgkey.Key) (joinkeys.NodeRecord, error) {
	return scanNode(s.nodeByPublicKey.QueryRowContext(ctx, key[:]))
}

// Nodes implements joinkeys.Store.
func (s *Store) Nodes(ctx context.Context) ([]joinkeys.NodeRecord, error) {
	return s.queryNodes(ctx, `SELECT `+nodeColumns+` FROM nodes ORDER BY hostname`)
}

// queryNodes runs a query of nodeColumns and scans every row.
func (s *Store) queryNodes(ctx context.Context, query string, args ...any) ([]joinkeys.NodeRecord, error) {
	rows, err := s.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []joinkeys.NodeRecord
	for rows.Next() {
		n, err := scanNode(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// GPUKinds implements joinkeys.Store from the counts the triggers keep
// (a row per kind, whatever the fleet's size).
func (s *Store) GPUKinds(ctx context.Context) ([]joinkeys.GPUKind, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT gpu_kind, nodes FROM gpu_kind_counts ORDER BY gpu_kind`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []joinkeys.GPUKind
	for rows.Next() {
		var kind string
		var n int
		if err := rows.Scan(&kind, &n); err != nil {
			return nil, err
		}
		parts := strings.Split(kind, "\x1f")
		if len(parts) != 3 {
			return nil, fmt.Errorf("sqlitestore: gpu_kind %q is not vendor, model and count", kind)
		}
		gpus, err := strconv.Atoi(parts[2])
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: gpu_kind %q: %w", kind, err)
		}
		out = append(out, joinkeys.GPUKind{Vendor: parts[0], Model: parts[1], GPUs: gpus, Nodes: n})
	}
	return out, rows.Err()
}

// NodesAfter implements joinkeys.Store: the primary key's index gives the
// page without reading the rows before it.
func (s *Store) NodesAfter(ctx context.Context, after string, limit int) ([]joinkeys.NodeRecord, error) {
	return s.queryNodes(ctx, `SELECT `+nodeColumns+` FROM nodes WHERE hostname > ? ORDER BY hostname LIMIT ?`, after, limit)
}

// UpdateNode implements joinkeys.Store.
func (s *Store) UpdateNode(ctx context.Context, n joinkeys.NodeRecord, event joinkeys.AuditEvent) (joinkeys.NodeRecord, error) {
	gpus, err := marshalGPUs(n.GPUs)
	if err != nil {
		return joinkeys.NodeRecord{}, err
	}
	var stored joinkeys.NodeRecord
	err = s.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		cur, err := scanNode(tx.QueryRowContext(ctx, `SELECT `+nodeColumns+` FROM nodes WHERE hostname = ?`, n.Hostname))
		if err != nil {
			return err
		}
		if cur.Revision != n.Revision {
			return fmt.Errorf("%w: %q is at revision %d, the write was based on %d", joinkeys.ErrNodeChanged, n.Hostname, cur.Revision, n.Revision)
		}
		if n.PodCIDR != cur.PodCIDR {
			if err := checkPodCIDR(ctx, tx, n); err != nil {
				return err
			}
		}
		rev, err := nextRevision(ctx, tx)
		if err != nil {
			return err
		}
		tokenHash := n.TokenHash
		if len(tokenHash) == 0 {
			tokenHash = cur.TokenHash
		}
		_, err = tx.ExecContext(ctx, `UPDATE nodes SET version = ?, gpus = ?, pod_cidr = ?, status = ?,
			updated_at = ?, registered_at = ?, last_seen_at = ?, token_hash = ?, revision = ?
			WHERE hostname = ? AND revision = ?`,
			n.Version, gpus, prefixString(n.PodCIDR), string(n.Status),
			toNanos(n.UpdatedAt), toNanos(n.RegisteredAt), toNanos(n.LastSeen), tokenHash, rev, n.Hostname, n.Revision)
		if err != nil {
			return err
		}
		stored = cur // the immutable fields as stored, the rest as written
		stored.Version, stored.GPUs, stored.PodCIDR, stored.Status = n.Version, slices.Clone(n.GPUs), n.PodCIDR, n.Status
		stored.UpdatedAt, stored.RegisteredAt, stored.LastSeen = n.UpdatedAt, n.RegisteredAt, n.LastSeen
		stored.TokenHash, stored.Revision = tokenHash, rev
		if event.Type != "" {
			return appendAudit(ctx, tx, event)
		}
		return nil
	})
	if err != nil {
		return joinkeys.NodeRecord{}, err
	}
	return stored, nil
}

// DeleteNode implements joinkeys.Store.
func (s *Store) DeleteNode(ctx context.Context, hostname string, revision int64, at time.Time) (joinkeys.NodeRecord, error) {
	var n joinkeys.NodeRecord
	err := s.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		n, err = scanNode(tx.QueryRowContext(ctx, `SELECT `+nodeColumns+` FROM nodes WHERE hostname = ?`, hostname))
		if err != nil {
			return err
		}
		if revision != 0 && n.Revision != revision {
			return fmt.Errorf("%w: %q is at revision %d, the release was based on %d", joinkeys.ErrNodeChanged, hostname, n.Revision, revision)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM nodes WHERE hostname = ?`, hostname); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO ip_free (pool, ip, released_at) VALUES (?, ?, ?)
			ON CONFLICT (pool, ip) DO UPDATE SET released_at = excluded.released_at`,
			n.PoolID, int64(addrpool.ToUint32(n.VPNIP)), toNanos(at))
		return err
	})
	if err != nil { // n may hold what a rolled-back run read
		return joinkeys.NodeRecord{}, err
	}
	return n, nil
}

// ---- audit

// AppendAudit implements joinkeys.Store.
func (s *Store) AppendAudit(ctx context.Context, e joinkeys.AuditEvent) error {
	return s.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error { return appendAudit(ctx, tx, e) })
}

func appendAudit(ctx context.Context, tx *sql.Tx, e joinkeys.AuditEvent) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO audit_events (at, type, key_id, hostname, actor, reason) VALUES (?, ?, ?, ?, ?, ?)`,
		toNanos(e.At), string(e.Type), e.KeyID, e.Hostname, e.Actor, e.Reason)
	return err
}

// PruneAudit implements joinkeys.Store, in one transaction.
func (s *Store) PruneAudit(ctx context.Context, r joinkeys.AuditRetention, now time.Time) (int, error) {
	removed := 0
	err := s.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		removed = 0
		var steps []struct {
			query string
			args  []any
		}
		if r.MaxAge > 0 {
			steps = append(steps, struct {
				query string
				args  []any
			}{`DELETE FROM audit_events WHERE at < ?`, []any{toNanos(now.Add(-r.MaxAge))}})
		}
		rejected := string(joinkeys.EventValidationRejected)
		if r.MaxPerHostname > 0 {
			steps = append(steps, struct {
				query string
				args  []any
			}{`DELETE FROM audit_events WHERE id IN (SELECT id FROM (
				SELECT id, ROW_NUMBER() OVER (PARTITION BY hostname, type = ? ORDER BY id DESC) AS newer
				FROM audit_events WHERE hostname != '') WHERE newer > ?)`, []any{rejected, r.MaxPerHostname}})
		}
		if r.MaxEvents > 0 {
			steps = append(steps, struct {
				query string
				args  []any
			}{`DELETE FROM audit_events WHERE type != ? AND id <= (SELECT id FROM audit_events WHERE type != ? ORDER BY id DESC LIMIT 1 OFFSET ?)`, []any{rejected, rejected, r.MaxEvents}})
		}
		if r.MaxRejected > 0 {
			steps = append(steps, struct {
				query string
				args  []any
			}{`DELETE FROM audit_events WHERE type = ? AND id <= (SELECT id FROM audit_events WHERE type = ? ORDER BY id DESC LIMIT 1 OFFSET ?)`, []any{rejected, rejected, r.MaxRejected}})
		}
		for _, st := range steps {
			res, err := tx.ExecContext(ctx, st.query, st.args...)
			if err != nil {
				return err
			}
			n, _ := res.RowsAffected()
			removed += int(n)
		}
		return nil
	})
	return removed, err
}

// Audit implements joinkeys.Store.
func (s *Store) Audit(ctx context.Context, q joinkeys.AuditQuery) ([]joinkeys.AuditEvent, error) {
	var where []string
	var args []any
	if q.Type != "" {
		where, args = append(where, "type = ?"), append(args, string(q.Type))
	}
	if q.Hostname != "" {
		where, args = append(where, "hostname = ?"), append(args, q.Hostname)
	}
	if q.KeyID != "" {
		where, args = append(where, "key_id = ?"), append(args, q.KeyID)
	}
	query := `SELECT id, at, type, key_id, hostname, actor, reason FROM audit_events`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += " ORDER BY id DESC"
	if q.Limit > 0 {
		query += " LIMIT " + strconv.Itoa(q.Limit)
	}
	rows, err := s.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []joinkeys.AuditEvent
	for rows.Next() {
		var e joinkeys.AuditEvent
		var at int64
		var typ string
		if err := rows.Scan(&e.ID, &at, &typ, &e.KeyID, &e.Hostname, &e.Actor, &e.Reason); err != nil {
			return nil, err
		}
		e.At, e.Type = fromNanos(at), joinkeys.EventType(typ)
		out = append(out, e)
	}
	slices.Reverse(out)
	return out, rows.Err()
}

// ---- conversions

func toNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func marshalGPUs(gpus []joinkeys.GPU) (string, error) {
	if len(gpus) == 0 {
		return "[]", nil
	}
	b, err := json.Marshal(gpus)
	return string(b), err
}

func prefixString(p netip.Prefix) string {
	if !p.IsValid() {
		return ""
	}
	return p.String()
}
