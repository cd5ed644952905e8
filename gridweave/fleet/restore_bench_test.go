package fleet_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/internal/netnstest"
	"gridweave.dev/internal/wgdevice"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/memstore"
	"gridweave.dev/mesh/wgkey"
	"gridweave.dev/mesh/wgmesh"
)

// BenchmarkRestoreMesh10k is a master restarting with 10,000 registered
// nodes: RestoreMesh programs 10,000 WireGuard peers into a fresh
// userspace device (wireguard-go, through its UAPI socket) and 10,000
// pod-CIDR routes (/30s of 198.19.0.0/16, over netlink), inside a network
// namespace of its own. It reports the process's resident memory with the
// ledger and the fleet loaded (rss-MB). Needs root:
//
//	go test -run '^$' -bench RestoreMesh10k -benchtime 3x ./gridweave/fleet/
func BenchmarkRestoreMesh10k(b *testing.B) {
	netnstest.RequireRoot(b)
	const nodes = 10_000
	ctx := context.Background()
	ns := netnstest.New(b, "gwbr")
	pool, err := joinkeys.NewPool(netip.MustParsePrefix("198.18.0.0/18"), netip.MustParseAddr("198.18.0.1"))
	if err != nil {
		b.Fatal(err)
	}
	ledger, err := joinkeys.New(new(memstore.Store), &joinkeys.Options{JWTSecret: []byte("a-jwt-secret-of-at-least-32-bytes"), Pool: pool})
	if err != nil {
		b.Fatal(err)
	}
	key, err := ledger.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "bench", TTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	cidrs := netip.MustParsePrefix("198.19.0.0/16").Addr()
	for i := range nodes {
		_, pub, _ := wgkey.GeneratePair()
		host := fmt.Sprintf("node-%05d", i)
		res, err := ledger.Join(ctx, joinkeys.JoinRequest{Key: key.Secret, Hostname: host, PublicKey: pub.String(), Version: "1.4.0"})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ledger.Register(ctx, joinkeys.Registration{NodeToken: res.NodeToken, Hostname: host, Version: "1.4.0"}); err != nil {
			b.Fatal(err)
		}
		if _, err := ledger.SetNodePodCIDR(ctx, host, netip.PrefixFrom(cidrs, 30)); err != nil {
			b.Fatal(err)
		}
		for range 4 {
			cidrs = cidrs.Next()
		}
	}
	dev := wgdevice.Start(b, ns, "gwr", 0)
	dev.Up(b, ns, "198.18.0.1/18")
	runtime.GC()
	rss := rssMB(b)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		dev.Restart(b) // a reboot: an empty device, its routes gone with it
		dev.Up(b, ns, "198.18.0.1/18")
		peers, err := wgmesh.New(ctx, dev.Name, nil)
		if err != nil {
			b.Fatal(err)
		}
		svc, err := fleet.New(testConfig(), fleet.Backends{Ledger: ledger, Peers: peers, Routes: fleet.DeviceRoutes{Interface: dev.Name}})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		// Routes are the namespace's: the whole restore runs on a thread
		// inside it (wgctrl's UAPI socket works from anywhere).
		if err := ns.Do(func() error { return svc.RestoreMesh(ctx) }); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		all, err := peers.Peers(ctx)
		if err != nil || len(all) != nodes {
			b.Fatalf("%d peers after the restore, want %d: %v", len(all), nodes, err)
		}
		out, err := ns.Command("ip", "route", "show", "dev", dev.Name).Output()
		if routes := strings.Count(string(out), "198.19."); err != nil || routes != nodes {
			b.Fatalf("%d pod-CIDR routes after the restore, want %d: %v", routes, nodes, err)
		}
		peers.Close()
		b.StartTimer()
	}
	b.ReportMetric(rss, "rss-MB")
}

// rssMB is this process's resident memory in MB.
func rssMB(b *testing.B) float64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return float64(kb) / 1024
		}
	}
	return 0
}
