// Package kernelroutes puts prefixes into the kernel's main routing table
// through one WireGuard device, over netlink: what `ip route replace
// PREFIX dev DEVICE` writes, with no executable needed (a static binary
// works where no iproute2 is installed). The master routes each node's
// pod CIDR into its device this way, and a node the other nodes' pod
// CIDRs into its own. A prefix the main table already routes through
// anything else (a connected network, a default route, another device) is
// never taken over: Replace refuses it with ErrRouteNotOwned.
package kernelroutes
