package allowedips

import (
	"net/netip"
	"slices"

	"gridweave.dev/mesh"
	"gridweave.dev/mesh/wgkey"
)

// Table records the holder of each allowed IP prefix. The zero value is an
// empty table. It is not safe for concurrent use.
type Table struct {
	holders map[netip.Prefix]wgkey.Key
	// ordered holds the same prefixes sorted by mesh.ComparePrefixes, so
	// that the prefixes inside a prefix are one run from where it would be.
	ordered []netip.Prefix
	// lengths counts the held prefixes of each length, per family (0 for
	// IPv4, 1 for IPv6), so that the search for the prefixes around a
	// prefix looks up only the lengths in use.
	lengths [2][129]int
}

func family(p netip.Prefix) int {
	if p.Addr().Is4() {
		return 0
	}
	return 1
}

// Conflict returns an *mesh.AllowedIPConflictError for the first of
// prefixes that overlaps a prefix held by a peer other than key, or nil.
// The prefixes must be valid and masked (as mesh.Normalize leaves them).
func (t *Table) Conflict(key wgkey.Key, prefixes []netip.Prefix) error {
	for _, p := range prefixes {
		if held, holder, ok := t.around(key, p); ok {
			return &mesh.AllowedIPConflictError{Prefix: p, HolderPrefix: held, Holder: holder}
		}
		if held, holder, ok := t.inside(key, p); ok {
			return &mesh.AllowedIPConflictError{Prefix: p, HolderPrefix: held, Holder: holder}
		}
	}
	return nil
}

// around finds a prefix of another peer that contains p and is shorter.
func (t *Table) around(key wgkey.Key, p netip.Prefix) (netip.Prefix, wgkey.Key, bool) {
	lengths := &t.lengths[family(p)]
	for bits := range p.Bits() {
		if lengths[bits] == 0 {
			continue
		}
		wider, _ := p.Addr().Prefix(bits)
		if holder, ok := t.holders[wider]; ok && holder != key {
			return wider, holder, true
		}
	}
	return netip.Prefix{}, wgkey.Key{}, false
}

// inside finds a prefix of another peer that p contains (p itself included).
// Sorted by address then length, those prefixes follow p's own position
// without a gap: any prefix between would start inside p and so be inside
// it too. The run holds at most the peer's own prefixes before a conflict.
func (t *Table) inside(key wgkey.Key, p netip.Prefix) (netip.Prefix, wgkey.Key, bool) {
	i, _ := slices.BinarySearchFunc(t.ordered, p, mesh.ComparePrefixes)
	for ; i < len(t.ordered) && p.Contains(t.ordered[i].Addr()); i++ {
		held := t.ordered[i]
		if holder := t.holders[held]; holder != key {
			return held, holder, true
		}
	}
	return netip.Prefix{}, wgkey.Key{}, false
}

// Add records key as the holder of prefixes, replacing any other holder of
// the same prefixes (a device read may contain overlaps that the table
// would refuse; it records them as they are).
func (t *Table) Add(key wgkey.Key, prefixes []netip.Prefix) {
	if t.holders == nil {
		t.holders = map[netip.Prefix]wgkey.Key{}
	}
	for _, p := range prefixes {
		if _, ok := t.holders[p]; !ok {
			i, _ := slices.BinarySearchFunc(t.ordered, p, mesh.ComparePrefixes)
			t.ordered = slices.Insert(t.ordered, i, p)
			t.lengths[family(p)][p.Bits()]++
		}
		t.holders[p] = key
	}
}

// Remove forgets those of prefixes that key holds.
func (t *Table) Remove(key wgkey.Key, prefixes []netip.Prefix) {
	for _, p := range prefixes {
		if holder, ok := t.holders[p]; !ok || holder != key {
			continue
		}
		delete(t.holders, p)
		if i, found := slices.BinarySearchFunc(t.ordered, p, mesh.ComparePrefixes); found {
			t.ordered = slices.Delete(t.ordered, i, i+1)
		}
		t.lengths[family(p)][p.Bits()]--
	}
}

// Len returns the number of prefixes held.
func (t *Table) Len() int { return len(t.ordered) }
