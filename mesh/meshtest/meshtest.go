package meshtest

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"gridweave.dev/mesh"
	"gridweave.dev/wgkey"
)

// Run runs the conformance suite. newMesh returns a Mesh over a device with
// no peers for each subtest; Run closes it.
func Run(t *testing.T, newMesh func(t *testing.T) mesh.Mesh) {
	open := func(t *testing.T) mesh.Mesh {
		m := newMesh(t)
		t.Cleanup(func() { m.Close() })
		return m
	}
	ctx := context.Background()

	t.Run("PublicKeyIsStable", func(t *testing.T) {
		m := open(t)
		a, err := m.PublicKey(ctx)
		if err != nil || a.IsZero() {
			t.Fatalf("PublicKey = %v, %v", a, err)
		}
		if b, _ := m.PublicKey(ctx); b != a {
			t.Fatalf("PublicKey changed: %v then %v", a, b)
		}
	})

	t.Run("UpsertListsNormalizedPeer", func(t *testing.T) {
		m := open(t)
		p := mesh.Peer{
			PublicKey:           NewKey(t),
			AllowedIPs:          []netip.Prefix{pfx("198.18.64.0/24"), pfx("198.19.0.2/32"), pfx("198.18.64.0/24")},
			Endpoint:            netip.MustParseAddrPort("198.18.200.2:51820"),
			PersistentKeepalive: 25 * time.Second,
		}
		mustUpsert(t, m, p)
		want := p
		want.AllowedIPs = []netip.Prefix{pfx("198.18.64.0/24"), pfx("198.19.0.2/32")}
		expectPeers(t, m, want)
	})

	t.Run("UpsertReplacesAllowedIPsAndKeepalive", func(t *testing.T) {
		m := open(t)
		key := NewKey(t)
		ep := netip.MustParseAddrPort("198.18.200.3:51820")
		mustUpsert(t, m, mesh.Peer{PublicKey: key, AllowedIPs: []netip.Prefix{pfx("198.19.0.3/32")}, Endpoint: ep, PersistentKeepalive: 25 * time.Second})
		// No endpoint given: the current one stays. Keepalive 0 turns it off.
		mustUpsert(t, m, mesh.Peer{PublicKey: key, AllowedIPs: []netip.Prefix{pfx("198.19.0.4/32"), pfx("198.18.65.0/24")}})
		expectPeers(t, m, mesh.Peer{PublicKey: key, AllowedIPs: []netip.Prefix{pfx("198.18.65.0/24"), pfx("198.19.0.4/32")}, Endpoint: ep})
		// The old address is free for another peer now.
		other := NewKey(t)
		mustUpsert(t, m, mesh.Peer{PublicKey: other, AllowedIPs: []netip.Prefix{pfx("198.19.0.3/32")}})
		// Identical upsert: no change, no error.
		mustUpsert(t, m, mesh.Peer{PublicKey: other, AllowedIPs: []netip.Prefix{pfx("198.19.0.3/32")}})
		if peers, _ := m.Peers(ctx); len(peers) != 2 {
			t.Fatalf("%d peers, want 2", len(peers))
		}
	})

	t.Run("AllowedIPHeldByAnotherPeerIsRefused", func(t *testing.T) {
		m := open(t)
		holder := mesh.Peer{PublicKey: NewKey(t), AllowedIPs: []netip.Prefix{pfx("198.19.0.5/32")}}
		mustUpsert(t, m, holder)
		thief := mesh.Peer{PublicKey: NewKey(t), AllowedIPs: []netip.Prefix{pfx("198.19.0.6/32"), pfx("198.19.0.5/32")}}
		err := m.UpsertPeer(ctx, thief)
		var conflict *mesh.AllowedIPConflictError
		if !errors.As(err, &conflict) || !errors.Is(err, mesh.ErrAllowedIPHeld) || conflict.Holder != holder.PublicKey || conflict.Prefix != pfx("198.19.0.5/32") {
			t.Fatalf("UpsertPeer(thief) = %v, want *AllowedIPConflictError naming the holder", err)
		}
		expectPeers(t, m, holder)
	})

	t.Run("RemovePeer", func(t *testing.T) {
		m := open(t)
		p := mesh.Peer{PublicKey: NewKey(t), AllowedIPs: []netip.Prefix{pfx("198.19.0.7/32")}}
		mustUpsert(t, m, p)
		if err := m.RemovePeer(ctx, p.PublicKey); err != nil {
			t.Fatal(err)
		}
		expectPeers(t, m)
		if err := m.RemovePeer(ctx, p.PublicKey); !errors.Is(err, mesh.ErrPeerNotFound) {
			t.Fatalf("second RemovePeer = %v, want ErrPeerNotFound", err)
		}
		// Its address can go to a new peer.
		mustUpsert(t, m, mesh.Peer{PublicKey: NewKey(t), AllowedIPs: []netip.Prefix{pfx("198.19.0.7/32")}})
	})

	t.Run("InvalidPeers", func(t *testing.T) {
		m := open(t)
		for _, p := range []mesh.Peer{
			{},
			{PublicKey: NewKey(t), AllowedIPs: []netip.Prefix{pfx("198.19.0.8/24")}},
			{PublicKey: NewKey(t), AllowedIPs: []netip.Prefix{{}}},
			{PublicKey: NewKey(t), PersistentKeepalive: 1500 * time.Millisecond},
			{PublicKey: NewKey(t), Endpoint: netip.AddrPortFrom(netip.MustParseAddr("198.18.0.9"), 0)},
		} {
			if err := m.UpsertPeer(ctx, p); !errors.Is(err, mesh.ErrInvalidPeer) {
				t.Errorf("UpsertPeer(%+v) = %v, want ErrInvalidPeer", p, err)
			}
		}
		expectPeers(t, m)
	})

	t.Run("ConcurrentWriters", func(t *testing.T) {
		m := open(t)
		const n = 50
		var wg sync.WaitGroup
		errs := make(chan error, 2*n)
		keys := make([]wgkey.Key, n)
		for i := range n {
			keys[i] = NewKey(t)
		}
		for i := range n {
			wg.Go(func() {
				ip := netip.AddrFrom4([4]byte{198, 19, 1, byte(i + 1)})
				errs <- m.UpsertPeer(ctx, mesh.Peer{PublicKey: keys[i], AllowedIPs: []netip.Prefix{netip.PrefixFrom(ip, 32)}})
				// Half of them change their IPs at once, racing the others.
				if i%2 == 0 {
					ip2 := netip.AddrFrom4([4]byte{198, 19, 2, byte(i + 1)})
					errs <- m.UpsertPeer(ctx, mesh.Peer{PublicKey: keys[i], AllowedIPs: []netip.Prefix{netip.PrefixFrom(ip2, 32)}})
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		peers, err := m.Peers(ctx)
		if err != nil || len(peers) != n {
			t.Fatalf("Peers = %d, %v; want %d", len(peers), err, n)
		}
		for _, p := range peers {
			if len(p.AllowedIPs) != 1 {
				t.Fatalf("peer %s has %v", p.PublicKey, p.AllowedIPs)
			}
		}
	})
}

// NewKey returns a fresh public key.
func NewKey(t testing.TB) wgkey.Key {
	t.Helper()
	_, pub, err := wgkey.GeneratePair()
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func mustUpsert(t *testing.T, m mesh.Mesh, p mesh.Peer) {
	t.Helper()
	if err := m.UpsertPeer(context.Background(), p); err != nil {
		t.Fatalf("UpsertPeer(%+v): %v", p, err)
	}
}

func expectPeers(t *testing.T, m mesh.Mesh, want ...mesh.Peer) {
	t.Helper()
	got, err := m.Peers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("Peers = %v, want %v", got, want)
	}
	byKey := map[wgkey.Key]mesh.Peer{}
	for _, p := range got {
		byKey[p.PublicKey] = p
	}
	for _, w := range want {
		w, err := mesh.Normalize(w)
		if err != nil {
			t.Fatal(err)
		}
		g, ok := byKey[w.PublicKey]
		if !ok || !mesh.Equal(g, w) {
			t.Fatalf("peer %s = %s, want %s", w.PublicKey, describe(g), describe(w))
		}
	}
}

func describe(p mesh.Peer) string {
	return fmt.Sprintf("{ips %v endpoint %v keepalive %v}", p.AllowedIPs, p.Endpoint, p.PersistentKeepalive)
}
