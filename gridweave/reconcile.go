package gridweave

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"gridweave.dev/joinkeys"
	"gridweave.dev/mesh"
)

// The master's background work, started by Run: the mesh rebuilt from the
// ledger at start, pod CIDRs and pool labels kept in step with the
// Kubernetes Nodes, and half-finished joins released.

// RestoreMesh brings the WireGuard peers in line with the ledger: every
// validated or registered node has its peer (VPN address and pod CIDR),
// and a peer no node of the ledger holds is removed. Run calls it first,
// so a restart of the master (or of its device) loses no tunnel.
func (s *Server) RestoreMesh(ctx context.Context) error {
	nodes, err := s.keyring.Nodes(ctx)
	if err != nil {
		return err
	}
	want := map[string]bool{}
	var errs []error
	restored := 0
	for _, n := range nodes {
		if n.Status == joinkeys.StatusDisconnected {
			continue
		}
		want[n.PublicKey.String()] = true
		if err := s.mesh.UpsertPeer(ctx, s.peerOf(n)); err != nil {
			errs = append(errs, fmt.Errorf("peer of %s: %w", n.Hostname, err))
			continue
		}
		if err := s.routePodCIDR(ctx, n.PodCIDR); err != nil {
			errs = append(errs, fmt.Errorf("pod CIDR route of %s: %w", n.Hostname, err))
		}
		restored++
	}
	peers, err := s.mesh.Peers(ctx)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	removed := 0
	for _, p := range peers {
		if !want[p.PublicKey.String()] {
			if err := s.mesh.RemovePeer(ctx, p.PublicKey); err != nil && !errors.Is(err, mesh.ErrPeerNotFound) {
				errs = append(errs, err)
				continue
			}
			removed++
		}
	}
	s.log.InfoContext(ctx, "mesh restored from the ledger", "peers", restored, "stale_peers_removed", removed)
	return errors.Join(errs...)
}

// ReleaseHalfFinishedJoins releases nodes that validated but did not
// register within Config.ValidatedTTL: their address, their peer and their
// hostname go back. A node that registers meanwhile is left alone (the
// release is conditional on the record read). It returns the hostnames
// released.
func (s *Server) ReleaseHalfFinishedJoins(ctx context.Context) ([]string, error) {
	nodes, err := s.keyring.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	cutoff := s.now().Add(-s.cfg.ValidatedTTL)
	var released []string
	var errs []error
	for _, n := range nodes {
		if n.Status != joinkeys.StatusValidated || !n.UpdatedAt.Before(cutoff) {
			continue
		}
		unlock, err := s.nodeLocks.Lock(ctx, n.Hostname)
		if err != nil {
			return released, err
		}
		released, errs = s.releaseHalfFinished(ctx, n, released, errs)
		unlock()
	}
	return released, errors.Join(errs...)
}

func (s *Server) releaseHalfFinished(ctx context.Context, n joinkeys.Node, released []string, errs []error) ([]string, []error) {
	{
		if err := s.mesh.RemovePeer(ctx, n.PublicKey); err != nil && !errors.Is(err, mesh.ErrPeerNotFound) {
			return released, append(errs, err)
		}
		_, err := s.keyring.ReleaseIfUnchanged(ctx, n, "gridweave", fmt.Sprintf("validated at %s and never registered within %s", n.UpdatedAt.Format(time.RFC3339), s.cfg.ValidatedTTL))
		switch {
		case errors.Is(err, joinkeys.ErrNodeChanged), errors.Is(err, joinkeys.ErrNodeNotFound):
			// It registered (or left) meanwhile: give its peer back.
			if fresh, err := s.keyring.Node(ctx, n.Hostname); err == nil && fresh.Status != joinkeys.StatusDisconnected {
				if err := s.mesh.UpsertPeer(ctx, s.peerOf(fresh)); err != nil {
					errs = append(errs, err)
				}
			}
		case err != nil:
			errs = append(errs, err)
		default:
			released = append(released, n.Hostname)
			s.log.InfoContext(ctx, "half-finished join released", "hostname", n.Hostname, "vpn_ip", n.VPNIP)
		}
	}
	return released, errs
}

// syncKubeNode brings one ledger node in step with its Kubernetes Node:
// the pod CIDR k3s gave it (ledger and peer) and the pool label.
func (s *Server) syncKubeNode(ctx context.Context, kn *corev1.Node) error {
	unlock, err := s.nodeLocks.Lock(ctx, kn.Name)
	if err != nil {
		return err
	}
	defer unlock()
	n, err := s.keyring.Node(ctx, kn.Name)
	if errors.Is(err, joinkeys.ErrNodeNotFound) {
		return nil // not one of ours
	}
	if err != nil || n.Status == joinkeys.StatusDisconnected {
		return err
	}
	if kn.Spec.PodCIDR != "" {
		p, err := netip.ParsePrefix(kn.Spec.PodCIDR)
		if err != nil {
			return fmt.Errorf("node %s: pod CIDR %q is not a CIDR", kn.Name, kn.Spec.PodCIDR)
		}
		if p != n.PodCIDR {
			old := n.PodCIDR
			if n, err = s.keyring.SetNodePodCIDR(ctx, n.Hostname, p); err != nil {
				return err
			}
			if err := s.mesh.UpsertPeer(ctx, s.peerOf(n)); err != nil {
				return err
			}
			if err := s.unroutePodCIDR(ctx, old); err != nil {
				return err
			}
			if err := s.routePodCIDR(ctx, p); err != nil {
				return err
			}
			s.log.InfoContext(ctx, "pod CIDR routed to its node", "hostname", n.Hostname, "pod_cidr", p)
		}
	}
	if p, ok := poolOf(n.GPUs); ok && n.Status == joinkeys.StatusRegistered && kn.Labels[PoolLabel] != p.name {
		return s.groups.labelNode(ctx, n.Hostname, p.name, true)
	}
	return nil
}

// Run does the master's background work until ctx ends: it restores the
// mesh from the ledger, keeps pod CIDRs and pool labels in step with the
// Kubernetes Nodes (an informer, which also repairs drift after a
// restart), and releases half-finished joins every minute.
func (s *Server) Run(ctx context.Context) error {
	if err := s.RestoreMesh(ctx); err != nil {
		s.log.ErrorContext(ctx, "restoring the mesh from the ledger", "err", err)
	}
	factory := informers.NewSharedInformerFactory(s.kube, 10*time.Minute)
	nodes := factory.Core().V1().Nodes().Informer()
	onNode := func(obj any) {
		if kn, ok := obj.(*corev1.Node); ok {
			if err := s.syncKubeNode(ctx, kn); err != nil {
				s.log.WarnContext(ctx, "syncing a Kubernetes node", "node", kn.Name, "err", err)
			}
		}
	}
	if _, err := nodes.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    onNode,
		UpdateFunc: func(_, obj any) { onNode(obj) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	tick := time.NewTicker(s.cfg.ReapInterval)
	defer tick.Stop()
	follow := time.NewTicker(s.cfg.KubeTorchSyncInterval)
	defer follow.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-follow.C:
			if _, err := s.FollowKubeTorchJobs(ctx); err != nil {
				s.log.WarnContext(ctx, "following KubeTorch jobs", "err", err)
			}
		case <-tick.C:
			if _, err := s.ReleaseHalfFinishedJoins(ctx); err != nil {
				s.log.WarnContext(ctx, "releasing half-finished joins", "err", err)
			}
		}
	}
}
