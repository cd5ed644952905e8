package joinkeys

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
)

// Pool is the range VPN addresses are allocated from: every host address of
// an IPv4 prefix except the network and broadcast addresses and the
// reserved ones (the master's address).
type Pool struct {
	prefix   netip.Prefix
	reserved []uint32
}

// NewPool checks prefix (IPv4, masked, room for at least one node beside
// the reserved addresses) and returns the pool. Each reserved address must
// lie inside prefix.
func NewPool(prefix netip.Prefix, reserved ...netip.Addr) (Pool, error) {
	if !prefix.IsValid() {
		return Pool{}, fieldError("vpn_cidr", "missing or not a CIDR")
	}
	if !prefix.Addr().Is4() {
		return Pool{}, fieldError("vpn_cidr", "%s is not an IPv4 prefix", prefix)
	}
	if prefix.Masked() != prefix {
		return Pool{}, fieldError("vpn_cidr", "%s has host bits set; did you mean %s?", prefix, prefix.Masked())
	}
	if prefix.Bits() < 8 {
		return Pool{}, fieldError("vpn_cidr", "%s is too large: use /8 or smaller", prefix)
	}
	if prefix.Bits() > 30 {
		return Pool{}, fieldError("vpn_cidr", "%s is too small: use /30 or larger", prefix)
	}
	p := Pool{prefix: prefix}
	for _, addr := range reserved {
		if !prefix.Contains(addr) {
			return Pool{}, fieldError("master_vpn_ip", "%s is not inside %s", addr, prefix)
		}
		p.reserved = append(p.reserved, addrToUint32(addr))
	}
	slices.Sort(p.reserved)
	if p.Size() <= 0 {
		return Pool{}, fieldError("vpn_cidr", "%s has no address left for nodes", prefix)
	}
	return p, nil
}

// MustPool is NewPool for tests and examples; it panics on error.
func MustPool(prefix string, reserved ...string) Pool {
	addrs := make([]netip.Addr, len(reserved))
	for i, r := range reserved {
		addrs[i] = netip.MustParseAddr(r)
	}
	p, err := NewPool(netip.MustParsePrefix(prefix), addrs...)
	if err != nil {
		panic(err)
	}
	return p
}

// Prefix returns the pool's prefix.
func (p Pool) Prefix() netip.Prefix { return p.prefix }

// ID names the pool in a store: its prefix in CIDR notation.
func (p Pool) ID() string { return p.prefix.String() }

// First and Last bound the allocatable range (network and broadcast excluded).
func (p Pool) First() uint32 { return addrToUint32(p.prefix.Addr()) + 1 }

// Last is the highest allocatable address.
func (p Pool) Last() uint32 {
	return addrToUint32(p.prefix.Addr()) + uint32(1)<<(32-p.prefix.Bits()) - 2
}

// Size is the number of addresses nodes can get.
func (p Pool) Size() int {
	n := int(p.Last()) - int(p.First()) + 1
	for _, r := range p.reserved {
		if r >= p.First() && r <= p.Last() {
			n--
		}
	}
	return n
}

func (p Pool) isReserved(ip uint32) bool {
	_, found := slices.BinarySearch(p.reserved, ip)
	return found
}

// AddressBook is what a Store offers Pool.Allocate inside its transaction:
// a free list of released addresses, a high-water mark of never-used ones,
// and a check against the node table. Stores implement it; callers do not.
type AddressBook interface {
	// PopFree removes and returns the lowest released address of pool, if any.
	PopFree(pool string) (ip uint32, ok bool, err error)
	// Next returns the pool's high-water mark, or first if it has none.
	Next(pool string, first uint32) (uint32, error)
	// SetNext stores the pool's high-water mark.
	SetNext(pool string, next uint32) error
	// InUse reports whether a node holds ip.
	InUse(ip uint32) (bool, error)
}

// Allocate picks the address for a new node: the lowest released address
// if there is one, else the next never-used one; reserved addresses and
// addresses held by a node (e.g. from an earlier pool) are skipped. It costs
// O(log n) in a store that indexes its free list, whatever the pool's
// occupancy. ErrPoolExhausted when nothing is left.
func (p Pool) Allocate(book AddressBook) (netip.Addr, error) {
	id := p.ID()
	for {
		ip, ok, err := book.PopFree(id)
		if err != nil {
			return netip.Addr{}, err
		}
		if !ok {
			break
		}
		if ip < p.First() || ip > p.Last() || p.isReserved(ip) {
			continue
		}
		used, err := book.InUse(ip)
		if err != nil {
			return netip.Addr{}, err
		}
		if !used {
			return uint32ToAddr(ip), nil
		}
	}
	next, err := book.Next(id, p.First())
	if err != nil {
		return netip.Addr{}, err
	}
	for ; next >= p.First() && next <= p.Last(); next++ {
		if p.isReserved(next) {
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
		return uint32ToAddr(next), nil
	}
	if err := book.SetNext(id, next); err != nil {
		return netip.Addr{}, err
	}
	return netip.Addr{}, fmt.Errorf("%w: %s holds %d node addresses", ErrPoolExhausted, p.prefix, p.Size())
}

// AddrToUint32 converts an IPv4 address to its integer form, as stores keep it.
func AddrToUint32(addr netip.Addr) uint32 { return addrToUint32(addr) }

// Uint32ToAddr converts an integer form back to an IPv4 address.
func Uint32ToAddr(ip uint32) netip.Addr { return uint32ToAddr(ip) }

func addrToUint32(addr netip.Addr) uint32 {
	b := addr.As4()
	return binary.BigEndian.Uint32(b[:])
}

func uint32ToAddr(ip uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], ip)
	return netip.AddrFrom4(b)
}
