// Package leaderstore makes one replica the only writer of a ledger that
// several replicas share: a Store reads from the shared ledger where it
// runs and hands every write to the replica that leads, which writes it
// to its own Store and answers what that Store answered.
//
// The leader serves its Store's writes with Handler, on a listener only
// the replicas reach, refusing any caller without the replicas' shared
// credential (Credential derives it from a secret of the master's
// identity) and refusing every write while it does not lead (a replica
// that lost its Lease, or never had it). Every other replica wraps its
// Store with New:
//
//	store, err := leaderstore.New(kube, leaderstore.Options{
//		Leader: func(ctx context.Context, refresh bool) (leaderstore.Target, error) {
//			return hub.Leader(ctx, refresh) // the leader's URL, or Self
//		},
//		Client:     pinnedClient,
//		Credential: leaderstore.Credential(jwtSecret),
//	})
//
// The reads a join makes and that must be fresh (Key: a revocation;
// Node and NodeByPublicKey: a node's token and key) are the leader's
// answers from its own Store, which holds what it wrote last, so they
// cost the shared ledger nothing; while no leader answers they go to the
// wrapped Store. Other reads (Nodes, Audit, ...) go to the wrapped Store:
// the ledger is shared, so they answer what the leader wrote. Writes
// (InsertKey, RevokeKey, ReturnKeyUse, ReserveNode, UpdateNode, DeleteNode,
// AppendAudit, PruneAudit) go to the leader's Handler over HTTP, or to
// the wrapped Store when this replica leads (Target.Self). A write the
// leader answered comes back as the error the leader's Store returned:
// errors.Is and errors.As hold for the joinkeys sentinels and error
// types, and a Kubernetes API status stays one (apierrors.Is*).
//
// While no leader answers (none is elected yet, it died, or the one
// asked no longer leads), a write waits for one and tries again, for at
// most Options.Wait; nothing was written by an attempt that was refused
// or never reached the leader, so trying again is safe. A write whose
// answer was lost after it was sent (the leader died mid-write) is not
// tried again: its outcome is unknown, and the caller gets
// ErrLeaderUnavailable, as when the wait ends. A reservation is the one
// write whose outcome the follower can learn: its node token is new, so
// a node under its hostname with that token's hash is this reservation,
// landed, and ReserveNode returns it. A write once sent waits for its
// answer even when its caller goes away: the leader finishes it anyway.
// A write the channel refuses before the leader's Store sees it (a
// credential the replicas do not share, a body of a version the leader
// cannot read) is ErrLeaderUnavailable too.
package leaderstore
