package fleet

import (
	"context"
	"errors"
	"net/netip"

	"gridweave.dev/gridweave/scrapetargets"
	"gridweave.dev/joinkeys"
)

// The fleet's dependencies besides the ledger (a *joinkeys.Keyring) and
// the master's WireGuard peers (a mesh.Mesh). Each has a real
// implementation in this package or beside it and an in-memory one in
// package memfleet.

// Routes puts prefixes into the master's routing table through its
// WireGuard device: a node's pod CIDR must be routed into the device
// before WireGuard's allowed IPs can carry it to the node.
// Real: DeviceRoutes. In memory: memfleet.Routes.
type Routes interface {
	// Replace routes prefix through the device (idempotent).
	Replace(ctx context.Context, prefix netip.Prefix) error
	// Delete removes the route; a route that is not there is fine.
	Delete(ctx context.Context, prefix netip.Prefix) error
}

// KubeNode is what the fleet reads of a Kubernetes Node.
type KubeNode struct {
	Name string
	// PodCIDR is spec.podCIDR; the zero Prefix until Kubernetes set one.
	PodCIDR netip.Prefix
	Labels  map[string]string
	// PodCIDRs are every pod CIDR of the Node (spec.podCIDRs, dual stack),
	// InternalIPs its addresses (status.addresses of type InternalIP):
	// what another node's pod CIDR must not overlap when this Node is
	// not the fleet's.
	PodCIDRs    []netip.Prefix
	InternalIPs []netip.Addr
	// Deleted is set when Watch reports the Node gone.
	Deleted bool
	// UID is the object's metadata.uid (empty when unknown).
	UID string
}

// ErrNoKubeNode is returned by Nodes.Get for a name Kubernetes does not
// know (yet: k3s registers a node after its tunnel is up).
var ErrNoKubeNode = errors.New("fleet: no Kubernetes Node of that name")

// ErrKubeNodeReplaced is returned by a write to a Node that was deleted
// and made again (another metadata.uid) since it was read.
var ErrKubeNodeReplaced = errors.New("fleet: the Kubernetes Node was replaced since it was read")

// Nodes are the cluster's Kubernetes Nodes. Writes to a Node that does not
// exist succeed and do nothing: k3s may not have registered it yet, or it
// is gone already. Real: KubeNodes. In memory: memfleet.Nodes.
type Nodes interface {
	// Get returns the Node name, or ErrNoKubeNode.
	Get(ctx context.Context, name string) (KubeNode, error)
	// SetLabel sets a label of the Node kn.Name; an empty value removes
	// it. When kn.UID is set, only the very object read as kn is changed
	// (ErrKubeNodeReplaced for another of the same name).
	SetLabel(ctx context.Context, kn KubeNode, key, value string) error
	// SetAnnotation sets an annotation of the Node kn.Name, with kn.UID as
	// SetLabel's precondition.
	SetAnnotation(ctx context.Context, kn KubeNode, key, value string) error
	// Delete deletes the Node kn.Name, and only the very object read as
	// kn when kn.UID is set: a Node replaced since by another of the same
	// name is left alone (ErrKubeNodeReplaced).
	Delete(ctx context.Context, kn KubeNode) error
	// Watch calls observe with every Node there is and then with every
	// Node added, changed or deleted (KubeNode.Deleted), until ctx ends.
	Watch(ctx context.Context, observe func(KubeNode)) error
}

// Placement puts registered GPU nodes into Ray worker groups.
// Real: RayGroups (a group per pool in one RayCluster). In memory:
// memfleet.Placement.
type Placement interface {
	// Place is called after a register: after is the node as registered,
	// before as it was (its GPUs may have changed). It returns the
	// worker group the node now runs a worker of, or "" for a CPU-only
	// node; on return the group counts the node.
	Place(ctx context.Context, before, after joinkeys.Node) (group string, err error)
	// Remove takes a node that is no longer registered out of its group,
	// its worker pod included.
	Remove(ctx context.Context, n joinkeys.Node) error
	// Observe is told of a registered node's Kubernetes Node as it is
	// now, to repair what drifted (the pool label after a restart).
	Observe(ctx context.Context, n joinkeys.Node, kn KubeNode) error
}

// Targets are the Prometheus scrape targets of the GPU nodes' DCGM
// exporters. Real: *scrapetargets.Dir. In memory: memfleet.Targets.
type Targets interface {
	// Write writes or replaces the target of t.Hostname.
	Write(ctx context.Context, t scrapetargets.Target) error
	// Remove removes hostname's target; none is fine.
	Remove(hostname string) error
}

var (
	_ Routes    = DeviceRoutes{}
	_ Nodes     = (*KubeNodes)(nil)
	_ Placement = (*RayGroups)(nil)
	_ Targets   = (*scrapetargets.Dir)(nil)

	_ ServiceRanges = KubeServiceCIDRs{}
)

// ServiceRanges tell the cluster's Service address ranges, which no
// node's pod CIDR may overlap. Real: KubeServiceCIDRs. In memory:
// memfleet.ServiceRanges.
type ServiceRanges interface {
	// ServiceCIDRs returns the ranges; none (and no error) when the
	// cluster does not publish them.
	ServiceCIDRs(ctx context.Context) ([]netip.Prefix, error)
}
