package memstore_test

import (
	"testing"

	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/memstore"
	"gridweave.dev/joinkeys/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) joinkeys.Store { return new(memstore.Store) })
}

func BenchmarkStore(b *testing.B) {
	storetest.Benchmark(b, func(*testing.B) joinkeys.Store { return new(memstore.Store) })
}
