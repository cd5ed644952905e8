package wgmesh_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"testing"

	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"gridweave.dev/mesh"
	"gridweave.dev/mesh/meshtest"
	"gridweave.dev/mesh/wgmesh"
)

func peerN(b *testing.B, i int) mesh.Peer {
	ip := netip.AddrFrom4([4]byte{198, 19, byte(i >> 8), byte(i)})
	return mesh.Peer{PublicKey: meshtest.NewKey(b), AllowedIPs: []netip.Prefix{netip.PrefixFrom(ip, 32)}}
}

// BenchmarkUpsert changes one peer's allowed IPs on a real wireguard-go
// device that holds 1 or 1,000 peers: each iteration is one real
// ConfigureDevice of one peer.
func BenchmarkUpsert(b *testing.B) {
	for _, n := range []int{1, 1000} {
		b.Run(fmt.Sprintf("peers=%d", n), func(b *testing.B) {
			ctx := context.Background()
			dev := newDevice(b)
			m, err := wgmesh.New(ctx, dev.Name, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			var last mesh.Peer
			for i := range n {
				last = peerN(b, i+1)
				if err := m.UpsertPeer(ctx, last); err != nil {
					b.Fatal(err)
				}
			}
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

// BenchmarkReplacePeers is the alternative wgmesh avoids: programming the
// whole set of 1,000 peers with ReplacePeers for one change.
func BenchmarkReplacePeers(b *testing.B) {
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
