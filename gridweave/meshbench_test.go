package gridweave_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"gridweave.dev/gridweave"
	"gridweave.dev/internal/netnstest"
	"gridweave.dev/internal/wgdevice"
	"gridweave.dev/mesh/wgmesh"
)

// BenchmarkJoinOnAWireGuardDevice is BenchmarkJoin's CPU join (validate +
// register over HTTP) with the service's mesh a real wireguard-go device
// (in a network namespace) that already holds 1 or 1,000 peers, each put
// there by a join through the service: the mesh programming a join costs
// must not grow with the peers (within 1.5x from 1 to 1,000).
//
//	go test -run '^$' -bench BenchmarkJoinOnAWireGuardDevice -benchmem ./gridweave/
func BenchmarkJoinOnAWireGuardDevice(b *testing.B) {
	if testing.Short() || os.Geteuid() != 0 {
		b.Skip("a real wireguard-go device in a network namespace: run as root, without -short")
	}
	for _, existing := range []int{1, 1000} {
		b.Run(fmt.Sprintf("peers=%d", existing), func(b *testing.B) {
			ctx := context.Background()
			dev := wgdevice.Start(b, netnstest.New(b, "gwbm"), "gwbm", 0)
			m, err := wgmesh.New(ctx, dev.Name, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { m.Close() })
			h := newHarness(b, &harnessOptions{mesh: m, config: func(c *gridweave.Config) { c.RateLimitPerMinute = 1 << 30 }})
			_, key := h.mint("org")
			join := func(hostname string) {
				n := newNode(b, hostname)
				if r := h.validate(n, key); r.status != 200 {
					b.Fatalf("validate: %d %s", r.status, r.raw)
				}
				if r := h.register(n, nil); r.status != 200 {
					b.Fatalf("register: %d %s", r.status, r.raw)
				}
			}
			for i := range existing {
				join(fmt.Sprintf("pre-%05d", i))
			}
			if peers, _ := m.Peers(ctx); len(peers) != existing {
				b.Fatalf("the device holds %d peers, want %d", len(peers), existing)
			}
			i := 0
			for b.Loop() {
				join(fmt.Sprintf("new-%06d", i))
				i++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "joins/s")
		})
	}
}
