package fleet

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"gridweave.dev/joinkeys"
	"gridweave.dev/mesh/wgkey"
)

// MarkLabel is the Kubernetes Node label that makes a Node the fleet's:
// the join agent asks k3s (or its kubelet) to register its Node with it
// (validate's node_labels), its value is the node's mark (Marker.Mark).
// The fleet labels, annotates, routes and deletes only Nodes whose mark
// matches the ledger's node of that name; any other Node of the cluster
// (the master's, a machine joined otherwise) is never touched, and a first
// join under its name is refused (ErrHostnameInCluster).
const MarkLabel = "gridweave.dev/node"

// MinMarkSecretLen is the shortest secret NewMarker accepts.
const MinMarkSecretLen = 32

// Marker makes the ownership marks of nodes: an HMAC-SHA256 of the node's
// WireGuard public key under a secret only the master holds, so a mark
// cannot be computed from what the peer directory hands every machine (the
// public keys). Each machine learns its own mark only, in its validate
// answer. Every server replica must use the same secret.
type Marker struct{ secret []byte }

// NewMarker returns the Marker of secret (at least MinMarkSecretLen
// bytes).
func NewMarker(secret []byte) (*Marker, error) {
	if len(secret) < MinMarkSecretLen {
		return nil, fmt.Errorf("fleet: a mark secret of %d bytes; use at least %d", len(secret), MinMarkSecretLen)
	}
	return &Marker{secret: bytes.Clone(secret)}, nil
}

// Mark is the value of MarkLabel for the node with public key pub: the
// first 20 bytes of the HMAC-SHA256 of the key, in hex (a valid label
// value).
func (m *Marker) Mark(pub wgkey.Key) string {
	h := hmac.New(sha256.New, m.secret)
	h.Write([]byte("gridweave node mark\x00"))
	h.Write(pub[:])
	return hex.EncodeToString(h.Sum(nil)[:20])
}

// TokenBinding is what ties a kubelet bootstrap token to the machine of
// public key pub (kubeletjoin.NodeGroup): an HMAC under the master's
// secret, apart from the mark, so that a token of a machine released
// since, or of another master, is not this machine's.
func (m *Marker) TokenBinding(pub wgkey.Key) string {
	h := hmac.New(sha256.New, m.secret)
	h.Write([]byte("gridweave kubelet token\x00"))
	h.Write(pub[:])
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// NodeLabels are the labels a node's Kubernetes Node must be registered
// with, as key=value: what validate tells that node's agent, and only it,
// to pass to k3s or its kubelet.
func (m *Marker) NodeLabels(n joinkeys.Node) []string {
	return []string{MarkLabel + "=" + m.Mark(n.PublicKey)}
}

// Owns reports whether kn is the Kubernetes Node of ledger node n: its
// name and its mark match. A nil Marker owns nothing.
func (m *Marker) Owns(kn KubeNode, n joinkeys.Node) bool {
	if m == nil {
		return false
	}
	mark := kn.Labels[MarkLabel]
	return kn.Name == n.Hostname && hmac.Equal([]byte(mark), []byte(m.Mark(n.PublicKey)))
}

// ErrHostnameInCluster: a first join names a Kubernetes Node that no
// Gridweave join made (it carries no MarkLabel).
var ErrHostnameInCluster = errors.New("the hostname names a Kubernetes Node that is not Gridweave's")

// checkNotForeign refuses a first join whose hostname names a Kubernetes
// Node the fleet did not make. A Node with a mark is one an earlier join
// made (the machine lost its identity, or an administrator's disconnect
// raced k3s): the new join takes the name over, as the ledger allowed.
func (s *Service) checkNotForeign(ctx context.Context, hostname string) error {
	if s.nodes == nil {
		return nil
	}
	kn, err := peek(ctx, s.nodes, hostname)
	switch {
	case errors.Is(err, ErrNoKubeNode):
		return nil
	case err != nil:
		return err
	case kn.Labels[MarkLabel] == "":
		return &Error{Kind: ErrHostnameInCluster, Field: "hostname", Message: "the cluster already has a Kubernetes Node named " + hostname +
			" that no Gridweave join made (it has no " + MarkLabel + " label); join this machine under another hostname"}
	}
	return nil
}

// peek reads a Node for the join's hot path: from a synced watch cache
// when nodes has one (KubeNodes.Peek), else Get.
func peek(ctx context.Context, nodes Nodes, name string) (KubeNode, error) {
	if p, ok := nodes.(interface {
		Peek(context.Context, string) (KubeNode, error)
	}); ok {
		return p.Peek(ctx, name)
	}
	return nodes.Get(ctx, name)
}

// ownedNode returns n's Kubernetes Node when there is one and it is n's;
// found is false otherwise (none yet, or another's). It asks the API
// server when the watch cache does not hold the Node: a register must see
// the pod CIDR of a Node k3s registered a moment ago, a teardown must not
// miss it.
func (s *Service) ownedNode(ctx context.Context, n joinkeys.Node) (kn KubeNode, found bool, err error) {
	if s.nodes == nil {
		return KubeNode{}, false, nil
	}
	kn, err = s.nodes.Get(ctx, n.Hostname)
	if errors.Is(err, ErrNoKubeNode) {
		return KubeNode{}, false, nil
	}
	if err != nil {
		return KubeNode{}, false, err
	}
	if !s.marks.Owns(kn, n) {
		s.log.WarnContext(ctx, "a Kubernetes Node of a joined node's name is not its own; left alone", "hostname", n.Hostname, "mark", kn.Labels[MarkLabel])
		return KubeNode{}, false, nil
	}
	return kn, true, nil
}

// observeForeign keeps the prefixes of a Kubernetes Node that is not the
// fleet's (nil: it is the fleet's, or gone) among the ledger's master
// prefixes, so no node's pod CIDR can overlap another Node's pods or
// addresses.
func (s *Service) observeForeign(ctx context.Context, name string, prefixes []netip.Prefix) error {
	s.foreignMu.Lock()
	defer s.foreignMu.Unlock()
	if slices.Equal(s.foreign[name], prefixes) {
		return nil
	}
	if s.foreign == nil {
		s.foreign = map[string][]netip.Prefix{}
	}
	if prefixes == nil {
		delete(s.foreign, name)
	} else {
		s.foreign[name] = prefixes
	}
	s.log.DebugContext(ctx, "a Kubernetes Node's prefixes are the master's", "node", name, "prefixes", fmt.Sprint(prefixes))
	return s.pushMasterPrefixesLocked()
}

// pushMasterPrefixesLocked gives the ledger the master's prefixes: the
// configured ones, the cluster's Service ranges and the other Nodes'.
// foreignMu is held.
func (s *Service) pushMasterPrefixesLocked() error {
	all := slices.Concat(s.staticPrefixes, s.serviceRanges)
	for _, name := range slices.Sorted(maps.Keys(s.foreign)) {
		all = append(all, s.foreign[name]...)
	}
	return s.ledger.SetMasterPrefixes(all)
}

// foreignNode follows a Node that is not the fleet's: its prefixes are
// the master's (observeForeign), and a worker-pool label on it is removed,
// so no pool's worker lands there (a kubelet cannot set that label on its
// own Node; anyone else who did is undone).
//
// A Node that may be the work of a joined machine (machineMade: one
// named by a ledger node's hostname that is not that node's own, or one
// with a mark), whose kubelet writes its Node's status, has its
// addresses not believed (a list of them, one in each node-sized block
// of the pod range, would refuse every later registration), only its pod
// CIDR.
func (s *Service) foreignNode(ctx context.Context, kn KubeNode, machineMade bool) error {
	if machineMade {
		kn.InternalIPs = nil
	}
	if err := s.observeForeign(ctx, kn.Name, s.prefixesOf(kn)); err != nil {
		return err
	}
	if kn.Labels[NodePoolLabel] == "" || s.nodes == nil {
		return nil
	}
	s.log.WarnContext(ctx, "a worker-pool label on a Node that is not the fleet's removed", "node", kn.Name, "pool", kn.Labels[NodePoolLabel])
	return s.nodes.SetLabel(ctx, kn, NodePoolLabel, "")
}

// prefixesOf are what a Node holds: its pod CIDRs and its InternalIPs
// (one address each). A pod CIDR that is not a node's prefix inside the
// cluster's pod range cannot overlap a node's and is left out, so a Node
// claiming a whole range blocks nothing.
func (s *Service) prefixesOf(kn KubeNode) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range append(slices.Clone(kn.PodCIDRs), kn.PodCIDR) {
		if p.IsValid() && !slices.Contains(out, p) && s.CheckPodCIDR(p) == nil {
			out = append(out, p)
		}
	}
	for _, ip := range kn.InternalIPs {
		out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
	}
	if out == nil {
		out = []netip.Prefix{} // a foreign Node with nothing yet is still foreign
	}
	return out
}
