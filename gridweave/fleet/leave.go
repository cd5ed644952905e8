package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gridweave.dev/gridweave/scrapetargets"
	"gridweave.dev/joinkeys"
	"gridweave.dev/mesh"
)

// Disconnect tears a node down for an administrator (actor names who):
// the ledger marks it disconnected first, then its worker, its scrape
// target, its Kubernetes Node, its route and its peer go, and the ledger
// row goes last, releasing hostname and address. Every step is
// idempotent, so a call that failed half-way is finished by the next
// one; released is false when there was nothing left to do.
func (s *Service) Disconnect(ctx context.Context, hostname, actor string) (released bool, err error) {
	if err := CheckHostname(hostname); err != nil {
		return false, err
	}
	unlock, err := s.locks.Lock(ctx, hostname)
	if err != nil {
		return false, err
	}
	defer unlock()
	node, err := s.ledger.Node(ctx, hostname)
	if errors.Is(err, joinkeys.ErrNodeNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return s.teardown(ctx, node, actor)
}

// Leave is a node leaving by itself, proving itself with its node token.
// The token is judged first, under the hostname's lock, and the answer is
// the same whether the hostname is unknown or the token wrong
// (joinkeys.ErrNodeTokenInvalid), so a stranger learns nothing of which
// hostnames exist; a leave never tears down a machine that joined under
// the name since. An agent whose leave was answered 401 after a lost
// answer knows it is gone.
func (s *Service) Leave(ctx context.Context, hostname, nodeToken string) (released bool, err error) {
	if nodeToken == "" {
		return false, &Error{Kind: ErrCredentialRequired, Message: "the node token is required (as the bearer credential)"}
	}
	unlock, err := s.locks.Lock(ctx, hostname)
	if err != nil {
		return false, err
	}
	defer unlock()
	node, err := s.authenticateNode(ctx, hostname, nodeToken)
	if err != nil {
		return false, err
	}
	return s.teardown(ctx, node, "node:"+hostname)
}

// teardownTimeout bounds a teardown that no longer hears its caller
// (the longest drain, gridweave.Config.KubeletDrainTimeout, is an hour).
const teardownTimeout = 75 * time.Minute

func (s *Service) teardown(ctx context.Context, node joinkeys.Node, actor string) (bool, error) {
	// Once begun, a teardown runs to its end, also when the caller stops
	// waiting (a drain may take a while): one cut half-way leaves the
	// node marked and half removed until the next call.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()
	hostname := node.Hostname
	var err error
	if node.Status != joinkeys.StatusDisconnected {
		if node, err = s.ledger.MarkDisconnected(ctx, hostname, actor); err != nil {
			return false, err
		}
	}
	if s.placement != nil {
		if err := s.placement.Remove(ctx, node); err != nil {
			return false, fmt.Errorf("remove the worker of %s: %w", hostname, err)
		}
	}
	if s.targets != nil {
		if err := s.targets.Remove(hostname); err != nil {
			return false, fmt.Errorf("remove the DCGM scrape target of %s: %w", hostname, err)
		}
	}
	if kn, found, err := s.ownedNode(ctx, node); err != nil {
		return false, err
	} else if found {
		if err := s.nodes.Delete(ctx, kn); err != nil {
			return false, fmt.Errorf("delete the Kubernetes node %s: %w", hostname, err)
		}
	}
	if err := s.unroute(ctx, node.PodCIDR); err != nil {
		return false, fmt.Errorf("remove the pod CIDR route of %s: %w", hostname, err)
	}
	if err := s.peers.RemovePeer(ctx, node.PublicKey); err != nil && !errors.Is(err, mesh.ErrPeerNotFound) {
		return false, fmt.Errorf("remove the WireGuard peer of %s: %w", hostname, err)
	}
	// Only the record this teardown marked: had anything changed it since,
	// its peer might be back, and a row must never go while its peer stays.
	if _, err := s.ledger.ReleaseIfUnchanged(ctx, node, actor, "disconnected"); err != nil && !errors.Is(err, joinkeys.ErrNodeNotFound) {
		return false, err
	}
	return true, nil
}

// ReportVersion records the version a node runs, in the ledger and as
// the annotation VersionAnnotation of its Kubernetes Node (when there is
// one). The node proves itself with its node token. A node marked
// disconnected is refused (joinkeys.ErrNodeDisconnected), and a report
// waits for a disconnect of the node under way (the hostname's lock,
// taken once the token is judged: a stranger queues nothing), after
// which the node is gone (joinkeys.ErrNodeTokenInvalid).
func (s *Service) ReportVersion(ctx context.Context, hostname, nodeToken, version string) (joinkeys.Node, error) {
	if nodeToken == "" {
		return joinkeys.Node{}, &Error{Kind: ErrCredentialRequired, Message: "the node token is required (as the bearer credential)"}
	}
	if _, err := s.authenticateNode(ctx, hostname, nodeToken); err != nil {
		return joinkeys.Node{}, err
	}
	unlock, err := s.locks.Lock(ctx, hostname)
	if err != nil {
		return joinkeys.Node{}, err
	}
	defer unlock()
	if err := CheckHostname(hostname); err != nil {
		return joinkeys.Node{}, err
	}
	if version == "" {
		return joinkeys.Node{}, invalid("version", "version is required")
	}
	if err := CheckVersion(version); err != nil {
		return joinkeys.Node{}, invalid("version", "invalid version: %v", err)
	}
	node, err := s.ledger.ReportVersion(ctx, hostname, nodeToken, version)
	if err != nil {
		return joinkeys.Node{}, err
	}
	if kn, found, err := s.ownedNode(ctx, node); err != nil {
		return joinkeys.Node{}, err
	} else if found {
		if err := s.nodes.SetAnnotation(ctx, kn, VersionAnnotation, version); err != nil {
			return joinkeys.Node{}, err
		}
	}
	return node, nil
}

// syncScrapeTarget keeps a registered node's DCGM scrape target: written
// for a GPU node, removed for a CPU-only one.
func (s *Service) syncScrapeTarget(ctx context.Context, n joinkeys.Node) error {
	if s.targets == nil {
		return nil
	}
	if len(n.GPUs) == 0 {
		return s.targets.Remove(n.Hostname)
	}
	return s.targets.Write(ctx, scrapetargets.Target{Hostname: n.Hostname, VPNIP: n.VPNIP, GPUModel: n.GPUs[0].Name, GPUCount: len(n.GPUs)})
}
