package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
	return write(func(ctx context.Context, tx *sql.Tx) error {
		if _, e := tx.ExecContext(ctx, `INSERT INTO t (v) VALUES (?)`, v); e != nil {
			return e
		}
		return err
	})
}

// write is a queued write of fn for a caller that waits.
func write(fn func(ctx context.Context, tx *sql.Tx) error) txWrite {
	return txWrite{ctx: context.Background(), fn: fn, state: new(atomic.Int32)}
}

// errs are the errors of results; a panic fails the test.
func errs(t *testing.T, results []txResult) []error {
	t.Helper()
	var out []error
	for i, r := range results {
		if r.panicked != nil {
			t.Fatalf("write %d panicked: %v", i, r.panicked)
		}
		out = append(out, r.err)
	}
	return out
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
	errs := errs(t, s.commitBatch(struct{}{}, []txWrite{insert("a", nil), insert("b", refused), insert("c", nil)}))
	if errs[0] != nil || !errors.Is(errs[1], refused) || errs[2] != nil {
		t.Fatalf("errors %v, want nil, refused, nil", errs)
	}
	if got := values(t, s); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("t holds %q, want a and c", got)
	}
}

// When SQLite loses the shared transaction, every write of it runs again
// alone, so each is answered what it alone comes to. Here one write rolls
// the transaction back itself, then either fails (its savepoint is gone)
// or succeeds (the release finds no savepoint).
func TestALostTransactionsWritesRunAgainAlone(t *testing.T) {
	for _, failing := range []bool{true, false} {
		t.Run(map[bool]string{true: "the write fails", false: "the write succeeds"}[failing], func(t *testing.T) {
			s := openWithTable(t)
			rollsBack := write(func(ctx context.Context, tx *sql.Tx) error {
				if _, err := tx.ExecContext(ctx, `ROLLBACK`); err != nil {
					return err
				}
				if failing {
					return errors.New("failed after its rollback")
				}
				return nil
			})
			errs := errs(t, s.commitBatch(struct{}{}, []txWrite{insert("a", nil), rollsBack, insert("c", nil)}))
			if errs[0] != nil || errs[1] == nil || !strings.Contains(errs[1].Error(), "rolled back") || errs[2] != nil {
				t.Fatalf("errors %v, want nil, rolled back, nil", errs)
			}
			if got := values(t, s); !slices.Equal(got, []string{"a", "c"}) {
				t.Fatalf("t holds %q, want a and c", got)
			}
		})
	}
}

// A commit that fails (a deferred foreign key) loses the transaction: the
// writes run again alone, and a write refused because of another's work
// in the lost transaction is answered what it alone comes to. Here the
// first write takes x and leaves an orphan the commit refuses; the second
// write, refused x in the batch, gets it alone.
func TestAFailedCommitsWritesRunAgainAlone(t *testing.T) {
	s := openWithTable(t)
	if _, err := s.write.Exec(`CREATE UNIQUE INDEX t_v ON t (v);
		CREATE TABLE parent (id INTEGER PRIMARY KEY);
		CREATE TABLE child (parent INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)`); err != nil {
		t.Fatal(err)
	}
	takesXAndLeavesAnOrphan := write(func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO t (v) VALUES ('x')`); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO child (parent) VALUES (42)`)
		return err
	})
	errs := errs(t, s.commitBatch(struct{}{}, []txWrite{takesXAndLeavesAnOrphan, insert("x", nil), insert("y", nil)}))
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "FOREIGN KEY") || errs[1] != nil || errs[2] != nil {
		t.Fatalf("errors %v, want foreign key, nil, nil", errs)
	}
	if got := values(t, s); !slices.Equal(got, []string{"x", "y"}) {
		t.Fatalf("t holds %q, want x and y", got)
	}
	var children int
	if err := s.read.QueryRow(`SELECT count(*) FROM child`).Scan(&children); err != nil || children != 0 {
		t.Fatalf("child holds %d rows (%v), want none", children, err)
	}
}

// A write that ends its goroutine (runtime.Goexit) leaves the writer
// usable: its transaction is rolled back.
func TestAWriteThatNeverReturnsFreesTheWriter(t *testing.T) {
	s := openWithTable(t)
	exits := write(func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO t (v) VALUES ('a')`); err != nil {
			return err
		}
		runtime.Goexit()
		return nil
	})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		s.commitBatch(struct{}{}, []txWrite{exits})
	}()
	<-ended
	after := make(chan error, 1)
	go func() { after <- s.inTx(context.Background(), insert("b", nil).fn) }()
	if err := within(t, after, "the next write still waits for the writer", nil); err != nil {
		t.Fatal(err)
	}
	if got := values(t, s); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("t holds %q, want b alone", got)
	}
}

// Callers leaving at any moment, before or while their writes run: a
// caller answered nil finds its row written, any other finds it absent.
func TestCallersLeavingAtAnyMoment(t *testing.T) {
	s := openWithTable(t)
	const writers = 300
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				for range i % 7 {
					runtime.Gosched()
				}
				cancel()
			}()
			errs[i] = s.inTx(ctx, insert(fmt.Sprintf("%03d", i), nil).fn)
		})
	}
	wg.Wait()
	written := map[string]bool{}
	for _, v := range values(t, s) {
		written[v] = true
	}
	answeredNil := 0
	for i, err := range errs {
		v := fmt.Sprintf("%03d", i)
		if (err == nil) != written[v] {
			t.Fatalf("writer %d was answered %v, yet its row written is %v", i, err, written[v])
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("writer %d: %v", i, err)
		}
		if err == nil {
			answeredNil++
		}
	}
	t.Logf("%d of %d writes ran before their callers left", answeredNil, writers)
}

// A write that panics undoes its own work; the panic is its caller's
// alone, and the rest of the batch is written.
func TestAPanicIsItsOwnCallers(t *testing.T) {
	s := openWithTable(t)
	panics := write(func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO t (v) VALUES ('b')`); err != nil {
			return err
		}
		panic("a bug")
	})
	results := s.commitBatch(struct{}{}, []txWrite{insert("a", nil), panics, insert("c", nil)})
	if results[0] != (txResult{}) || results[1].panicked != "a bug" || results[2] != (txResult{}) {
		t.Fatalf("results %+v, want ok, the panic, ok", results)
	}
	if got := values(t, s); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("t holds %q, want a and c", got)
	}
	defer func() {
		if p := recover(); p != "a bug" {
			t.Fatalf("inTx of a panicking write: recovered %v", p)
		}
	}()
	_ = s.inTx(context.Background(), panics.fn)
}

// A caller that left before its write's turn is answered its context's
// error, and its write does not run.
func TestBatchSkipsAWriteWhoseCallerLeft(t *testing.T) {
	s := openWithTable(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	left := insert("b", nil)
	left.ctx = ctx
	errs := errs(t, s.commitBatch(struct{}{}, []txWrite{insert("a", nil), left, insert("c", nil)}))
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

// A caller waiting behind another write stops waiting when its context
// ends, and its write never runs.
func TestAWaitingCallerCanLeave(t *testing.T) {
	s := openWithTable(t)
	running, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- s.inTx(context.Background(), func(ctx context.Context, tx *sql.Tx) error {
			close(running)
			<-release
			_, err := tx.ExecContext(ctx, `INSERT INTO t (v) VALUES ('a')`)
			return err
		})
	}()
	<-running
	parent, cancel := context.WithCancel(context.Background())
	ctx := &watchedContext{Context: parent, waiting: make(chan struct{})}
	second := make(chan error, 1)
	go func() { second <- s.inTx(ctx, insert("b", nil).fn) }()
	within(t, ctx.waiting, "the caller does not wait on its context", func() { close(release) })
	cancel()
	// While the first still holds the writer:
	err := within(t, second, "the caller still waits for the writer after its context ended", func() { close(release) })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("the waiting caller: %v", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := s.inTx(context.Background(), insert("c", nil).fn); err != nil {
		t.Fatal(err)
	}
	if got := values(t, s); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("t holds %q, want a and c", got)
	}
}

// within returns what ch brings, or fails the test (calling release
// first, if set, to free what holds the store) when nothing comes within
// ten seconds: a hang becomes a failure naming what still waits.
func within[T any](t *testing.T, ch <-chan T, stillWaiting string, release func()) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		if release != nil {
			release()
		}
		t.Fatal(stillWaiting)
	}
	var none T
	return none
}

// watchedContext closes waiting when its Done is first asked for: a
// caller waits on it.
type watchedContext struct {
	context.Context
	once    sync.Once
	waiting chan struct{}
}

func (c *watchedContext) Done() <-chan struct{} {
	c.once.Do(func() { close(c.waiting) })
	return c.Context.Done()
}

// A write's statements run on a context that is never cancelled: a caller
// that leaves once its write started is still answered its outcome, and
// the write is whole.
func TestAStartedWriteRunsToItsEnd(t *testing.T) {
	s := openWithTable(t)
	ctx, cancel := context.WithCancel(context.Background())
	err := s.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		cancel()
		for _, v := range []string{"a", "b"} {
			if _, err := tx.ExecContext(ctx, `INSERT INTO t (v) VALUES (?)`, v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("a write whose caller left once it started: %v", err)
	}
	if got := values(t, s); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("t holds %q, want a and b", got)
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
	value := func(i int) string { return fmt.Sprintf("%03d", i) }
	for i := range writers {
		wg.Go(func() {
			var fail error
			if i%3 == 0 {
				fail = refused
			}
			errs[i] = s.inTx(context.Background(), insert(value(i), fail).fn)
		})
	}
	wg.Wait()
	var want []string
	for i, err := range errs {
		if (i%3 == 0) != errors.Is(err, refused) || (i%3 != 0 && err != nil) {
			t.Fatalf("writer %d: %v", i, err)
		}
		if i%3 != 0 {
			want = append(want, value(i))
		}
	}
	if got := values(t, s); !slices.Equal(got, want) {
		t.Fatalf("t holds %d values, want %d", len(got), len(want))
	}
}
