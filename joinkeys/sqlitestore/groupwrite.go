package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
)

// maxWriteBatch bounds how many writes share one transaction.
const maxWriteBatch = 64

// txWrite is one write of the store: fn, for a caller whose context is
// ctx.
type txWrite struct {
	ctx context.Context
	fn  func(ctx context.Context, tx *sql.Tx) error
	// state is queued until the write starts or its caller abandons it;
	// whichever comes first wins, so a write is never both.
	state *atomic.Int32
}

// A txWrite's states.
const (
	queued int32 = iota
	started
	abandoned
)

// claim says whether w is to run now: it starts it unless its caller left
// first. A write that started already (its transaction was lost) runs
// again.
func (w txWrite) claim() bool {
	if w.ctx.Err() != nil {
		w.state.CompareAndSwap(queued, abandoned)
	}
	return w.state.CompareAndSwap(queued, started) || w.state.Load() == started
}

// txResult is what a write came to: its error, or the panic of its fn.
type txResult struct {
	err      error
	panicked any
}

func (r txResult) ok() bool { return r.err == nil && r.panicked == nil }

// inTx runs fn in a write transaction (BEGIN IMMEDIATE) and returns once
// its work is committed, or undone if fn failed.
//
// Writes that queue while another commits share one transaction (group
// commit): each runs in a savepoint of its own, so one that fails (or
// panics) undoes only its own work, and the batch commits once, which
// with SyncFull is one sync of the log for all of them. Each caller is
// answered only after that commit, so an acknowledged write is as durable
// as before, and writes are applied in the order they queued, as one
// writer would. If SQLite loses the shared transaction (it rolls one back
// by itself after some errors, such as a full disk, and a commit can
// fail), its writes run again, each in a transaction of its own, so each
// is answered what it alone came to.
//
// fn may run more than once, as said, and must keep no state between
// runs. It gets a context that is never cancelled: a write that started
// runs to its end, because cancelling a statement (sqlite3_interrupt) may
// roll back the whole transaction, with the other writes of its batch.
// A caller whose ctx is done before its write starts is answered ctx's
// error at once, and its write never runs.
func (s *Store) inTx(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	w := txWrite{ctx: ctx, fn: fn, state: new(atomic.Int32)}
	done := make(chan txResult, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil { // the batcher's own failure
				done <- txResult{panicked: p}
			}
		}()
		done <- s.writes.Do(struct{}{}, w)
	}()
	var r txResult
	select {
	case r = <-done:
	case <-ctx.Done():
		if w.state.CompareAndSwap(queued, abandoned) {
			return ctx.Err()
		}
		r = <-done // it started: its outcome is known only at its commit
	}
	if r.panicked != nil {
		panic(r.panicked)
	}
	return r.err
}

// commitBatch is the store's groupcommit.Batcher Write: it runs batch's
// writes in one transaction, or each in its own if that one is lost, and
// returns each one's outcome.
func (s *Store) commitBatch(_ struct{}, batch []txWrite) []txResult {
	results := make([]txResult, len(batch))
	if s.commitTogether(batch, results) && len(batch) > 1 {
		for i := range batch {
			results[i] = txResult{}
			s.commitTogether(batch[i:i+1], results[i:i+1])
		}
	}
	return results
}

// commitTogether runs writes in one transaction and commits it, setting
// results, and says whether SQLite lost the transaction after a write had
// run in it (then none of them was written, and results say so).
func (s *Store) commitTogether(writes []txWrite, results []txResult) (lost bool) {
	tx, err := s.write.BeginTx(context.Background(), nil)
	if err != nil {
		for i := range writes {
			results[i].err = err
		}
		return false
	}
	done := false // committed or rolled back
	defer func() {
		if !done { // a write ended its goroutine (runtime.Goexit)
			_ = tx.Rollback()
		}
	}()
	// loseAll answers every write that ran that the transaction was
	// lost, keeping a write's own error beside it.
	loseAll := func(cause error) bool {
		_ = tx.Rollback()
		done = true
		for i := range writes {
			if results[i].panicked == nil && !errors.Is(results[i].err, errNotRun) {
				results[i].err = errors.Join(results[i].err,
					fmt.Errorf("sqlitestore: the transaction was rolled back: %w", cause))
			}
		}
		return true
	}
	for i, w := range writes {
		if !w.claim() {
			results[i].err = fmt.Errorf("%w: %w", errNotRun, w.ctx.Err())
			continue
		}
		if _, err := tx.Exec(`SAVEPOINT write`); err != nil {
			return loseAll(err)
		}
		results[i] = runWrite(w, tx)
		if !results[i].ok() {
			if _, err := tx.Exec(`ROLLBACK TO write`); err != nil {
				return loseAll(err)
			}
		}
		if _, err := tx.Exec(`RELEASE write`); err != nil {
			return loseAll(err)
		}
	}
	done = true
	if err := tx.Commit(); err != nil { // the driver rolls back
		for i := range writes {
			if results[i].ok() {
				results[i].err = fmt.Errorf("sqlitestore: the commit failed: %w", err)
			}
		}
		return true
	}
	return false
}

// errNotRun marks the answer of a write that was not run because its
// caller left.
var errNotRun = errors.New("sqlitestore: the write did not run")

// runWrite runs w's fn in tx, turning its panic into a result.
func runWrite(w txWrite, tx *sql.Tx) (r txResult) {
	defer func() {
		if p := recover(); p != nil {
			r = txResult{panicked: p}
		}
	}()
	return txResult{err: w.fn(context.WithoutCancel(w.ctx), tx)}
}
