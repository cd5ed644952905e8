package joinkeys

import (
	"net/netip"

	"gridweave.dev/joinkeys/addrpool"
)

// Pool is the range VPN addresses are allocated from: every host address of
// an IPv4 prefix except the network and broadcast addresses and the
// reserved ones (the master's address).
type Pool struct {
	addrs addrpool.Range
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
	for _, addr := range reserved {
		if !prefix.Contains(addr) {
			return Pool{}, fieldError("master_vpn_ip", "%s is not inside %s", addr, prefix)
		}
	}
	addrs, err := addrpool.NewRange(prefix, reserved...)
	if err != nil {
		return Pool{}, fieldError("vpn_cidr", "%v", err)
	}
	if addrs.Size() <= 0 {
		return Pool{}, fieldError("vpn_cidr", "%s has no address left for nodes", prefix)
	}
	return Pool{addrs: addrs}, nil
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
func (p Pool) Prefix() netip.Prefix { return p.addrs.Prefix() }

// ID names the pool in a store: its prefix in CIDR notation.
func (p Pool) ID() string { return p.addrs.ID() }

// Size is the number of addresses nodes can get; 0 for the zero Pool.
func (p Pool) Size() int { return p.addrs.Size() }

// Addresses returns the pool's allocatable range, for Store implementations.
func (p Pool) Addresses() addrpool.Range { return p.addrs }
