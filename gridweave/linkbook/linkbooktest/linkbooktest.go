package linkbooktest

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/gridweave/linkbook"
)

func report(n int) linkbook.Report {
	at := time.Date(2026, 12, 5, 12, 0, n, 0, time.UTC)
	return linkbook.Report{
		At:         at,
		ListenPort: 51820 + n,
		Endpoints:  []netip.AddrPort{netip.MustParseAddrPort(fmt.Sprintf("203.0.113.%d:51820", n+1))},
		Links:      []api.Link{{Hostname: "peer", PublicKey: "key", State: api.LinkDirect, Endpoint: "203.0.113.9:51820", RxBytes: int64(n)}},
		Counts:     api.LinkCounts{Direct: 1, ReportedAt: at},
		NAT:        api.NATEndpointIndependent,
	}
}

func same(a, b linkbook.Report) bool {
	return a.At.Equal(b.At) && a.ListenPort == b.ListenPort && fmt.Sprint(a.Endpoints) == fmt.Sprint(b.Endpoints) && a.NAT == b.NAT &&
		fmt.Sprint(a.Links) == fmt.Sprint(b.Links) && a.Counts.Direct == b.Counts.Direct && a.Counts.ReportedAt.Equal(b.Counts.ReportedAt)
}

// Run checks the Book newBook returns.
func Run(t *testing.T, newBook func(t *testing.T) linkbook.Book) {
	ctx := context.Background()
	t.Run("PutGetAll", func(t *testing.T) {
		b := newBook(t)
		if _, ok, err := b.Get(ctx, "gpu-1"); err != nil || ok {
			t.Fatalf("an empty book has gpu-1: %v %v", ok, err)
		}
		if err := b.Put(ctx, "gpu-1", report(1)); err != nil {
			t.Fatal(err)
		}
		if err := b.Put(ctx, "gpu-2", report(2)); err != nil {
			t.Fatal(err)
		}
		if err := b.Put(ctx, "gpu-1", report(3)); err != nil { // replaces
			t.Fatal(err)
		}
		got, ok, err := b.Get(ctx, "gpu-1")
		if err != nil || !ok || !same(got, report(3)) {
			t.Errorf("gpu-1: %+v %v %v; want the last report", got, ok, err)
		}
		all, err := b.All(ctx)
		if err != nil || len(all) != 2 || !same(all["gpu-2"], report(2)) || !same(all["gpu-1"], report(3)) {
			t.Errorf("all: %v %v", all, err)
		}
	})
	t.Run("Keep", func(t *testing.T) {
		b := newBook(t)
		for i, h := range []string{"gpu-1", "gpu-2", "gpu-3"} {
			if err := b.Put(ctx, h, report(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Keep(ctx, map[string]bool{"gpu-2": true, "elsewhere": true}); err != nil {
			t.Fatal(err)
		}
		all, err := b.All(ctx)
		if err != nil || len(all) != 1 || !same(all["gpu-2"], report(1)) {
			t.Errorf("after Keep(gpu-2): %v %v", all, err)
		}
		if _, ok, _ := b.Get(ctx, "gpu-1"); ok {
			t.Error("gpu-1 was kept")
		}
	})
	t.Run("Concurrent", func(t *testing.T) {
		b := newBook(t)
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				for j := range 20 {
					if err := b.Put(ctx, fmt.Sprintf("gpu-%d", i), report(j)); err != nil {
						t.Error(err)
						return
					}
					if _, err := b.All(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		all, err := b.All(ctx)
		if err != nil || len(all) != 16 {
			t.Fatalf("%d reports, %v; want 16", len(all), err)
		}
		for h, r := range all {
			if !same(r, report(19)) {
				t.Errorf("%s: %+v, want its last report", h, r)
			}
		}
	})
}
