package sqlitestore_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/sqlitestore"
	"gridweave.dev/joinkeys/storetest"
)

// TestBackupUnderLoadAndRestore backs up a database while a writer keeps
// joining nodes (its writes never fail and never wait for the backup to
// end), restores the backup elsewhere, and finds there every key and node
// committed before the backup began; a backup never overwrites a file,
// and a file that is not a store is refused by Restore.
func TestBackupUnderLoadAndRestore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	live := filepath.Join(dir, "live.db")
	store := open(t, live)
	defer store.Close()
	pool, _ := joinkeys.NewPool(netip.MustParsePrefix("198.18.0.0/16"), netip.MustParseAddr("198.18.0.1"))
	kr, err := joinkeys.New(store, &joinkeys.Options{JWTSecret: []byte(strings.Repeat("s", 32)), Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	minted, err := kr.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "acme", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	join := func(i int) error {
		j, err := kr.Join(ctx, joinkeys.JoinRequest{Key: minted.Secret, Hostname: fmt.Sprintf("node-%05d", i), PublicKey: storetest.PublicKey(t)})
		if err != nil {
			return err
		}
		_, err = kr.Register(ctx, joinkeys.Registration{NodeToken: j.NodeToken, Hostname: j.Node.Hostname})
		return err
	}
	for i := range 300 {
		if err := join(i); err != nil {
			t.Fatal(err)
		}
	}
	// The load: joins until the backup is done (bounded in count).
	var joined atomic.Int64
	joined.Store(300)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var loadErr error
	wg.Go(func() {
		for i := 300; i < 20000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := join(i); err != nil {
				loadErr = err
				return
			}
			joined.Add(1)
		}
	})
	time.Sleep(50 * time.Millisecond)
	before := joined.Load()
	backup := filepath.Join(dir, "backup.db")
	if err := sqlitestore.Backup(ctx, live, backup); err != nil {
		t.Fatal(err)
	}
	during := joined.Load() - before
	close(stop)
	wg.Wait()
	if loadErr != nil {
		t.Fatalf("a join failed during the backup: %v", loadErr)
	}
	t.Logf("%d joins committed while the backup ran", during)
	if err := sqlitestore.Backup(ctx, live, backup); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("a backup over an existing file: %v", err)
	}

	restored := filepath.Join(dir, "restored", "kuberay.db")
	if err := sqlitestore.Restore(ctx, backup, restored); err != nil {
		t.Fatal(err)
	}
	r := open(t, restored)
	defer r.Close()
	nodes, err := r.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, n := range nodes {
		have[n.Hostname] = n.Status == joinkeys.StatusRegistered
	}
	for i := range int(before) {
		if !have[fmt.Sprintf("node-%05d", i)] {
			t.Fatalf("node-%05d, registered before the backup began, is not registered in the restored database (%d nodes)", i, len(nodes))
		}
	}
	keys, err := r.Keys(ctx)
	if err != nil || len(keys) != 1 || keys[0].ID != minted.ID {
		t.Errorf("the restored keys: %+v, %v", keys, err)
	}
	if err := r.IntegrityCheck(ctx); err != nil {
		t.Error(err)
	}

	if fi, err := os.Stat(backup); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the backup file: %v %v, want mode 0600", fi.Mode(), err)
	}
	r.Close()

	// Refused restores leave the database as it was: junk, a missing file.
	junk := filepath.Join(dir, "junk.db")
	if err := os.WriteFile(junk, []byte("not a database"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := sqlitestore.Restore(ctx, junk, restored); err == nil || !strings.Contains(err.Error(), "not a usable backup") {
		t.Errorf("restoring junk: %v", err)
	}
	missing := filepath.Join(dir, "typo.db")
	if err := sqlitestore.Restore(ctx, missing, restored); err == nil {
		t.Error("restoring a missing file succeeded")
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Error("restoring a missing file created it")
	}
	again := open(t, restored)
	if n, _ := again.Nodes(ctx); len(n) != len(nodes) {
		t.Errorf("a refused restore changed the database: %d nodes, had %d", len(n), len(nodes))
	}
	// A restore over a database that has a WAL of its own (written to and
	// not checkpointed): the backup's content wins, nothing of the old WAL.
	if err := join(99999); err != nil {
		t.Fatal(err)
	}
	again.Close()
	if err := sqlitestore.Restore(ctx, backup, live); err != nil {
		t.Fatal(err)
	}
	back := open(t, live)
	defer back.Close()
	if _, err := back.Node(ctx, "node-99999"); err == nil {
		t.Error("a node written after the backup survived its restore")
	}
	if err := back.IntegrityCheck(ctx); err != nil {
		t.Error(err)
	}
}
