// Package fleet is the node lifecycle of a Gridweave cluster, beneath the
// HTTP layer: a machine is admitted (Validate: its credential, then its
// fields, then a VPN address reserved in the ledger and its WireGuard peer
// added), completes its join once its tunnel is up (Register: its GPUs
// recorded, its pod CIDR taken from Kubernetes and routed into the tunnel,
// a GPU machine counted in its pool's Ray worker group, its DCGM scrape
// target written), reports its version (ReportVersion), and goes (Leave by
// itself, Disconnect by an administrator: worker, target, Kubernetes Node,
// route, peer and ledger row, in that order, each step idempotent). Run
// keeps the master in step with the ledger: the mesh restored at start
// (RestoreMesh), the Kubernetes Nodes followed (SyncNode: pod CIDRs, pool
// labels), half-finished joins released (ReleaseHalfFinishedJoins).
//
// A Service is built by New from a Config and its Backends, each a seam
// with a real and an in-memory implementation:
//
//	seam       real                          in memory
//	ledger     *joinkeys.Keyring (SQLite)    *joinkeys.Keyring (memstore)
//	Peers      mesh/wgmesh                   mesh/memmesh
//	Routes     DeviceRoutes (netlink)        memfleet.Routes
//	Nodes      KubeNodes (client-go)         memfleet.Nodes
//	Placement  RayGroups (KubeRay)           memfleet.Placement
//	Targets    *scrapetargets.Dir            memfleet.Targets
//	ServiceRanges KubeServiceCIDRs           memfleet.ServiceRanges
//
// Package fleettest holds one conformance table per seam (Nodes, Routes,
// Placement, Targets); the real backends and memfleet's pass the same
// tables, so the fleet's tests on the in-memory backends hold for the
// real ones.
//
// A Kubernetes Node is the fleet's only when k3s registered it with the
// mark of the node's WireGuard key (MarkLabel, Mark; validate's
// NodeLabels): the fleet labels, annotates, routes and deletes no other,
// refuses a first join under another's name (ErrHostnameInCluster), and
// keeps the pod CIDRs and addresses of the others, with the cluster's
// Service ranges and Config.MasterPrefixes, as the ledger's master
// prefixes, which no node's pod CIDR may overlap.
//
// RayGroups puts GPU machines into one worker group per kind of machine
// (GPU vendor, model and count: Pool, PoolOf) of one RayCluster, so the
// cluster grows with the kinds of machine, not the machines; concurrent
// registrations share its writes.
//
// Errors are typed: *Error (ErrInvalid with the field at fault,
// ErrCredentialRequired, ErrPublicKeyMismatch, ErrHostnameInCluster), *VersionMismatchError, and
// the ledger's own (joinkeys.ErrKeyExpired, *joinkeys.HostnameTakenError,
// ...), which pass through unchanged; package gridweave maps them all to
// HTTP in one place. The work on one hostname is serialised, so a teardown
// and a re-join of the same machine never interleave.
package fleet
