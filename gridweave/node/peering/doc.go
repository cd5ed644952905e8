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
// Manager is driven by its caller: SetPeers with each answer of the
// directory, Step every second or so, Links for the report. The device
// and the routes are interfaces; WireGuardDevice is the real device
// (wgctrl, kernel WireGuard or wireguard-go).
package peering
