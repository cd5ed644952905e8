package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// openWithTable opens a store with a table t of one text column, for the
// writes of these tests.
func openWithTable(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.write.Exec(`CREATE TABLE t (v TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return s
}

// insert is a write that inserts v into t, then fails with err if err is
// not nil.
func insert(v string, err error) txWrite {
	return txWrite{ctx: context.Background(), fn: func(ctx context.Context, tx *sql.Tx) error {
		if _, e := tx.ExecContext(ctx, `INSERT INTO t (v) VALUES (?)`, v); e != nil {
			return e
		}
		return err
	}}
}

// values is what t holds, read as a reader would.
func values(t *testing.T, s *Store) []string {
	t.Helper()
	rows, err := s.read.Query(`SELECT v FROM t ORDER BY v`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	return got
}

// A write that fails in a batch undoes its own work and nothing else.
func TestBatchUndoesOnlyTheWriteThatFailed(t *testing.T) {
	s := openWithTable(t)
	refused := errors.New("refused")
	errs := s.commitBatch(struct{}{}, []txWrite{insert("a", nil), insert("b", refused), insert("c", nil)})
	if errs[0] != nil || !errors.Is(errs[1], refused) || errs[2] != nil {
		t.Fatalf("errors %v, want nil, refused, nil", errs)
	}
	if got := values(t, s); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("t holds %q, want a and c", got)
	}
}

// When SQLite loses the transaction (here a write rolls it back itself),
// the writes already run in it are told so, and the rest of the batch is
// written in a new one.
func TestBatchGoesOnAfterALostTransaction(t *testing.T) {
	s := openWithTable(t)
	rollsBack := txWrite{ctx: context.Background(), fn: func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `ROLLBACK`)
		return err
	}}
	errs := s.commitBatch(struct{}{}, []txWrite{insert("a", nil), rollsBack, insert("c", nil)})
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "rolled back") || errs[1] == nil || errs[2] != nil {
		t.Fatalf("errors %v, want a and the rollback failed, c written", errs)
	}
	if got := values(t, s); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("t holds %q, want c alone", got)
	}
}

// A caller that went away before its write's turn is answered its
// context's error, and its write does not run.
func TestBatchSkipsAWriteWhoseCallerLeft(t *testing.T) {
	s := openWithTable(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	left := insert("b", nil)
	left.ctx = ctx
	errs := s.commitBatch(struct{}{}, []txWrite{insert("a", nil), left, insert("c", nil)})
	if errs[0] != nil || !errors.Is(errs[1], context.Canceled) || errs[2] != nil {
		t.Fatalf("errors %v, want nil, canceled, nil", errs)
	}
	if got := values(t, s); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("t holds %q, want a and c", got)
	}
	if err := s.inTx(ctx, insert("d", nil).fn); !errors.Is(err, context.Canceled) {
		t.Fatalf("inTx with a cancelled context: %v", err)
	}
}

// Writers at once, some failing: each is answered its own outcome, and
// exactly the successful ones are written, once each.
func TestConcurrentWritesAreAnsweredTheirOwnOutcome(t *testing.T) {
	s := openWithTable(t)
	const writers = 200
	refused := errors.New("refused")
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Go(func() {
			var fail error
			if i%3 == 0 {
				fail = refused
			}
			errs[i] = s.inTx(context.Background(), insert(string(rune('A'+i%26))+strings.Repeat("x", i), fail).fn)
		})
	}
	wg.Wait()
	var want []string
	for i, err := range errs {
		if (i%3 == 0) != errors.Is(err, refused) || (i%3 != 0 && err != nil) {
			t.Fatalf("writer %d: %v", i, err)
		}
		if i%3 != 0 {
			want = append(want, string(rune('A'+i%26))+strings.Repeat("x", i))
		}
	}
	slices.Sort(want)
	if got := values(t, s); !slices.Equal(got, want) {
		t.Fatalf("t holds %d values, want %d", len(got), len(want))
	}
}
