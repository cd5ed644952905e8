package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
)

// maxWriteBatch bounds how many writes share one transaction.
const maxWriteBatch = 64

// txWrite is one write of the store: fn, for a caller whose context is
// ctx.
type txWrite struct {
	ctx context.Context
	fn  func(ctx context.Context, tx *sql.Tx) error
}

// inTx runs fn in a write transaction (BEGIN IMMEDIATE) and returns once
// its work is committed, or undone if fn failed.
//
// Writes that queue while another commits share one transaction (group
// commit): each runs in a savepoint of its own, so one that fails undoes
// only its own work, and the batch commits once, which with SyncFull is
// one sync of the log for all of them. Each caller is answered only after
// that commit, so an acknowledged write is as durable as before, and
// writes are applied in the order they queued, as one writer would.
//
// fn gets a context that is never cancelled: a write that started runs to
// its end, because cancelling a statement (sqlite3_interrupt) may roll
// back the whole transaction, with the other writes of its batch. A
// caller whose ctx is done before its turn is answered ctx's error and
// its fn does not run.
func (s *Store) inTx(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.writes.Do(struct{}{}, txWrite{ctx: ctx, fn: fn})
}

// commitBatch is the store's groupcommit.Batcher Write: it runs batch's
// writes in as few transactions as it can and returns each one's error.
func (s *Store) commitBatch(_ struct{}, batch []txWrite) []error {
	errs := make([]error, len(batch))
	for next := 0; next < len(batch); {
		next = s.commitFrom(batch, errs, next)
	}
	return errs
}

// commitFrom runs batch[from:] in one transaction and commits it, setting
// errs for the writes it ran, and returns the index of the first write it
// did not run. It stops early when SQLite lost the transaction (it rolls
// one back by itself after some errors, such as a full disk): the writes
// already run in it are answered that error, and the rest go on in a new
// transaction.
func (s *Store) commitFrom(batch []txWrite, errs []error, from int) (next int) {
	tx, err := s.write.BeginTx(context.Background(), nil)
	if err != nil {
		for i := from; i < len(batch); i++ {
			errs[i] = err
		}
		return len(batch)
	}
	committed := false
	defer func() {
		if !committed {
			_ = tx.Rollback() // also when a write panics
		}
	}()
	// lost answers err to the writes that succeeded in this transaction.
	lost := func(upTo int, err error) {
		for i := from; i < upTo; i++ {
			if errs[i] == nil {
				errs[i] = fmt.Errorf("sqlitestore: the transaction was rolled back: %w", err)
			}
		}
	}
	next = len(batch)
	for i := from; i < len(batch); i++ {
		w := batch[i]
		if err := w.ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		if _, err := tx.Exec(`SAVEPOINT write`); err != nil {
			if i == from {
				errs[i] = err // not even a savepoint: this write fails alone
				next = i + 1
			} else {
				lost(i, err)
				next = i
			}
			return next
		}
		errs[i] = w.fn(context.WithoutCancel(w.ctx), tx)
		if errs[i] != nil {
			if _, err := tx.Exec(`ROLLBACK TO write`); err != nil {
				lost(i, err)
				return i + 1
			}
		}
		if _, err := tx.Exec(`RELEASE write`); err != nil {
			lost(i+1, err)
			return i + 1
		}
	}
	committed = true
	if err := tx.Commit(); err != nil {
		lost(len(batch), err)
	}
	return next
}
