package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"

	"gridweave.dev/joinkeys"
	"gridweave.dev/wgkey"
)

// MarkLabel is the Kubernetes Node label that makes a Node the fleet's:
// the join agent asks k3s to register its Node with it (validate's
// node_labels), its value is Mark of the node's WireGuard public key. The
// fleet labels, annotates, routes and deletes only Nodes whose mark
// matches the ledger's node of that name; any other Node of the cluster
// (the master's, a machine k3s joined otherwise) is never touched, and a
// first join under its name is refused (ErrHostnameInCluster).
const MarkLabel = "gridweave.dev/node"

// Mark is the value of MarkLabel for the node with public key pub: the
// first 20 bytes of the SHA-256 of the key, in hex (a valid label value).
func Mark(pub wgkey.Key) string {
	sum := sha256.Sum256(pub[:])
	return hex.EncodeToString(sum[:20])
}

// NodeLabels are the labels a node's Kubernetes Node must be registered
// with, as key=value: what validate tells the agent to pass to k3s.
func NodeLabels(n joinkeys.Node) []string {
	return []string{MarkLabel + "=" + Mark(n.PublicKey)}
}

// Owns reports whether kn is the Kubernetes Node of ledger node n: its
// name and its mark match.
func Owns(kn KubeNode, n joinkeys.Node) bool {
	return kn.Name == n.Hostname && kn.Labels[MarkLabel] == Mark(n.PublicKey)
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
	kn, err := s.nodes.Get(ctx, hostname)
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

// ownedNode returns n's Kubernetes Node when there is one and it is n's;
// found is false otherwise (none yet, or another's).
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
	if !Owns(kn, n) {
		s.log.WarnContext(ctx, "a Kubernetes Node of a joined node's name is not its own; left alone", "hostname", n.Hostname, "mark", kn.Labels[MarkLabel])
		return KubeNode{}, false, nil
	}
	return kn, true, nil
}
