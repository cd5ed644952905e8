package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"

	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/sqlitestore"
	"gridweave.dev/joinkeys/storetest"
)

func open(t testing.TB, path string) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) joinkeys.Store {
		return open(t, filepath.Join(t.TempDir(), "joinkeys.db"))
	})
}

func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, func(b *testing.B) joinkeys.Store {
		return open(b, filepath.Join(b.TempDir(), "bench.db"))
	})
}
