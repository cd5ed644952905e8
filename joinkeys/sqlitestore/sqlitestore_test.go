package sqlitestore_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/sqlitestore"
	"gridweave.dev/joinkeys/storetest"
)

func open(t testing.TB, path string) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) joinkeys.Store {
		return open(t, filepath.Join(t.TempDir(), "joinkeys.db"))
	})
}

func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, func(b *testing.B) joinkeys.Store {
		return open(b, filepath.Join(b.TempDir(), "bench.db"))
	})
}

func TestConformanceSyncNormal(t *testing.T) {
	storetest.Run(t, func(t *testing.T) joinkeys.Store {
		s, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "joinkeys.db"), &sqlitestore.Options{Sync: sqlitestore.SyncNormal})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestMigrationGivesExistingNodesRevisions opens a ledger written before
// node revisions and the counts by kind existed: its nodes get distinct
// revisions, its registered GPU node is counted, and writes and new
// reservations work on top of them.
func TestMigrationGivesExistingNodesRevisions(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	v1, err := os.ReadFile("migrations/0001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`,
		string(v1),
		`INSERT INTO schema_migrations VALUES (1, '0001_init.sql', 0)`,
		`INSERT INTO nodes (hostname, public_key, vpn_ip, pool, token_hash, status, gpus, created_at, updated_at) VALUES
			('old-a', randomblob(32), 3323068418, '198.18.0.0/16', x'00', 'registered', '[{"index":0,"vendor":"nvidia","name":"H100","memory_mib":1}]', 1, 1),
			('old-b', randomblob(32), 3323068419, '198.18.0.0/16', x'00', 'validated', '[{"index":0,"vendor":"nvidia","name":"H100","memory_mib":1}]', 1, 1)`,
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	db.Close()

	s := open(t, path)
	defer s.Close()
	a, errA := s.Node(ctx, "old-a")
	b, errB := s.Node(ctx, "old-b")
	if errA != nil || errB != nil || a.Revision == 0 || b.Revision == 0 || a.Revision == b.Revision {
		t.Fatalf("migrated revisions %d, %d (%v, %v); want distinct and non-zero", a.Revision, b.Revision, errA, errB)
	}
	// The counts by kind start from the nodes there were.
	if kinds, err := s.GPUKinds(ctx); err != nil || len(kinds) != 1 || kinds[0] != (joinkeys.GPUKind{Vendor: "nvidia", Model: "H100", GPUs: 1, Nodes: 1}) {
		t.Fatalf("GPUKinds after the migration = %+v, %v; want old-a's H100 alone", kinds, err)
	}
	a.Version = "2.0.0"
	written, err := s.UpdateNode(ctx, a, joinkeys.AuditEvent{})
	if err != nil || written.Revision <= max(a.Revision, b.Revision) {
		t.Fatalf("UpdateNode after the migration = revision %d, %v", written.Revision, err)
	}
	kr := keyring(t, s)
	m, err := kr.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "acme", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	j, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "new", PublicKey: storetest.PublicKey(t)})
	if err != nil || j.Node.Revision <= written.Revision {
		t.Fatalf("a new node after the migration: revision %d, %v", j.Node.Revision, err)
	}
}
