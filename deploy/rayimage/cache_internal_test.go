package rayimage

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cacheFile writes path (and its directory) with its time set to at.
func cacheFile(t *testing.T, path string, at time.Time) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestPruneCacheRemovesWhatWentUnused: root filesystems and images of
// other inputs unused for longer than UnusedEntryAge go, with their
// digests, locks and partial writes; recent ones, the kept ones (however
// old) and one whose lock is held stay.
func TestPruneCacheRemovesWhatWentUnused(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	stale, recent := now.Add(-UnusedEntryAge-time.Hour), now.Add(-UnusedEntryAge+time.Hour)

	cacheFile(t, filepath.Join(dir, "rootfs-stale", "rootfs.tar"), stale)
	cacheFile(t, filepath.Join(dir, "rootfs-stale", "lock"), stale)
	cacheFile(t, filepath.Join(dir, "rootfs-recent", "rootfs.tar"), recent)
	cacheFile(t, filepath.Join(dir, "rootfs-kept", "rootfs.tar"), stale)
	cacheFile(t, filepath.Join(dir, "rootfs-busy", "rootfs.tar"), stale)
	// A build that died: no rootfs.tar, its directory as old as its files.
	cacheFile(t, filepath.Join(dir, "rootfs-died", "build", "usr"), stale)
	for _, d := range []string{filepath.Join(dir, "rootfs-died", "build"), filepath.Join(dir, "rootfs-died")} {
		if err := os.Chtimes(d, stale, stale); err != nil {
			t.Fatal(err)
		}
	}
	images := filepath.Join(dir, "images")
	for _, f := range []string{"stale-2-worker-w_latest.tar", "stale-2-worker-w_latest.digest", "stale-2-worker-w_latest.lock", "stale-2-worker-w_latest.tar.partial",
		"kept-2-head-h_1.tar", "kept-2-head-h_1.digest", "busy-2-head-h_1.tar"} {
		cacheFile(t, filepath.Join(images, f), stale)
	}
	cacheFile(t, filepath.Join(images, "recent-2-head-h_1.tar"), recent)
	cacheFile(t, filepath.Join(images, "recent-2-head-h_1.digest"), stale)

	unlockRootFS, err := lockFile(filepath.Join(dir, "rootfs-busy", "lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer unlockRootFS()
	unlockImage, err := lockFile(filepath.Join(images, "busy-2-head-h_1.lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer unlockImage()

	var progress bytes.Buffer
	if err := pruneCache(dir, map[string]bool{"kept": true, "kept-2-head-h_1": true}, now, &progress); err != nil {
		t.Fatal(err)
	}
	gone := []string{"rootfs-stale", "rootfs-died", "images/stale-2-worker-w_latest.tar", "images/stale-2-worker-w_latest.digest",
		"images/stale-2-worker-w_latest.lock", "images/stale-2-worker-w_latest.tar.partial"}
	kept := []string{"rootfs-recent/rootfs.tar", "rootfs-kept/rootfs.tar", "rootfs-busy/rootfs.tar", "images/kept-2-head-h_1.tar",
		"images/kept-2-head-h_1.digest", "images/busy-2-head-h_1.tar", "images/recent-2-head-h_1.tar", "images/recent-2-head-h_1.digest"}
	for _, p := range gone {
		if exists(filepath.Join(dir, p)) {
			t.Errorf("%s is still there; want it removed", p)
		}
	}
	for _, p := range kept {
		if !exists(filepath.Join(dir, p)) {
			t.Errorf("%s was removed; want it kept", p)
		}
	}
	if got := strings.Count(progress.String(), "rayimage: removed "); got != 3 {
		t.Errorf("progress names %d removals, want 3:\n%s", got, progress.String())
	}
	// Nothing to prune in a cache never made.
	if err := pruneCache(filepath.Join(dir, "none"), nil, now, &progress); err != nil {
		t.Errorf("an absent cache: %v", err)
	}
}

// TestMarkUsedKeepsAnEntry: a use moves an entry's time to now (not
// within the hour, to spare writes), which keeps it from the next prune.
func TestMarkUsedKeepsAnEntry(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	path := filepath.Join(dir, "rootfs-used", "rootfs.tar")
	cacheFile(t, path, now.Add(-UnusedEntryAge-time.Hour))
	markUsed(path, now)
	if info, err := os.Stat(path); err != nil || !info.ModTime().Equal(now) {
		t.Fatalf("after a use the entry's time is %v (%v), want %v", info.ModTime(), err, now)
	}
	markUsed(path, now.Add(30*time.Minute))
	if info, _ := os.Stat(path); !info.ModTime().Equal(now) {
		t.Errorf("a use within the hour moved the time to %v", info.ModTime())
	}
	if err := pruneCache(dir, nil, now.Add(time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	if !exists(path) {
		t.Error("an entry used a minute ago was pruned")
	}
}

// TestLockFileFollowsARemovedEntry: a builder waiting for an entry's lock
// while the prune removes the entry does not build under the removed
// lock: it holds the lock at the entry's path, which a third waits for.
func TestLockFileFollowsARemovedEntry(t *testing.T) {
	dir := t.TempDir()
	lock := filepath.Join(dir, "rootfs-k", "lock")
	if err := os.MkdirAll(filepath.Dir(lock), 0o755); err != nil {
		t.Fatal(err)
	}
	unlockPrune, err := lockFile(lock)
	if err != nil {
		t.Fatal(err)
	}
	waiter := make(chan func())
	go func() {
		unlock, err := lockFile(lock)
		if err != nil {
			t.Error(err)
			close(waiter)
			return
		}
		waiter <- unlock
	}()
	time.Sleep(100 * time.Millisecond) // the waiter is blocked on the old lock file (or not yet: either way it must end on the new one)
	if err := os.RemoveAll(filepath.Dir(lock)); err != nil {
		t.Fatal(err)
	}
	unlockPrune()
	unlockWaiter, ok := <-waiter
	if !ok {
		t.FailNow()
	}
	if !exists(lock) {
		t.Fatal("the waiter holds a lock whose file is gone")
	}
	third := make(chan func(), 1)
	go func() {
		unlock, err := lockFile(lock)
		if err != nil {
			t.Error(err)
		}
		third <- unlock
	}()
	select {
	case <-third:
		t.Fatal("a third locker got the lock the waiter holds")
	case <-time.After(200 * time.Millisecond):
	}
	unlockWaiter()
	if unlock := <-third; unlock != nil {
		unlock()
	}
	// A builder that made its entry's directory before a prune removed
	// it makes it again.
	gone := filepath.Join(dir, "rootfs-gone", "lock")
	unlock, err := lockFile(gone)
	if err != nil || !exists(gone) {
		t.Fatalf("a lock in a removed directory: %v", err)
	}
	unlock()
}
