// Package peering links a node directly to every other node of the mesh,
// with the master as the fallback: the node side of direct tunnels.
//
// The node's WireGuard device starts with one peer, the master, which
// holds the whole VPN CIDR: everything goes through the hub. For each
// other node the master's peer directory names (public key, VPN address,
// pod CIDR, endpoints), a Manager adds a direct peer holding that node's
// VPN address and pod CIDR, with a persistent keepalive so the handshake
// starts at once:
//
//	connecting ──handshake──▶ direct
//	    │ no handshake within HandshakeTimeout
//	    ▼
//	 relayed ──(a later try, or the other side's, completes a handshake)──▶ direct
//
// A relayed node's peer keeps no allowed IP: its VPN address falls back
// under the master's VPN CIDR and its pod CIDR moves to the master's peer,
// so its packets go through the hub. The peer stays, so a handshake that
// completes later (the other node retried, or this one did after
// RetryMin, doubling to RetryMax, trying each endpoint in turn) brings the
// link back to direct without a gap. A direct link whose handshake goes
// stale (WireGuard renews it every two minutes while the link is alive)
// falls back the same way.
//
// Every change keeps WireGuard's rule that an allowed IP belongs to one
// peer: a prefix moving between two peers is first taken from one, then
// given to the other, in one configuration of the device. Each other
// node's pod CIDR is routed into the device (kernelroutes) whatever its
// link, so the device's allowed IPs pick the way.
//
// Through NATs. The directory names each node's endpoints: first where
// the master's device sees its packets come from (its NAT's public
// address and port), then the node's own addresses and any it
// advertises. Both nodes of a pair configure each other at about the
// same time, and WireGuard's handshake initiations are the probes: each
// side's opens its own NAT to the other's public endpoint, so the second
// one through completes the handshake. No separate connectivity check
// (ICE's) is run: it would have to leave from the device's own socket,
// which kernel WireGuard and wireguard-go own, and a WireGuard handshake
// is an authenticated check of the same path. How each node's NAT maps
// (package mesh/reflexive) comes with the directory, so a relayed link
// says why (api.RelayedReason): no endpoint known, a symmetric NAT on
// either side, handshakes that timed out, --hub-only, or idle. A direct
// link whose endpoint the master sees move (the other node's NAT mapped
// it anew) is pointed there at once, with a handshake.
//
// On demand (Options.OnDemand, or OnDemandAbove nodes): a node gets a
// peer only while Flows (the kernel's connection tracking) shows
// traffic to or from its VPN address or pod CIDR, and loses it IdleAfter
// the last; meanwhile it is relayed, "idle".
//
// Manager is driven by its caller: SetPeers with each answer of the
// directory, Step every second or so, Links for the report. The device
// and the routes are interfaces; WireGuardDevice is the real device
// (wgctrl, kernel WireGuard or wireguard-go).
package peering
