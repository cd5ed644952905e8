package addrpool

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"slices"
)

// ErrExhausted is returned by Allocate when no address is left.
var ErrExhausted = errors.New("no free VPN address left in the pool")

// Range is an allocatable IPv4 range: every host address of a prefix except
// the network and broadcast addresses and the reserved ones.
type Range struct {
	prefix   netip.Prefix
	reserved []uint32 // sorted
}

// NewRange returns the range of prefix (IPv4, masked, /30 or larger) less
// reserved, which must lie inside prefix. The caller checks and words the
// errors a user sees; NewRange only refuses what it cannot represent.
func NewRange(prefix netip.Prefix, reserved ...netip.Addr) (Range, error) {
	if !prefix.IsValid() || !prefix.Addr().Is4() || prefix.Masked() != prefix || prefix.Bits() > 30 {
		return Range{}, fmt.Errorf("addrpool: %s is not a masked IPv4 prefix of /30 or larger", prefix)
	}
	r := Range{prefix: prefix}
	for _, addr := range reserved {
		if !prefix.Contains(addr) {
			return Range{}, fmt.Errorf("addrpool: reserved %s is not inside %s", addr, prefix)
		}
		r.reserved = append(r.reserved, ToUint32(addr))
	}
	slices.Sort(r.reserved)
	r.reserved = slices.Compact(r.reserved)
	return r, nil
}

// Prefix returns the range's prefix.
func (r Range) Prefix() netip.Prefix { return r.prefix }

// Reserved returns the addresses of the range no node gets, in order.
func (r Range) Reserved() []netip.Addr {
	out := make([]netip.Addr, len(r.reserved))
	for i, ip := range r.reserved {
		out[i] = FromUint32(ip)
	}
	return out
}

// ID names the range in a store: its prefix in CIDR notation.
func (r Range) ID() string { return r.prefix.String() }

// First is the lowest allocatable address (the network address excluded).
func (r Range) First() uint32 { return ToUint32(r.prefix.Addr()) + 1 }

// Last is the highest allocatable address (the broadcast address excluded).
func (r Range) Last() uint32 {
	return ToUint32(r.prefix.Addr()) + uint32(1)<<(32-r.prefix.Bits()) - 2
}

// Size is the number of addresses nodes can get.
func (r Range) Size() int {
	if !r.prefix.IsValid() {
		return 0
	}
	n := int(r.Last()) - int(r.First()) + 1
	for _, ip := range r.reserved {
		if ip >= r.First() && ip <= r.Last() {
			n--
		}
	}
	return n
}

func (r Range) isReserved(ip uint32) bool {
	_, found := slices.BinarySearch(r.reserved, ip)
	return found
}

// Book is what a store offers Allocate inside its transaction: a free list
// of released addresses, a high-water mark of never-used ones, and a check
// against the node table.
type Book interface {
	// PopFree removes and returns the lowest released address of the range
	// with id, if any.
	PopFree(id string) (ip uint32, ok bool, err error)
	// Next returns the range's high-water mark, or first if it has none.
	Next(id string, first uint32) (uint32, error)
	// SetNext stores the range's high-water mark.
	SetNext(id string, next uint32) error
	// InUse reports whether a node holds ip.
	InUse(ip uint32) (bool, error)
}

// Allocate picks the address for a new node: the lowest released address
// if there is one, else the next never-used one; reserved addresses and
// addresses held by a node (e.g. from an earlier range) are skipped. It
// costs O(log n) in a store that indexes its free list, whatever the
// range's occupancy. ErrExhausted when nothing is left.
func (r Range) Allocate(book Book) (netip.Addr, error) {
	id := r.ID()
	for {
		ip, ok, err := book.PopFree(id)
		if err != nil {
			return netip.Addr{}, err
		}
		if !ok {
			break
		}
		if ip < r.First() || ip > r.Last() || r.isReserved(ip) {
			continue
		}
		used, err := book.InUse(ip)
		if err != nil {
			return netip.Addr{}, err
		}
		if !used {
			return FromUint32(ip), nil
		}
	}
	next, err := book.Next(id, r.First())
	if err != nil {
		return netip.Addr{}, err
	}
	for ; next >= r.First() && next <= r.Last(); next++ {
		if r.isReserved(next) {
			continue
		}
		used, err := book.InUse(next)
		if err != nil {
			return netip.Addr{}, err
		}
		if used {
			continue
		}
		if err := book.SetNext(id, next+1); err != nil {
			return netip.Addr{}, err
		}
		return FromUint32(next), nil
	}
	if err := book.SetNext(id, next); err != nil {
		return netip.Addr{}, err
	}
	return netip.Addr{}, fmt.Errorf("%w: %s holds %d node addresses", ErrExhausted, r.prefix, r.Size())
}

// ToUint32 converts an IPv4 address to its integer form, as stores keep it.
func ToUint32(addr netip.Addr) uint32 {
	b := addr.As4()
	return binary.BigEndian.Uint32(b[:])
}

// FromUint32 converts an integer form back to an IPv4 address.
func FromUint32(ip uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], ip)
	return netip.AddrFrom4(b)
}
