package groupcommit

import (
	"fmt"
	"sync"
)

// Batcher batches the items of calls to Do by key. Its zero value is not
// usable: set Write and MaxBatch.
type Batcher[K comparable, T, R any] struct {
	// Write writes one batch of key's items (at most MaxBatch, in the
	// order their calls queued them) and returns each item's result, in
	// the same order. Calls of one key never overlap.
	Write func(key K, batch []T) []R
	// MaxBatch bounds a batch.
	MaxBatch int

	mu sync.Mutex
	// waiting holds each key's queued calls; a key is present while its
	// goroutine runs, even with nothing queued.
	waiting map[K][]call[T, R]
}

type call[T, R any] struct {
	item T
	done chan outcome[R]
}

// outcome is one call's result, or the panic its batch's Write raised.
type outcome[R any] struct {
	result   R
	panicked any
}

// Do queues item under key and returns its result once the batch that
// carries it is written. It always waits for that write: a caller that
// went away would not learn what became of its item. A panic of Write
// (or a Write that answers another number of results than items) is
// raised again in every caller of its batch, where it can be recovered
// as a panic of the caller's own work.
func (b *Batcher[K, T, R]) Do(key K, item T) R {
	done := make(chan outcome[R], 1)
	b.mu.Lock()
	if b.waiting == nil {
		b.waiting = map[K][]call[T, R]{}
	}
	queued, running := b.waiting[key]
	b.waiting[key] = append(queued, call[T, R]{item, done})
	b.mu.Unlock()
	if !running {
		go b.run(key)
	}
	o := <-done
	if o.panicked != nil {
		panic(o.panicked)
	}
	return o.result
}

// run writes key's batches until its queue is empty.
func (b *Batcher[K, T, R]) run(key K) {
	var batch []call[T, R] // the batch being written
	finished := false
	defer func() {
		if finished {
			return
		}
		// Write ended this goroutine (runtime.Goexit): its batch's
		// callers hear of it, and the queue goes on in another.
		for _, c := range batch {
			c.done <- outcome[R]{panicked: "groupcommit: Write did not return"}
		}
		go b.run(key)
	}()
	for {
		b.mu.Lock()
		queued := b.waiting[key]
		if len(queued) == 0 {
			delete(b.waiting, key)
			b.mu.Unlock()
			finished = true
			return
		}
		n := min(len(queued), max(b.MaxBatch, 1))
		batch = queued[:n:n]
		b.waiting[key] = queued[n:]
		b.mu.Unlock()
		items := make([]T, n)
		for i, c := range batch {
			items[i] = c.item
		}
		results, panicked := b.write(key, items)
		for i, c := range batch {
			if panicked != nil {
				c.done <- outcome[R]{panicked: panicked}
				continue
			}
			c.done <- outcome[R]{result: results[i]}
		}
		batch = nil
	}
}

// write runs Write, turning its panic, or an answer of the wrong length,
// into panicked.
func (b *Batcher[K, T, R]) write(key K, items []T) (results []R, panicked any) {
	defer func() {
		if p := recover(); p != nil {
			panicked = p
		}
	}()
	results = b.Write(key, items)
	if len(results) != len(items) {
		return nil, fmt.Sprintf("groupcommit: Write answered %d results for %d items", len(results), len(items))
	}
	return results, nil
}
