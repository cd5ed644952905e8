package joinkeys

import (
	"errors"
	"fmt"
	"net/netip"
)

// ErrPodCIDROutsideRange is wrapped by the errors of PodRange.Check.
var ErrPodCIDROutsideRange = errors.New("pod CIDR outside the cluster's pod range")

// PodRange is a cluster's pod range: every node's pod CIDR is a prefix of
// at least NodeBits inside Cluster (the controller-manager's
// --cluster-cidr and --node-cidr-mask-size, k3s's 10.42.0.0/16 and 24 by
// default). Whatever a machine's Kubernetes Node says of its pod CIDR is
// held to it before anything is routed: on the master and on every
// machine.
type PodRange struct {
	Cluster  netip.Prefix
	NodeBits int
}

// DefaultPodRange is k3s's default pod range: 10.42.0.0/16 in /24s.
var DefaultPodRange = PodRange{Cluster: netip.MustParsePrefix("10.42.0.0/16"), NodeBits: 24}

// Validate reports whether r can be a cluster's pod range: a masked
// prefix that leaves room for nodes, with per-node prefixes at least as
// long as it and at most /30 (/126 for IPv6).
func (r PodRange) Validate() error {
	limit := 30
	if r.Cluster.Addr().Is6() {
		limit = 126
	}
	switch {
	case !r.Cluster.IsValid() || r.Cluster.Masked() != r.Cluster:
		return fmt.Errorf("%s is not a prefix without host bits, such as 10.42.0.0/16", r.Cluster)
	case r.Cluster.Bits() > limit:
		return fmt.Errorf("%s leaves no room for nodes' pod CIDRs", r.Cluster)
	case r.NodeBits < r.Cluster.Bits() || r.NodeBits > limit:
		return fmt.Errorf("a per-node mask of /%d does not fit in %s: give a length from %d to %d", r.NodeBits, r.Cluster, r.Cluster.Bits(), limit)
	}
	return nil
}

// Check reports whether p may be a node's pod CIDR in r: a prefix without
// host bits, of p's family, inside Cluster and no larger than /NodeBits.
// The zero PodRange admits nothing.
func (r PodRange) Check(p netip.Prefix) error {
	switch {
	case !p.IsValid():
		return fmt.Errorf("%w: no prefix", ErrPodCIDROutsideRange)
	case p.Masked() != p:
		return fmt.Errorf("%w: %s has host bits set", ErrPodCIDROutsideRange, p)
	case !r.Cluster.IsValid():
		return fmt.Errorf("%w: %s: no pod range is known, so no pod CIDR is routed", ErrPodCIDROutsideRange, p)
	case p.Addr().BitLen() != r.Cluster.Addr().BitLen() || p.Bits() < r.Cluster.Bits() || !r.Cluster.Contains(p.Addr()):
		return fmt.Errorf("%w: %s is not inside %s", ErrPodCIDROutsideRange, p, r.Cluster)
	case p.Bits() < r.NodeBits:
		return fmt.Errorf("%w: %s is larger than a node's /%d in %s", ErrPodCIDROutsideRange, p, r.NodeBits, r.Cluster)
	}
	return nil
}
