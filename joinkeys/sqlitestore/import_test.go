package sqlitestore_test

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/memstore"
	"gridweave.dev/joinkeys/storetest"
)

// TestMigrateIntoSQLite copies a ledger into a new SQLite file: the copy
// reads back the same, its nodes keep their addresses, new reservations
// skip them, and a second import is refused.
func TestMigrateIntoSQLite(t *testing.T) {
	ctx := context.Background()
	src := memstore.New()
	pool := joinkeys.MustPool("198.18.0.0/24", "198.18.0.1")
	kr, err := joinkeys.New(src, &joinkeys.Options{JWTSecret: storetest.Secret, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	m, err := kr.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "acme", TTL: time.Hour, Labels: map[string]string{"team": "ml"}})
	if err != nil {
		t.Fatal(err)
	}
	var tokens []string
	for _, h := range []string{"a", "b", "c"} {
		j, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: h, PublicKey: storetest.PublicKey(t)})
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, j.NodeToken)
	}
	if _, err := kr.Register(ctx, joinkeys.Registration{NodeToken: tokens[2], Hostname: "c", GPUs: []joinkeys.GPU{{Index: 0, Name: "NVIDIA L40S", MemoryMiB: 46068}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := kr.SetNodePodCIDR(ctx, "c", netip.MustParsePrefix("10.42.3.0/24")); err != nil {
		t.Fatal(err)
	}
	if _, err := kr.Release(ctx, "a", "admin"); err != nil {
		t.Fatal(err)
	}
	dst := open(t, filepath.Join(t.TempDir(), "copy.db"))
	defer dst.Close()
	copied, err := joinkeys.Migrate(ctx, src, dst)
	if err != nil {
		t.Fatal(err)
	}
	if len(copied.Nodes) != 2 || len(copied.Keys) != 1 || len(copied.Audit) == 0 {
		t.Fatalf("copied %d keys, %d nodes, %d events", len(copied.Keys), len(copied.Nodes), len(copied.Audit))
	}
	if err := dst.Import(ctx, copied); !errors.Is(err, joinkeys.ErrNotEmpty) {
		t.Errorf("a second import: %v, want ErrNotEmpty", err)
	}
	krCopy, err := joinkeys.New(dst, &joinkeys.Options{JWTSecret: storetest.Secret, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := krCopy.AuthenticateNode(ctx, "c", tokens[2]); err != nil {
		t.Errorf("c's token in the copy: %v", err)
	}
	j, err := krCopy.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: "d", PublicKey: storetest.PublicKey(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range copied.Nodes {
		if n.VPNIP == j.Node.VPNIP {
			t.Errorf("a new node in the copy got %s, held by %s", j.Node.VPNIP, n.Hostname)
		}
	}
	if err := joinkeys.SameLedger(copied, joinkeys.Ledger{}); err == nil {
		t.Error("SameLedger found a ledger equal to an empty one")
	}
}
