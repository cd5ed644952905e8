// Package mesh owns the master's WireGuard peers. A Mesh reports its
// device's public key and upserts, removes and lists peers; a Peer is a
// public key with the overlay prefixes it may use (its VPN address and pod
// CIDR) and an optional endpoint and keepalive.
//
// An allowed IP belongs to exactly one peer. WireGuard itself would move a
// prefix silently from its holder to the newcomer, leaving a stale peer that
// lost its route; a Mesh instead refuses such an upsert with
// *AllowedIPConflictError (errors.Is ErrAllowedIPHeld), naming the holder, so
// that the caller removes the stale peer on purpose. The node ledger
// (joinkeys) never hands out one VPN address twice, so the conflict only
// arises when a removal was missed.
//
// mesh/wgmesh programs a kernel or userspace (wireguard-go) device through
// wgctrl, sending only differences; mesh/memmesh keeps peers in memory;
// mesh/meshtest is the conformance suite both pass and an interceptor for
// fault injection. This package never imports wgctrl.
package mesh
