package fleet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	"gridweave.dev/joinkeys"
	"gridweave.dev/mesh"
	"gridweave.dev/mesh/wgkey"
)

// RestoreMesh brings the WireGuard peers in line with the ledger: every
// validated or registered node has its peer (VPN address and pod CIDR)
// and its pod-CIDR route, and a peer no node of the ledger holds is
// removed. Run calls it first, so a restart of the master (or of its
// device) loses no tunnel.
func (s *Service) RestoreMesh(ctx context.Context) error {
	nodes, err := s.ledger.Nodes(ctx)
	if err != nil {
		return err
	}
	want := map[string]bool{}
	var errs []error
	restored := 0
	for i, n := range nodes {
		if n.Status == joinkeys.StatusDisconnected {
			continue
		}
		if n.PodCIDR.IsValid() && s.CheckPodCIDR(n.PodCIDR) != nil {
			// Recorded before the cluster's pod range was checked (an
			// older server): no longer the node's, and no longer routed.
			if err := s.dropPodCIDR(ctx, n); err != nil {
				errs = append(errs, err)
			}
			n.PodCIDR = netip.Prefix{}
			nodes[i] = n
		}
		want[n.PublicKey.String()] = true
		if err := s.peers.UpsertPeer(ctx, s.PeerOf(n)); err != nil {
			errs = append(errs, fmt.Errorf("peer of %s: %w", n.Hostname, err))
			continue
		}
		if err := s.route(ctx, n.PodCIDR); err != nil {
			errs = append(errs, fmt.Errorf("pod CIDR route of %s: %w", n.Hostname, err))
		}
		// Scrape targets in a directory a reboot empties (/run) come back.
		if n.Status == joinkeys.StatusRegistered {
			if err := s.syncScrapeTarget(ctx, n); err != nil {
				errs = append(errs, fmt.Errorf("DCGM scrape target of %s: %w", n.Hostname, err))
			}
		}
		restored++
	}
	peers, err := s.peers.Peers(ctx)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	removed := 0
	for _, p := range peers {
		if !want[p.PublicKey.String()] {
			if err := s.peers.RemovePeer(ctx, p.PublicKey); err != nil && !errors.Is(err, mesh.ErrPeerNotFound) {
				errs = append(errs, err)
				continue
			}
			removed++
		}
	}
	s.log.InfoContext(ctx, "mesh restored from the ledger", "peers", restored, "stale_peers_removed", removed)
	return errors.Join(errs...)
}

// dropPodCIDR clears a pod CIDR outside the cluster's pod range from the
// ledger and takes its route out of the device (a route there is the
// master's own, never taken away).
func (s *Service) dropPodCIDR(ctx context.Context, n joinkeys.Node) error {
	s.log.WarnContext(ctx, "a node's recorded pod CIDR is outside the cluster's pod range: cleared", "hostname", n.Hostname, "pod_cidr", n.PodCIDR)
	if _, err := s.ledger.SetNodePodCIDR(ctx, n.Hostname, netip.Prefix{}); err != nil {
		return fmt.Errorf("clear the pod CIDR of %s: %w", n.Hostname, err)
	}
	if s.routes != nil {
		if err := s.routes.Delete(ctx, n.PodCIDR); err != nil {
			return fmt.Errorf("remove the route of %s's pod CIDR %s: %w", n.Hostname, n.PodCIDR, err)
		}
	}
	return nil
}

// ReleaseHalfFinishedJoins releases nodes that validated but did not
// register within Config.ValidatedTTL: their address, their peer and
// their hostname go back. A node that registers meanwhile is left alone
// (the release is conditional on the record read). It returns the
// hostnames released.
func (s *Service) ReleaseHalfFinishedJoins(ctx context.Context) ([]string, error) {
	nodes, err := s.ledger.Nodes(ctx)
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
		unlock, err := s.locks.Lock(ctx, n.Hostname)
		if err != nil {
			return released, err
		}
		ok, err := s.releaseHalfFinished(ctx, n)
		unlock()
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			released = append(released, n.Hostname)
		}
	}
	return released, errors.Join(errs...)
}

func (s *Service) releaseHalfFinished(ctx context.Context, n joinkeys.Node) (bool, error) {
	if err := s.peers.RemovePeer(ctx, n.PublicKey); err != nil && !errors.Is(err, mesh.ErrPeerNotFound) {
		return false, err
	}
	_, err := s.ledger.ReleaseIfUnchanged(ctx, n, "gridweave", fmt.Sprintf("validated at %s and never registered within %s", n.UpdatedAt.Format(time.RFC3339), s.cfg.ValidatedTTL))
	switch {
	case errors.Is(err, joinkeys.ErrNodeChanged), errors.Is(err, joinkeys.ErrNodeNotFound):
		// It registered (or left) meanwhile: give its peer back.
		if fresh, err := s.ledger.Node(ctx, n.Hostname); err == nil && fresh.Status != joinkeys.StatusDisconnected {
			return false, s.peers.UpsertPeer(ctx, s.PeerOf(fresh))
		}
		return false, nil
	case err != nil:
		return false, err
	}
	// A Node k3s registered before the node gave up had its pod CIDR
	// routed: the route goes with the node.
	if err := s.unroute(ctx, n.PodCIDR); err != nil {
		return true, fmt.Errorf("remove the pod CIDR route of %s: %w", n.Hostname, err)
	}
	s.log.InfoContext(ctx, "half-finished join released", "hostname", n.Hostname, "vpn_ip", n.VPNIP)
	return true, nil
}

// SyncNode brings one ledger node in step with its Kubernetes Node: the
// pod CIDR Kubernetes gave it (ledger, peer and route) and what the
// placement keeps on the Node. A Node the ledger does not know, or whose
// mark (MarkLabel) is not the ledger node's, is not the fleet's and is
// left alone.
func (s *Service) SyncNode(ctx context.Context, kn KubeNode) error {
	unlock, err := s.locks.Lock(ctx, kn.Name)
	if err != nil {
		return err
	}
	defer unlock()
	return s.syncNodeLocked(ctx, kn)
}

// syncOrPark is SyncNode for the watch's events: it does not wait for a
// hostname's lock (a teardown may hold it through a drain of up to an
// hour, and the watch delivers every Node's events one after another),
// but parks the event, superseding one parked before, for syncParked.
func (s *Service) syncOrPark(ctx context.Context, kn KubeNode) {
	unlock, ok := s.locks.TryLock(kn.Name)
	s.parkedMu.Lock()
	if !ok {
		if s.parked == nil {
			s.parked = map[string]KubeNode{}
		}
		s.parked[kn.Name] = kn
		s.parkedMu.Unlock()
		return
	}
	delete(s.parked, kn.Name) // this event is newer
	s.parkedMu.Unlock()
	defer unlock()
	if err := s.syncNodeLocked(ctx, kn); err != nil {
		s.log.WarnContext(ctx, "syncing a Kubernetes node", "node", kn.Name, "err", err)
	}
}

// syncParked syncs each parked event whose hostname's lock is free now.
// The event is taken under the lock, so a newer one the watch parks
// meanwhile is synced after it, never before.
func (s *Service) syncParked(ctx context.Context) {
	s.parkedMu.Lock()
	names := slices.Collect(maps.Keys(s.parked))
	s.parkedMu.Unlock()
	for _, name := range names {
		unlock, ok := s.locks.TryLock(name)
		if !ok {
			continue
		}
		s.parkedMu.Lock()
		kn, parked := s.parked[name]
		delete(s.parked, name)
		s.parkedMu.Unlock()
		if parked {
			if err := s.syncNodeLocked(ctx, kn); err != nil {
				s.log.WarnContext(ctx, "syncing a Kubernetes node", "node", kn.Name, "err", err)
			}
		}
		unlock()
	}
}

// parkedRetry is how often Run looks for parked Node events to sync.
const parkedRetry = time.Second

// syncNodeLocked is SyncNode with kn's hostname locked.
func (s *Service) syncNodeLocked(ctx context.Context, kn KubeNode) error {
	if kn.Deleted {
		return s.observeForeign(ctx, kn.Name, nil)
	}
	if kn.Labels[PoolLabel] != "" && s.nodes != nil {
		// The pool label of older servers, which a kubelet may set on its
		// own Node: no group selects it now, and it goes.
		if err := s.nodes.SetLabel(ctx, kn, PoolLabel, ""); err != nil {
			return err
		}
	}
	n, err := s.ledger.Node(ctx, kn.Name)
	if errors.Is(err, joinkeys.ErrNodeNotFound) {
		// Not the fleet's (a mark is no proof: a kubelet labels its own
		// Node; the node that validates later is cleared at register): its
		// pods, and the addresses of a Node no join made, are the master's
		// to route, so no node's pod CIDR may overlap them. A Node with a
		// mark was made by a machine that joined (its kubelet wrote the
		// label and writes the addresses), perhaps one that relabeled its
		// Node and left: its addresses are that machine's word.
		return s.foreignNode(ctx, kn, kn.Labels[MarkLabel] != "")
	}
	if err != nil {
		return err
	}
	if !s.marks.Owns(kn, n) {
		// A Node of the same name that k3s did not register for this
		// node: its pod CIDR is not routed into the tunnel, nothing of it
		// is changed, and no node's pod CIDR may overlap it.
		return s.foreignNode(ctx, kn, true)
	}
	if err := s.observeForeign(ctx, kn.Name, nil); err != nil {
		return err
	}
	if n.Status == joinkeys.StatusDisconnected {
		return nil
	}
	if kn.PodCIDR.IsValid() && kn.PodCIDR != n.PodCIDR {
		if err := s.CheckPodCIDR(kn.PodCIDR); err != nil {
			// The machine's Node says what the cluster never gave it: the
			// pod CIDR is not recorded, routed or allowed.
			s.log.WarnContext(ctx, "a Node's pod CIDR refused", "hostname", n.Hostname, "pod_cidr", kn.PodCIDR, "err", err)
			return s.observePlacement(ctx, n, kn)
		}
		if err := s.readServiceRanges(ctx); err != nil {
			return err
		}
		old := n.PodCIDR
		if n, err = s.ledger.SetNodePodCIDR(ctx, n.Hostname, kn.PodCIDR); err != nil {
			return err
		}
		if err := s.peers.UpsertPeer(ctx, s.PeerOf(n)); err != nil {
			return err
		}
		if err := s.unroute(ctx, old); err != nil {
			return err
		}
		if err := s.route(ctx, kn.PodCIDR); err != nil {
			return err
		}
		s.log.InfoContext(ctx, "pod CIDR routed to its node", "hostname", n.Hostname, "pod_cidr", kn.PodCIDR)
	}
	return s.observePlacement(ctx, n, kn)
}

// observePlacement tells the placement of a registered node's Node.
func (s *Service) observePlacement(ctx context.Context, n joinkeys.Node, kn KubeNode) error {
	if s.placement != nil && n.Status == joinkeys.StatusRegistered {
		return s.placement.Observe(ctx, n, kn)
	}
	return nil
}

// Run does the fleet's background work until ctx ends: it restores the
// mesh from the ledger, keeps pod CIDRs and the placement in step with
// the Kubernetes Nodes (which also repairs drift after a restart; a Node
// whose hostname is locked, by a teardown that drains it say, is synced
// once the lock is free, and holds up no other Node's sync), and
// every Config.ReapInterval releases half-finished joins and compacts the
// audit trail (joinkeys.Keyring.CompactAudit).
func (s *Service) Run(ctx context.Context) error {
	if err := s.RestoreMesh(ctx); err != nil {
		s.log.ErrorContext(ctx, "restoring the mesh from the ledger", "err", err)
	}
	if r, ok := s.placement.(interface{ Reconcile(context.Context) error }); ok {
		// The worker groups as the ledger has them, with this server's
		// selectors (an older server's may select a label a kubelet sets).
		if err := r.Reconcile(ctx); err != nil {
			s.log.WarnContext(ctx, "bringing the worker groups to the ledger", "err", err)
		}
	}
	watched := make(chan error, 1)
	if s.nodes != nil {
		go func() {
			watched <- s.nodes.Watch(ctx, func(kn KubeNode) { s.syncOrPark(ctx, kn) })
		}()
	}
	tick := time.NewTicker(s.cfg.ReapInterval)
	defer tick.Stop()
	parked := time.NewTicker(parkedRetry)
	defer parked.Stop()
	for {
		select {
		case <-parked.C:
			s.syncParked(ctx)
		case <-ctx.Done():
			if s.nodes != nil {
				return <-watched
			}
			return nil
		case err := <-watched:
			if ctx.Err() != nil {
				return err
			}
			// The watch could not start (or ended on its own): the
			// Kubernetes Nodes are no longer followed.
			return fmt.Errorf("fleet: watching the Kubernetes Nodes stopped: %v", err)
		case <-tick.C:
			if _, err := s.ReleaseHalfFinishedJoins(ctx); err != nil {
				s.log.WarnContext(ctx, "releasing half-finished joins", "err", err)
			}
			if _, err := s.ledger.CompactAudit(ctx); err != nil {
				s.log.WarnContext(ctx, "compacting the audit trail", "err", err)
			}
		}
	}
}

// FollowLedger brings the mesh to the ledger, changing only what differs:
// a peer (and its pod CIDR's route) for every node that is not
// disconnected, and no other peer (its pod CIDR's route goes with it); a
// scrape target for every registered GPU node, and no other. It returns
// how many peers it added, changed or removed. The leader of several
// server replicas calls it every few seconds, so that what other replicas
// wrote to the shared ledger (joins, registrations, leaves) reaches its
// device, routes and targets; RestoreMesh is the full pass made at start.
func (s *Service) FollowLedger(ctx context.Context) (int, error) {
	// The peers first: a join this server makes after the read is in the
	// ledger read next, so its peer is never taken for a stray.
	peers, err := s.peers.Peers(ctx)
	if err != nil {
		return 0, err
	}
	nodes, err := s.ledger.Nodes(ctx)
	if err != nil {
		return 0, err
	}
	held := make(map[wgkey.Key]mesh.Peer, len(peers))
	for _, p := range peers {
		held[p.PublicKey] = p
	}
	changed := 0
	var errs []error
	targets := map[string]string{}
	// The pod CIDRs live nodes hold: a route another node now needs is
	// never taken away with a peer that held it before.
	live := map[netip.Prefix]bool{}
	for _, n := range nodes {
		if n.Status != joinkeys.StatusDisconnected && n.PodCIDR.IsValid() && s.CheckPodCIDR(n.PodCIDR) == nil {
			live[n.PodCIDR] = true
		}
	}
	var stale []netip.Prefix
	for _, n := range nodes {
		if n.Status == joinkeys.StatusRegistered && len(n.GPUs) > 0 {
			targets[n.Hostname] = fmt.Sprintf("%s %s %d", n.VPNIP, n.GPUs[0].Name, len(n.GPUs))
		}
		if n.Status == joinkeys.StatusDisconnected {
			continue
		}
		want, err := mesh.Normalize(s.PeerOf(n))
		if err != nil {
			errs = append(errs, fmt.Errorf("peer of %s: %w", n.Hostname, err))
			continue
		}
		have, ok := held[n.PublicKey]
		delete(held, n.PublicKey)
		if ok && slices.Equal(have.AllowedIPs, want.AllowedIPs) {
			continue
		}
		if err := s.peers.UpsertPeer(ctx, want); err != nil {
			errs = append(errs, fmt.Errorf("peer of %s: %w", n.Hostname, err))
			continue
		}
		if ok {
			stale = append(stale, have.AllowedIPs...) // a pod CIDR it held before
		}
		changed++
		if err := s.route(ctx, n.PodCIDR); err != nil {
			errs = append(errs, fmt.Errorf("pod CIDR route of %s: %w", n.Hostname, err))
		}
	}
	for key, p := range held {
		if err := s.peers.RemovePeer(ctx, key); err != nil && !errors.Is(err, mesh.ErrPeerNotFound) {
			errs = append(errs, err)
			continue
		}
		changed++
		stale = append(stale, p.AllowedIPs...)
	}
	for _, prefix := range stale {
		if prefix.IsSingleIP() || live[prefix] {
			continue // a VPN address (the device's own prefix routes it), or still a node's
		}
		if err := s.unroute(ctx, prefix); err != nil {
			errs = append(errs, fmt.Errorf("pod CIDR route %s: %w", prefix, err))
		}
	}
	errs = append(errs, s.followTargets(ctx, nodes, targets))
	if changed > 0 {
		s.log.InfoContext(ctx, "mesh follows the ledger", "peers_changed", changed)
	}
	return changed, errors.Join(errs...)
}

// followTargets writes the scrape targets that differ from what it last
// wrote and removes those of nodes no longer registered with GPUs.
func (s *Service) followTargets(ctx context.Context, nodes []joinkeys.Node, want map[string]string) error {
	if s.targets == nil {
		return nil
	}
	s.followMu.Lock()
	defer s.followMu.Unlock()
	if s.followed == nil {
		s.followed = map[string]string{}
	}
	var errs []error
	for _, n := range nodes {
		w, ok := want[n.Hostname]
		if !ok || s.followed[n.Hostname] == w {
			continue
		}
		if err := s.syncScrapeTarget(ctx, n); err != nil {
			errs = append(errs, fmt.Errorf("DCGM scrape target of %s: %w", n.Hostname, err))
			continue
		}
		s.followed[n.Hostname] = w
	}
	for host := range s.followed {
		if _, ok := want[host]; ok {
			continue
		}
		if err := s.targets.Remove(host); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(s.followed, host)
	}
	return errors.Join(errs...)
}
