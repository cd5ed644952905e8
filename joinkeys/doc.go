// Package joinkeys owns the onboarding ledger of a Gridweave cluster: org
// join keys (random, high-entropy secrets stored only as a hash and compared
// in constant time), provider keys (HS256 JWTs whose jti is stored so they can
// be listed and revoked, and which also authenticate the provider), the node
// ledger that binds a hostname to one WireGuard public key and one VPN IP
// from a configured CIDR, node tokens, and the audit trail.
//
// Identity: a join key admits a new machine once (validate, then register
// while the reservation is still "validated"); every later re-validate,
// register or version report presents the node token the first validate
// returned. A pod CIDR is never the node's to claim: the service records
// the one Kubernetes gave it (SetNodePodCIDR), and the ledger refuses one
// that overlaps the VPN pool, the master's prefixes or another node's.
//
// Concurrency: every node write is a compare-and-swap on the node's
// revision (one store-wide counter, never reused). The Keyring retries a
// write that lost the race from a fresh read and checks the caller's
// credentials again there, so a write in flight while a node is released
// and its hostname taken by another machine never lands on the new record.
// Audit events are written even when the caller went away.
//
// The logic lives in a concrete Keyring over a small Store interface that
// only stores. joinkeys/sqlitestore keeps the ledger in SQLite;
// joinkeys/kubestore as objects of the Kubernetes API, which several
// servers can share, and joinkeys/leaderstore lets only the leader of them
// write it; joinkeys/memstore keeps it in memory;
// joinkeys/storetest is the conformance suite they pass; Migrate copies a
// ledger from one store to another; joinkeys/addrpool is the address arithmetic
// stores share. Types that carry secrets (MintedKey, JoinRequest,
// JoinResult, Registration) format and log themselves without them. This
// package never imports SQLite.
package joinkeys
