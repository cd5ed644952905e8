package wgmesh_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"

	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"gridweave.dev/mesh"
	"gridweave.dev/mesh/meshtest"
	"gridweave.dev/mesh/wgmesh"
)

// skipWithoutRealDevices skips a benchmark under -short, like the tests,
// and without root (go test -bench on a workstation).
func skipWithoutRealDevices(b *testing.B) {
	b.Helper()
	skipShort(b)
	if os.Geteuid() != 0 {
		b.Skip("real wireguard-go devices in network namespaces need root")
	}
}

// meshWithPeers returns a Mesh over a new device holding n peers, and the
// last peer added.
func meshWithPeers(b *testing.B, n int) (*wgmesh.Mesh, mesh.Peer) {
	b.Helper()
	ctx := context.Background()
	dev := newDevice(b)
	m, err := wgmesh.New(ctx, dev.Name, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	var last mesh.Peer
	for i := range n {
		last = peerN(b, i+1)
		if err := m.UpsertPeer(ctx, last); err != nil {
			b.Fatal(err)
		}
	}
	return m, last
}

func peerN(b *testing.B, i int) mesh.Peer {
	ip := netip.AddrFrom4([4]byte{198, 19, byte(i >> 8), byte(i)})
	return mesh.Peer{PublicKey: meshtest.NewKey(b), AllowedIPs: []netip.Prefix{netip.PrefixFrom(ip, 32)}}
}

// BenchmarkUpsert changes one peer's allowed IPs on a real wireguard-go
// device that holds 1 or 1,000 peers: each iteration is one real
// ConfigureDevice of one peer, with the check for a restarted device and
// the overlap check.
func BenchmarkUpsert(b *testing.B) {
	skipWithoutRealDevices(b)
	for _, n := range []int{1, 1000} {
		b.Run(fmt.Sprintf("peers=%d", n), func(b *testing.B) {
			ctx := context.Background()
			m, last := meshWithPeers(b, n)
			alt := []netip.Prefix{netip.MustParsePrefix("198.18.200.0/24")}
			orig := last.AllowedIPs
			i := 0
			for b.Loop() {
				if i%2 == 0 {
					last.AllowedIPs = alt
				} else {
					last.AllowedIPs = orig
				}
				i++
				if err := m.UpsertPeer(ctx, last); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkUpsertUnchanged repeats an upsert that changes nothing, as a
// node joining again does, on 1,000 peers: no device write, so this is
// what every call pays to trust its cache (the restart check and the
// overlap check).
func BenchmarkUpsertUnchanged(b *testing.B) {
	skipWithoutRealDevices(b)
	ctx := context.Background()
	m, last := meshWithPeers(b, 1000)
	for b.Loop() {
		if err := m.UpsertPeer(ctx, last); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkResync reads back a device of 1,000 peers: what a call pays
// once per ResyncInterval, and what a check of the whole device on every
// call would cost.
func BenchmarkResync(b *testing.B) {
	skipWithoutRealDevices(b)
	ctx := context.Background()
	m, _ := meshWithPeers(b, 1000)
	for b.Loop() {
		if err := m.Resync(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReplacePeers is the alternative wgmesh avoids: programming the
// whole set of 1,000 peers with ReplacePeers for one change.
func BenchmarkReplacePeers(b *testing.B) {
	skipWithoutRealDevices(b)
	dev := newDevice(b)
	client, err := wgctrl.New()
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	peers := make([]wgtypes.PeerConfig, 1000)
	for i := range peers {
		p := peerN(b, i+1)
		peers[i] = wgtypes.PeerConfig{PublicKey: wgtypes.Key(p.PublicKey), ReplaceAllowedIPs: true, AllowedIPs: toNets(p.AllowedIPs)}
	}
	for b.Loop() {
		if err := client.ConfigureDevice(dev.Name, wgtypes.Config{ReplacePeers: true, Peers: peers}); err != nil {
			b.Fatal(err)
		}
	}
}

func toNets(ps []netip.Prefix) []net.IPNet {
	out := make([]net.IPNet, len(ps))
	for i, p := range ps {
		out[i] = net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), 32)}
	}
	return out
}
