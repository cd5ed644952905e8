package groupcommit

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// TestALoneCallIsOneWrite: a call with nothing else queued is written
// alone, and gets its own result.
func TestALoneCallIsOneWrite(t *testing.T) {
	var writes [][]int
	b := &Batcher[string, int, string]{MaxBatch: 8, Write: func(key string, batch []int) []string {
		writes = append(writes, slices.Clone(batch))
		out := make([]string, len(batch))
		for i, v := range batch {
			out[i] = fmt.Sprintf("%s:%d", key, v)
		}
		return out
	}}
	for i := range 3 {
		if got := b.Do("k", i); got != fmt.Sprintf("k:%d", i) {
			t.Fatalf("Do(k, %d) = %q", i, got)
		}
	}
	if len(writes) != 3 {
		t.Fatalf("3 calls one after another made %d writes %v, want 3", len(writes), writes)
	}
}

// TestCallsDuringAWriteShareTheNext: calls queued while a batch is being
// written go together in the next, bounded by MaxBatch, in queue order,
// each caller with its own result; other keys are written beside them.
func TestCallsDuringAWriteShareTheNext(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	writes := map[string][][]int{}
	b := &Batcher[string, int, int]{MaxBatch: 4, Write: func(key string, batch []int) []int {
		mu.Lock()
		writes[key] = append(writes[key], slices.Clone(batch))
		first := len(writes[key]) == 1
		mu.Unlock()
		if key == "a" && first {
			entered <- struct{}{}
			<-release
		}
		out := make([]int, len(batch))
		for i, v := range batch {
			out[i] = v * 10
		}
		return out
	}}
	results := make([]int, 11)
	var wg sync.WaitGroup
	wg.Go(func() { results[0] = b.Do("a", 0) })
	<-entered // the first write of a is under way
	var queued sync.WaitGroup
	for i := 1; i <= 10; i++ {
		queued.Add(1)
		wg.Go(func() {
			queued.Done()
			results[i] = b.Do("a", i)
		})
	}
	queued.Wait()
	// Every call is in the queue once it is counted there.
	var order []int
	for {
		b.mu.Lock()
		n := len(b.waiting["a"])
		if n == 10 {
			for _, c := range b.waiting["a"] {
				order = append(order, c.item)
			}
		}
		b.mu.Unlock()
		if n == 10 {
			break
		}
		runtime.Gosched()
	}
	if got := b.Do("b", 7); got != 70 {
		t.Fatalf("Do(b, 7) = %d while a waits", got)
	}
	close(release)
	wg.Wait()
	for i, r := range results {
		if r != i*10 {
			t.Errorf("call %d got %d, want %d", i, r, i*10)
		}
	}
	sizes := []int{}
	var all []int
	for _, w := range writes["a"] {
		sizes = append(sizes, len(w))
		all = append(all, w...)
	}
	if !slices.Equal(sizes, []int{1, 4, 4, 2}) {
		t.Errorf("batches of a: sizes %v, want [1 4 4 2]", sizes)
	}
	// Written in the order they queued.
	if all[0] != 0 || !slices.Equal(all[1:], order) {
		t.Errorf("items of a written %v; queued in the order %v after 0", all, order)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.waiting) != 0 {
		t.Errorf("keys still queued after every call returned: %v", b.waiting)
	}
}

// TestAPanicReachesEveryCallerOfItsBatch: a Write that panics, answers
// fewer results than items, or ends its goroutine, panics in each caller
// of that batch (here three, queued behind a first write), not in the
// batch's goroutine; the key's next call is written as usual.
func TestAPanicReachesEveryCallerOfItsBatch(t *testing.T) {
	for name, broken := range map[string]func(string, []int) []int{
		"panics": func(string, []int) []int { panic("the write broke") },
		"short":  func(_ string, batch []int) []int { return batch[:len(batch)-1] },
		"exits":  func(string, []int) []int { runtime.Goexit(); return nil },
	} {
		t.Run(name, func(t *testing.T) {
			entered, release := make(chan struct{}), make(chan struct{})
			var writes atomic.Int32
			b := &Batcher[string, int, int]{MaxBatch: 8, Write: func(key string, batch []int) []int {
				switch writes.Add(1) {
				case 1: // the first write, alone, holds the others back
					close(entered)
					<-release
					return batch
				case 2:
					return broken(key, batch)
				}
				return batch
			}}
			go b.Do("k", 0)
			<-entered
			panicked := make(chan bool, 3)
			for i := 1; i <= 3; i++ {
				go func() {
					defer func() { panicked <- recover() != nil }()
					b.Do("k", i)
				}()
			}
			for {
				b.mu.Lock()
				n := len(b.waiting["k"])
				b.mu.Unlock()
				if n == 3 {
					break
				}
				runtime.Gosched()
			}
			close(release)
			for range 3 {
				if !<-panicked {
					t.Error("a caller of the broken batch returned; want its panic")
				}
			}
			if got := b.Do("k", 4); got != 4 {
				t.Errorf("the next call got %d, want 4", got)
			}
		})
	}
}
