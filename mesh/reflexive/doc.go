// Package reflexive tells a machine how the world sees its UDP port: the
// master's reflexive-address service, and the probe a node runs against
// it to learn how its NAT maps.
//
// Serve answers STUN binding requests (RFC 8489, through pion/stun) with
// the address and port each request came from. The master runs it on two
// ports beside its WireGuard port. Probe sends a binding request from one
// local socket to each of the two and compares what they saw:
//
//   - the same address and port at both: the NAT maps a local port to one
//     public port whatever the destination (endpoint-independent mapping),
//     so the address the master sees the node's WireGuard packets come
//     from is the one other nodes can send to, once the node has sent to
//     them (each side's handshake opens its own NAT to the other);
//   - a different port for each destination: a "symmetric" NAT (mapping
//     that depends on the destination): what the master sees is no use to
//     another node, and a direct link fails unless the other side has no
//     NAT at all;
//   - the local address and port itself: no NAT on the way.
//
// The probe's socket is not the WireGuard device's (kernel WireGuard or
// wireguard-go own theirs), so it tells the NAT's behaviour, not the
// device port's own mapping: behind a NAT that keeps ports where it can,
// two machines using one port get a port of their own for a destination
// they share, which the probe does not see. Two ports of one host tell
// a mapping that depends on the destination port, not one that depends on
// its address alone. It is a label for the links' reasons; the links
// themselves go by what handshakes achieve.
//
// Serve is no amplifier: it answers only requests at least as long as
// the answer and signed with a FINGERPRINT (Probe pads its own with a
// SOFTWARE attribute), and only a few a second to one source address.
package reflexive
