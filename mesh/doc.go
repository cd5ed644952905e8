// Package mesh owns the master's WireGuard peers. A Mesh reports its
// device's public key and upserts, removes and lists peers; a Peer is a
// public key with the overlay prefixes it may use (its VPN address and pod
// CIDR) and an optional endpoint and keepalive.
//
// An address belongs to at most one peer: an allowed IP may not overlap a
// prefix of another peer, whether it is the same prefix, inside it (a /32 in
// another peer's /24) or around it (a /16 over another peer's /24). WireGuard
// itself would move an equal prefix silently from its holder to the
// newcomer, and would route a nested one by longest prefix match, so part of
// one peer's traffic would go to the other. A Mesh instead refuses such an
// upsert with *AllowedIPConflictError (errors.Is ErrAllowedIPHeld), naming
// both prefixes and the holder, so that the caller removes the stale peer on
// purpose. A peer's own prefixes may nest. The node ledger (joinkeys) never
// hands out one VPN address twice, so the conflict only arises when a
// removal was missed or a pod CIDR was given out wrongly.
//
// mesh/wgmesh programs a kernel or userspace (wireguard-go) device through
// wgctrl, sending only differences, and notices a device that restarted or
// that someone else changed; mesh/memmesh keeps peers in memory;
// mesh/meshtest is the conformance suite both pass and an interceptor for
// fault injection; mesh/wgkey is the WireGuard key type (public and
// private) the mesh and joinkeys share. This package never imports wgctrl.
package mesh
