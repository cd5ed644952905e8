package groupcommit

import "sync"

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
	done chan R
}

// Do queues item under key and returns its result once the batch that
// carries it is written. It always waits for that write: a caller that
// went away would not learn what became of its item.
func (b *Batcher[K, T, R]) Do(key K, item T) R {
	done := make(chan R, 1)
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
	return <-done
}

// run writes key's batches until its queue is empty.
func (b *Batcher[K, T, R]) run(key K) {
	for {
		b.mu.Lock()
		queued := b.waiting[key]
		if len(queued) == 0 {
			delete(b.waiting, key)
			b.mu.Unlock()
			return
		}
		n := min(len(queued), max(b.MaxBatch, 1))
		batch := queued[:n:n]
		b.waiting[key] = queued[n:]
		b.mu.Unlock()
		items := make([]T, n)
		for i, c := range batch {
			items[i] = c.item
		}
		results := b.Write(key, items)
		for i, c := range batch {
			var r R
			if i < len(results) {
				r = results[i]
			}
			c.done <- r
		}
	}
}
