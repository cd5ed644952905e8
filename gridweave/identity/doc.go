// Package identity is a Gridweave master's identity, what every joined
// machine holds it to: its WireGuard key (each machine's tunnel names its
// public key), the public listener's TLS pair (each join command pins its
// key) and the JWT secret node tokens are signed with.
//
// A single master keeps the key and the pair as files in its directory,
// beside the ledger (Files), made at first start (WireGuardKey,
// PublicTLS); Backup and Restore copy them with the ledger, so that a
// master restored elsewhere keeps its tunnels and join commands. Replicas
// share one identity through a Secret (Share): the first replica makes it,
// from the files when a single master is being made highly available, and
// every replica writes its files from it. The replicas' channel to their
// leader is TLS with a pair every replica derives from the shared JWT
// secret (ChannelPair).
package identity
