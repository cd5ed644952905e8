package keyedlock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestLocks(t *testing.T) {
	var l Locks
	ctx := context.Background()
	unlockA, err := l.Lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	// Another key does not wait.
	unlockB, err := l.Lock(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	unlockB()
	// The same key waits, until its context ends.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := l.Lock(short, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second holder of a: %v", err)
	}
	unlockA()
	if l.Len() != 0 {
		t.Errorf("%d keys remembered after every lock was released", l.Len())
	}
	// Mutual exclusion under contention (run with -race).
	var wg sync.WaitGroup
	counter := 0
	for range 50 {
		wg.Go(func() {
			unlock, err := l.Lock(ctx, "hot")
			if err != nil {
				t.Error(err)
				return
			}
			counter++
			unlock()
		})
	}
	wg.Wait()
	if counter != 50 || l.Len() != 0 {
		t.Errorf("counter %d, %d keys left", counter, l.Len())
	}
}

// TestTryLock takes a free key's lock at once, refuses a held one without
// waiting, and leaves nothing remembered.
func TestTryLock(t *testing.T) {
	var l Locks
	unlock, ok := l.TryLock("a")
	if !ok {
		t.Fatal("a free key's lock refused")
	}
	if _, ok := l.TryLock("a"); ok {
		t.Fatal("a held key's lock taken a second time")
	}
	if other, ok := l.TryLock("b"); !ok {
		t.Fatal("another key's lock refused")
	} else {
		other()
	}
	unlock()
	again, ok := l.TryLock("a")
	if !ok {
		t.Fatal("a released key's lock refused")
	}
	again()
	if l.Len() != 0 {
		t.Errorf("%d keys remembered after every lock was released", l.Len())
	}
}
