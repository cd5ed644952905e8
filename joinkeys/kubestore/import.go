package kubestore

import (
	"context"
	"fmt"
	"net/netip"

	"gridweave.dev/joinkeys"
	"gridweave.dev/mesh/wgkey"
)

var _ joinkeys.Importer = (*Store)(nil)

// Import implements joinkeys.Importer. The API server has no transaction
// for it: Import refuses a namespace that holds any ledger object, writes
// keys, then nodes (each at its own address; none held twice), then the
// audit trail in order (in full batches), and stops at the first error; joinkeys.Migrate
// then reports the copy incomplete. Empty the namespace before a second
// try (kubectl delete joinkeys,ledgernodes,ledgerclaims,ledgerevents,
// podcidrtables --all).
func (s *Store) Import(ctx context.Context, l joinkeys.Ledger) error {
	if err := s.check(); err != nil {
		return err
	}
	held, err := s.holdsAnything(ctx)
	if err != nil {
		return err
	}
	if held {
		return fmt.Errorf("%w: namespace %s holds ledger objects", joinkeys.ErrNotEmpty, s.namespace)
	}
	for _, k := range l.Keys {
		if err := s.InsertKey(ctx, k); err != nil {
			return err
		}
	}
	addrs, keys := map[netip.Addr]string{}, map[wgkey.Key]string{}
	for _, n := range l.Nodes {
		if other, dup := addrs[n.VPNIP]; dup {
			return fmt.Errorf("node %s: address %s is held by %s too", n.Hostname, n.VPNIP, other)
		}
		if other, dup := keys[n.PublicKey]; dup {
			return fmt.Errorf("node %s: its public key is held by %s too", n.Hostname, other)
		}
		addrs[n.VPNIP], keys[n.PublicKey] = n.Hostname, n.Hostname
		if err := s.importNode(ctx, n); err != nil {
			return fmt.Errorf("node %s: %w", n.Hostname, err)
		}
	}
	if err := s.appendTrail(ctx, l.Audit); err != nil {
		return err
	}
	return s.Reload(ctx)
}

func (s *Store) holdsAnything(ctx context.Context) (bool, error) {
	found := false
	stop := func(object[struct{}]) bool { found = true; return false }
	for _, plural := range []string{resourceKeys, resourceNodes, resourceClaims, resourceEvents} {
		r := resource[struct{}]{client: s.keys.client, namespace: s.namespace, plural: plural}
		if err := r.each(ctx, "", stop); err != nil {
			return false, err
		}
		if found {
			return true, nil
		}
	}
	return false, nil
}

// importNode creates n at its own address.
func (s *Store) importNode(ctx context.Context, n joinkeys.NodeRecord) error {
	spec := nodeSpec{
		PublicKey: n.PublicKey.String(), VPNIP: n.VPNIP.String(), Org: n.Org, JoinKeyID: n.JoinKeyID,
		Version: n.Version, GPUs: n.GPUs, PodCIDR: prefixString(n.PodCIDR), Status: n.Status,
		CreatedAt: n.CreatedAt, UpdatedAt: n.UpdatedAt, RegisteredAt: n.RegisteredAt, LastSeen: n.LastSeen,
		TokenHash: n.TokenHash, PoolID: n.PoolID,
	}
	_, err := s.nodes.create(ctx, withKeyLabel(s.nodes.new(n.Hostname, nil, spec)))
	return err
}
