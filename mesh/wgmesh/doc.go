// Package wgmesh is the mesh.Mesh of a real WireGuard device, driven through
// wgctrl: a kernel device over netlink, or a userspace one (wireguard-go)
// over its UAPI socket in /var/run/wireguard. OpenDevice adopts or makes
// the device; a userspace device it runs in this process has a Client that
// writes the device's configuration to it in place, sparing each write a
// connection to the socket (reads still go over the socket).
//
// It programs differences only. At New it reads the device once; from then
// on it keeps the peer set it programmed and sends, per upsert, one peer's
// changes: ReplaceAllowedIPs only when that peer's prefixes changed, the
// endpoint only when it changed, nothing at all when nothing did. It never
// sends ReplacePeers, which would drop every session (and which wgctrl
// splits into non-atomic batches on Linux). Writers are serialised by one
// mutex, and the overlap check looks only at the upsert's own prefixes, so
// the cost of an upsert does not grow with the number of peers.
//
// The cache is not trusted blindly. Reading the device back costs as much
// as dozens of upserts at 1,000 peers (wgctrl can only read every peer at
// once), so every call instead checks the device's identity, one stat: a
// restarted wireguard-go has a new UAPI socket, a re-created kernel device a
// new interface index. On a new device the call reads it and programs the
// peers that the old one had and the new one lacks (in one configuration,
// skipping any that would overlap a peer already there), then goes on; the
// device's own key is whatever it was given on restart. Changes that someone
// else makes to the same device (wg set, another writer) are taken on when
// the cache is older than Options.ResyncInterval (a minute by default): the
// first call after it reads the whole device and adopts its peers, so that a
// later upsert programs what is missing instead of reporting a no-op. A
// failed write also makes the next call read the device. Resync does the
// same read on demand.
package wgmesh
