package mesh

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"gridweave.dev/mesh/wgkey"
)

// Mesh is the set of WireGuard peers of one device. Implementations are
// safe for concurrent use.
type Mesh interface {
	// PublicKey returns the device's own public key.
	PublicKey(ctx context.Context) (wgkey.Key, error)
	// UpsertPeer adds the peer or brings an existing one (same public key)
	// to p: its allowed IPs are replaced and its keepalive set; its
	// endpoint is set when p has one (WireGuard cannot forget an endpoint,
	// so an unset Endpoint keeps the current one). An allowed IP that
	// overlaps a prefix of another peer (equal to it, inside it or around
	// it) is *AllowedIPConflictError naming that peer; an invalid peer is
	// *InvalidPeerError. In both cases nothing changes.
	UpsertPeer(ctx context.Context, p Peer) error
	// RemovePeer removes the peer, or returns ErrPeerNotFound.
	RemovePeer(ctx context.Context, key wgkey.Key) error
	// Peers lists the peers ordered by public key.
	Peers(ctx context.Context) ([]Peer, error)
	// Close releases the Mesh's resources; the device itself stays.
	Close() error
}

// Peer is one WireGuard peer.
type Peer struct {
	PublicKey  wgkey.Key
	AllowedIPs []netip.Prefix
	// Endpoint is where to send packets first; invalid means none (the
	// peer is reached once it sends).
	Endpoint netip.AddrPort
	// PersistentKeepalive is the keepalive interval; 0 disables it.
	PersistentKeepalive time.Duration
}

// Errors.
var (
	ErrPeerNotFound  = errors.New("peer not found")
	ErrAllowedIPHeld = errors.New("allowed IP is held by another peer")
	ErrInvalidPeer   = errors.New("invalid peer")
)

// AllowedIPConflictError says that an allowed IP of an upsert overlaps a
// prefix that another peer holds, and names that peer.
type AllowedIPConflictError struct {
	// Prefix is the allowed IP of the upsert.
	Prefix netip.Prefix
	// HolderPrefix is the holder's prefix that Prefix overlaps: the same
	// prefix, one inside it or one around it.
	HolderPrefix netip.Prefix
	// Holder is the public key of the peer that holds HolderPrefix.
	Holder wgkey.Key
}

func (e *AllowedIPConflictError) Error() string {
	if !e.HolderPrefix.IsValid() || e.HolderPrefix == e.Prefix {
		return fmt.Sprintf("allowed IP %s is held by peer %s; remove that peer first", e.Prefix, e.Holder)
	}
	return fmt.Sprintf("allowed IP %s overlaps %s, held by peer %s; remove that peer first", e.Prefix, e.HolderPrefix, e.Holder)
}

// Is makes errors.Is(err, ErrAllowedIPHeld) hold.
func (e *AllowedIPConflictError) Is(target error) bool { return target == ErrAllowedIPHeld }

// InvalidPeerError names the field of a Peer that is wrong.
type InvalidPeerError struct {
	Field   string
	Problem string
}

func (e *InvalidPeerError) Error() string {
	return fmt.Sprintf("invalid peer %s: %s", e.Field, e.Problem)
}

// Is makes errors.Is(err, ErrInvalidPeer) hold.
func (e *InvalidPeerError) Is(target error) bool { return target == ErrInvalidPeer }

// Normalize checks p and returns it with its allowed IPs sorted and
// deduplicated, so that two peers compare equal when WireGuard would hold
// them the same way.
func Normalize(p Peer) (Peer, error) {
	if p.PublicKey.IsZero() {
		return Peer{}, &InvalidPeerError{Field: "public_key", Problem: "is missing"}
	}
	ips := make([]netip.Prefix, 0, len(p.AllowedIPs))
	for i, pfx := range p.AllowedIPs {
		if !pfx.IsValid() {
			return Peer{}, &InvalidPeerError{Field: fmt.Sprintf("allowed_ips[%d]", i), Problem: "is not a valid prefix"}
		}
		if pfx.Addr().Is4In6() {
			// WireGuard reads such a prefix as IPv4 (::ffff:0.0.0.0/96 as
			// 0.0.0.0/0), which the overlap checks, comparing it as IPv6,
			// would not see.
			problem := "is an IPv4-mapped IPv6 prefix; give it as IPv4"
			if pfx.Bits() >= 96 {
				problem += fmt.Sprintf(" (%s)", netip.PrefixFrom(pfx.Addr().Unmap(), pfx.Bits()-96).Masked())
			}
			return Peer{}, &InvalidPeerError{Field: fmt.Sprintf("allowed_ips[%d]", i), Problem: problem}
		}
		if pfx.Masked() != pfx {
			return Peer{}, &InvalidPeerError{Field: fmt.Sprintf("allowed_ips[%d]", i), Problem: fmt.Sprintf("%s has host bits set (did you mean %s?)", pfx, pfx.Masked())}
		}
		ips = append(ips, pfx)
	}
	slices.SortFunc(ips, ComparePrefixes)
	ips = slices.Compact(ips)
	if p.Endpoint.IsValid() && p.Endpoint.Port() == 0 {
		return Peer{}, &InvalidPeerError{Field: "endpoint", Problem: "has no port"}
	}
	if p.PersistentKeepalive < 0 || p.PersistentKeepalive > 65535*time.Second || p.PersistentKeepalive%time.Second != 0 {
		return Peer{}, &InvalidPeerError{Field: "persistent_keepalive", Problem: "must be whole seconds between 0 and 65535"}
	}
	p.AllowedIPs = ips
	return p, nil
}

// ComparePrefixes orders prefixes by address, then by length.
func ComparePrefixes(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return cmp.Compare(a.Bits(), b.Bits())
}

// CompareKeys orders public keys bytewise.
func CompareKeys(a, b wgkey.Key) int { return slices.Compare(a[:], b[:]) }

// Equal reports whether two normalized peers are the same.
func Equal(a, b Peer) bool {
	return a.PublicKey == b.PublicKey && slices.Equal(a.AllowedIPs, b.AllowedIPs) &&
		a.Endpoint == b.Endpoint && a.PersistentKeepalive == b.PersistentKeepalive
}

// PeerStatus is what a device observed of one peer: where its packets
// last came from (WireGuard roams to it), when its last handshake
// completed, and the bytes each way.
type PeerStatus struct {
	PublicKey wgkey.Key
	// Endpoint is the address the peer's packets come from; invalid
	// until it has sent one.
	Endpoint      netip.AddrPort
	LastHandshake time.Time // zero: never
	RxBytes       int64
	TxBytes       int64
}

// Observer is a Mesh that also reports what its device observed of its
// peers. wgmesh reads the device; memmesh reports what SetStatus gave it.
type Observer interface {
	// PeerStatuses lists every peer's status, ordered by public key.
	PeerStatuses(ctx context.Context) ([]PeerStatus, error)
	// PeerStatus is one peer's status, ErrPeerNotFound when there is no
	// such peer: what showing one node costs, whatever the fleet's size.
	PeerStatus(ctx context.Context, key wgkey.Key) (PeerStatus, error)
}
