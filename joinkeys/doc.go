// Package joinkeys owns the onboarding ledger of a Gridweave cluster: org
// join keys (random, high-entropy secrets stored only as a hash and compared
// in constant time), provider keys (HS256 JWTs whose jti is stored so they can
// be listed and revoked, and which also authenticate the provider), the node
// ledger that binds a hostname to one WireGuard public key and one VPN IP
// from a configured CIDR, node tokens for re-joins, and the audit trail.
//
// The logic lives in a concrete Keyring over a small Store interface that
// only stores. joinkeys/sqlitestore keeps the ledger in SQLite;
// joinkeys/memstore keeps it in memory; joinkeys/storetest is the
// conformance suite both pass. This package never imports SQLite.
package joinkeys
