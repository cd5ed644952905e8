package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gridweave.dev/joinkeys"
)

// Benchmark measures a store through a Keyring: reserving a node with 100
// and with 10,000 nodes already in the ledger, and checking an org key and
// a provider key. newStore returns a new, empty store; Benchmark closes it.
func Benchmark(b *testing.B, newStore func(b *testing.B) joinkeys.Store) {
	setup := func(b *testing.B) (*joinkeys.Keyring, joinkeys.Store) {
		store := newStore(b)
		b.Cleanup(func() { store.Close() })
		kr, err := joinkeys.New(store, &joinkeys.Options{JWTSecret: Secret, Pool: joinkeys.MustPool("198.18.0.0/15", "198.18.0.1")})
		if err != nil {
			b.Fatal(err)
		}
		return kr, store
	}
	for _, existing := range []int{100, 10000} {
		b.Run(fmt.Sprintf("Reserve/existing=%d", existing), func(b *testing.B) {
			ctx := context.Background()
			kr, _ := setup(b)
			m := mint(b, kr, joinkeys.MintRequest{})
			for i := range existing {
				if _, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: fmt.Sprintf("pre-%d", i), PublicKey: PublicKey(b)}); err != nil {
					b.Fatal(err)
				}
			}
			// Released nodes free their public keys too, so a pool of keys
			// cycles without paying for key generation in the loop. Every
			// len(keys) reservations the ledger is brought back to its
			// size, with the timer stopped (rarely: stopping it is costly).
			keys := make([]string, 256)
			for i := range keys {
				keys[i] = PublicKey(b)
			}
			var held []string
			i := 0
			b.ResetTimer()
			for b.Loop() {
				if len(held) == len(keys) {
					b.StopTimer()
					for _, host := range held {
						if _, err := kr.Release(ctx, host, "bench"); err != nil {
							b.Fatal(err)
						}
					}
					held = held[:0]
					b.StartTimer()
				}
				host := fmt.Sprintf("bench-%d", i)
				if _, err := kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: host, PublicKey: keys[len(held)]}); err != nil {
					b.Fatal(err)
				}
				held = append(held, host)
				i++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reservations/s")
		})
	}
	b.Run("CheckOrgKey", func(b *testing.B) {
		ctx := context.Background()
		kr, _ := setup(b)
		m := mint(b, kr, joinkeys.MintRequest{})
		for b.Loop() {
			if _, err := kr.Check(ctx, m.Secret); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("VerifyProviderKey", func(b *testing.B) {
		ctx := context.Background()
		kr, _ := setup(b)
		m := mint(b, kr, joinkeys.MintRequest{Kind: joinkeys.KindProvider, Provider: "p", TTL: 24 * time.Hour})
		for b.Loop() {
			if _, err := kr.VerifyProvider(ctx, m.Secret); err != nil {
				b.Fatal(err)
			}
		}
	})
}
