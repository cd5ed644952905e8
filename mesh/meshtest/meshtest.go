package meshtest

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"gridweave.dev/mesh"
	"gridweave.dev/mesh/wgkey"
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
		expectConflict(t, m.UpsertPeer(ctx, thief), pfx("198.19.0.5/32"), pfx("198.19.0.5/32"), holder.PublicKey)
		expectPeers(t, m, holder)
	})

	// WireGuard routes by longest prefix match, so a prefix inside another
	// peer's prefix (or around it) would take part of that peer's traffic.
	// IPv6 prefixes come from 2001:2::/48, the benchmarking range beside
	// 198.18.0.0/15.
	t.Run("OverlappingAllowedIPsAreRefused", func(t *testing.T) {
		for _, tc := range []struct {
			name          string
			held, claimed string
		}{
			{"IPv4HostInsideHeldSubnet", "198.19.4.0/24", "198.19.4.9/32"},
			{"IPv4SubnetAroundHeldHost", "198.19.4.9/32", "198.19.4.0/24"},
			{"IPv4WideSubnetAroundHeldSubnet", "198.19.4.0/24", "198.19.0.0/16"},
			{"IPv4DefaultRoute", "198.19.4.9/32", "0.0.0.0/0"},
			{"IPv6HostInsideHeldSubnet", "2001:2:0:4::/64", "2001:2:0:4::9/128"},
			{"IPv6SubnetAroundHeldHost", "2001:2:0:4::9/128", "2001:2:0:4::/64"},
			{"IPv6WideSubnetAroundHeldSubnet", "2001:2:0:4::/64", "2001:2::/48"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				m := open(t)
				// The holder has a second prefix, of the other family, that
				// nothing overlaps.
				other := pfx("2001:2:70::1/128")
				if pfx(tc.held).Addr().Is6() {
					other = pfx("198.18.70.1/32")
				}
				holder := mesh.Peer{PublicKey: NewKey(t), AllowedIPs: []netip.Prefix{other, pfx(tc.held)}}
				mustUpsert(t, m, holder)
				newcomer := mesh.Peer{PublicKey: NewKey(t), AllowedIPs: []netip.Prefix{pfx("198.18.70.2/32"), pfx(tc.claimed)}}
				expectConflict(t, m.UpsertPeer(ctx, newcomer), pfx(tc.claimed), pfx(tc.held), holder.PublicKey)
				expectPeers(t, m, holder)

				// An existing peer widening into the holder's range is
				// refused the same way and keeps what it had.
				mustUpsert(t, m, mesh.Peer{PublicKey: newcomer.PublicKey, AllowedIPs: []netip.Prefix{pfx("198.18.70.2/32")}})
				expectConflict(t, m.UpsertPeer(ctx, newcomer), pfx(tc.claimed), pfx(tc.held), holder.PublicKey)
				expectPeers(t, m, holder, mesh.Peer{PublicKey: newcomer.PublicKey, AllowedIPs: []netip.Prefix{pfx("198.18.70.2/32")}})

				// Once the holder is gone the prefix is free.
				if err := m.RemovePeer(ctx, holder.PublicKey); err != nil {
					t.Fatal(err)
				}
				mustUpsert(t, m, newcomer)
			})
		}
	})

	t.Run("NeighbouringAndOwnPrefixesAreAccepted", func(t *testing.T) {
		m := open(t)
		a := mesh.Peer{PublicKey: NewKey(t), AllowedIPs: []netip.Prefix{pfx("198.19.4.0/24"), pfx("2001:2:0:4::/64")}}
		mustUpsert(t, m, a)
		// Adjacent ranges and the other family do not overlap.
		b := mesh.Peer{PublicKey: NewKey(t), AllowedIPs: []netip.Prefix{pfx("198.19.5.0/24"), pfx("198.19.3.255/32"), pfx("2001:2:0:8::/64")}}
		mustUpsert(t, m, b)
		// A peer may narrow or widen its own prefixes, and hold nested ones.
		a.AllowedIPs = []netip.Prefix{pfx("198.19.4.7/32"), pfx("2001:2:0:4::/62")}
		mustUpsert(t, m, a)
		a.AllowedIPs = []netip.Prefix{pfx("198.19.4.0/24"), pfx("198.19.4.7/32"), pfx("2001:2:0:4::/64")}
		mustUpsert(t, m, a)
		expectPeers(t, m, a, b)
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
			{PublicKey: NewKey(t), AllowedIPs: []netip.Prefix{pfx("::ffff:0.0.0.0/96")}}, // all of IPv4, to WireGuard
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

// expectConflict checks that err is an *AllowedIPConflictError saying that
// claimed overlaps held, which holder holds.
func expectConflict(t *testing.T, err error, claimed, held netip.Prefix, holder wgkey.Key) {
	t.Helper()
	var conflict *mesh.AllowedIPConflictError
	if !errors.As(err, &conflict) || !errors.Is(err, mesh.ErrAllowedIPHeld) {
		t.Fatalf("claiming %s beside %s = %v, want *AllowedIPConflictError", claimed, held, err)
	}
	if conflict.Prefix != claimed || conflict.HolderPrefix != held || conflict.Holder != holder {
		t.Fatalf("conflict names %s, %s held by %s; want %s, %s held by %s",
			conflict.Prefix, conflict.HolderPrefix, conflict.Holder, claimed, held, holder)
	}
	for _, s := range []string{claimed.String(), held.String(), holder.String()} {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("error %q does not name %s", err, s)
		}
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

// RunObserver runs the conformance cases of a mesh.Observer: one peer's
// status is what the whole list says of it, and a peer that is not there
// (never added, or removed) is mesh.ErrPeerNotFound. newMesh is as for
// Run and must return an Observer.
func RunObserver(t *testing.T, newMesh func(t *testing.T) mesh.Mesh) {
	ctx := context.Background()
	t.Run("PeerStatusIsThePeersOwn", func(t *testing.T) {
		m := newMesh(t)
		t.Cleanup(func() { m.Close() })
		o, ok := m.(mesh.Observer)
		if !ok {
			t.Fatalf("%T is not a mesh.Observer", m)
		}
		keys := []wgkey.Key{NewKey(t), NewKey(t), NewKey(t)}
		for i, k := range keys {
			mustUpsert(t, m, mesh.Peer{PublicKey: k, AllowedIPs: []netip.Prefix{pfx(fmt.Sprintf("198.19.3.%d/32", i+1))},
				Endpoint: netip.MustParseAddrPort(fmt.Sprintf("198.18.201.%d:51820", i+1))})
		}
		all, err := o.PeerStatuses(ctx)
		if err != nil || len(all) != len(keys) {
			t.Fatalf("PeerStatuses = %d, %v", len(all), err)
		}
		for _, st := range all {
			one, err := o.PeerStatus(ctx, st.PublicKey)
			if err != nil || one.PublicKey != st.PublicKey || one.LastHandshake != st.LastHandshake {
				t.Errorf("PeerStatus(%s) = %+v, %v; the list says %+v", st.PublicKey, one, err, st)
			}
		}
		if _, err := o.PeerStatus(ctx, NewKey(t)); !errors.Is(err, mesh.ErrPeerNotFound) {
			t.Errorf("PeerStatus of a key never added: %v, want ErrPeerNotFound", err)
		}
		if err := m.RemovePeer(ctx, keys[0]); err != nil {
			t.Fatal(err)
		}
		if _, err := o.PeerStatus(ctx, keys[0]); !errors.Is(err, mesh.ErrPeerNotFound) {
			t.Errorf("PeerStatus of a removed peer: %v, want ErrPeerNotFound", err)
		}
		added := NewKey(t)
		mustUpsert(t, m, mesh.Peer{PublicKey: added, AllowedIPs: []netip.Prefix{pfx("198.19.3.9/32")}})
		if st, err := o.PeerStatus(ctx, added); err != nil || st.PublicKey != added {
			t.Errorf("PeerStatus of a peer just added: %+v, %v", st, err)
		}
	})
}
