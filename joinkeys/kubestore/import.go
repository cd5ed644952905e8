package kubestore

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"gridweave.dev/joinkeys"
)

var _ joinkeys.Importer = (*Store)(nil)

// Import implements joinkeys.Importer. The API server has no transaction
// for it: Import refuses a namespace that holds any ledger object, writes
// keys, then nodes (each with its claims, at its own address), then the
// audit trail in order, and stops at the first error; joinkeys.Migrate
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
	for _, n := range l.Nodes {
		if err := s.importNode(ctx, n); err != nil {
			return fmt.Errorf("node %s: %w", n.Hostname, err)
		}
	}
	for _, e := range l.Audit {
		if err := s.appendAudit(ctx, e); err != nil {
			return err
		}
	}
	return s.loadAddresses(ctx, true)
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

// importNode takes n's claims, at its own address, and creates it.
func (s *Store) importNode(ctx context.Context, n joinkeys.NodeRecord) error {
	reservation := newReservationID()
	if _, err := s.claimPublicKey(ctx, n.PublicKey, n.Hostname, reservation); err != nil {
		return err
	}
	if n.PodCIDR.IsValid() {
		if err := s.claimPodCIDR(ctx, n.Hostname, reservation, n.PodCIDR, false); err != nil {
			return err
		}
	}
	_, err := s.claims.create(ctx, s.claims.new(addressClaim(n.VPNIP), map[string]string{labelClaim: "address"}, claimSpec{Hostname: n.Hostname, Reservation: reservation}))
	if apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("address %s is held twice", n.VPNIP)
	}
	if err != nil {
		return err
	}
	spec := nodeSpec{
		PublicKey: n.PublicKey.String(), VPNIP: n.VPNIP.String(), Org: n.Org, JoinKeyID: n.JoinKeyID,
		Version: n.Version, GPUs: n.GPUs, PodCIDR: prefixString(n.PodCIDR), Status: n.Status,
		CreatedAt: n.CreatedAt, UpdatedAt: n.UpdatedAt, RegisteredAt: n.RegisteredAt, LastSeen: n.LastSeen,
		TokenHash: n.TokenHash, PoolID: n.PoolID, Reservation: reservation,
	}
	_, err = s.nodes.create(ctx, s.nodes.new(n.Hostname, nil, spec))
	return err
}
