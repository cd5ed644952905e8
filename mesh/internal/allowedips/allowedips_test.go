package allowedips_test

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"

	"gridweave.dev/mesh"
	"gridweave.dev/mesh/internal/allowedips"
	"gridweave.dev/mesh/wgkey"
)

// naive is the rule written the obvious way: every claimed prefix against
// every held one.
type naive map[wgkey.Key][]netip.Prefix

func (n naive) overlaps(key wgkey.Key, prefixes []netip.Prefix) bool {
	for holder, held := range n {
		if holder == key {
			continue
		}
		for _, h := range held {
			for _, p := range prefixes {
				if p.Overlaps(h) {
					return true
				}
			}
		}
	}
	return false
}

// randomPrefix draws from a small space (198.19.0.0/22 and 2001:2::/120)
// with every length, so that nesting is frequent.
func randomPrefix(r *rand.Rand) netip.Prefix {
	if r.IntN(2) == 0 {
		a := [4]byte{198, 19, byte(r.IntN(4)), byte(r.IntN(256))}
		p, _ := netip.AddrFrom4(a).Prefix(22 + r.IntN(11))
		return p
	}
	var a [16]byte
	a[0], a[1], a[3], a[15] = 0x20, 0x01, 0x02, byte(r.IntN(256))
	p, _ := netip.AddrFrom16(a).Prefix(120 + r.IntN(9))
	return p
}

// TestTableMatchesNaiveRule runs thousands of random upserts and removals
// through a Table and the naive rule side by side: both must accept and
// refuse the same upserts, and every refusal must name a real overlap.
func TestTableMatchesNaiveRule(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([]wgkey.Key, 12)
	for i := range keys {
		keys[i][0] = byte(i + 1)
	}
	var table allowedips.Table
	held := naive{}
	var accepted, refused int
	for range 20000 {
		key := keys[r.IntN(len(keys))]
		if r.IntN(5) == 0 {
			table.Remove(key, held[key])
			delete(held, key)
			continue
		}
		peer, err := mesh.Normalize(mesh.Peer{PublicKey: key, AllowedIPs: []netip.Prefix{randomPrefix(r), randomPrefix(r)}})
		if err != nil {
			t.Fatal(err)
		}
		err = table.Conflict(key, peer.AllowedIPs)
		want := held.overlaps(key, peer.AllowedIPs)
		if (err != nil) != want {
			t.Fatalf("%v claims %v with %v held: table says %v, naive rule says overlap=%v", key, peer.AllowedIPs, held, err, want)
		}
		if err != nil {
			refused++
			var conflict *mesh.AllowedIPConflictError
			if !errors.As(err, &conflict) || conflict.Holder == key || !conflict.Prefix.Overlaps(conflict.HolderPrefix) {
				t.Fatalf("conflict %v does not name another peer's overlapping prefix", err)
			}
			continue
		}
		accepted++
		table.Remove(key, held[key])
		table.Add(key, peer.AllowedIPs)
		held[key] = peer.AllowedIPs
		n := 0
		for _, ps := range held {
			n += len(ps)
		}
		if table.Len() != n {
			t.Fatalf("table holds %d prefixes, want %d", table.Len(), n)
		}
	}
	if accepted < 1000 || refused < 1000 {
		t.Fatalf("%d accepted, %d refused: the random space does not exercise both", accepted, refused)
	}
}

// BenchmarkConflict checks one peer's two prefixes against 1,000 peers
// holding a /32 and a /28 each.
func BenchmarkConflict(b *testing.B) {
	var table allowedips.Table
	for i := range 1000 {
		var key wgkey.Key
		key[0], key[1] = byte(i>>8), byte(i)
		host := netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 19, byte(i >> 8), byte(i)}), 32)
		pods := netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(i / 16), byte(i % 16 * 16)}), 28)
		table.Add(key, []netip.Prefix{host, pods})
	}
	claim := []netip.Prefix{netip.MustParsePrefix("198.19.200.1/32"), netip.MustParsePrefix("198.19.201.0/24")}
	var key wgkey.Key
	key[0] = 0xff
	for b.Loop() {
		if err := table.Conflict(key, claim); err != nil {
			b.Fatal(err)
		}
	}
}
