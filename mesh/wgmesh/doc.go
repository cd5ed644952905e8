// Package wgmesh is the mesh.Mesh of a real WireGuard device, driven through
// wgctrl: a kernel device over netlink, or a userspace one (wireguard-go)
// over its UAPI socket in /var/run/wireguard.
//
// It programs differences only. At New it reads the device once; from then
// on it keeps the peer set it programmed and sends, per upsert, one peer's
// changes: ReplaceAllowedIPs only when that peer's prefixes changed, the
// endpoint only when it changed, nothing at all when nothing did. It never
// sends ReplacePeers, which would drop every session (and which wgctrl
// splits into non-atomic batches on Linux). Writers are serialised by one
// mutex, so the cost of an upsert does not grow with the number of peers.
//
// It assumes it is the only writer of the device's peers; after anything
// else changed them (wg set, a restart), call Resync.
package wgmesh
