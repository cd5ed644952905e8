// Package wgkey is the WireGuard key value type shared by mesh (peers) and
// joinkeys (the node ledger): 32 bytes, written as standard base64 the way
// `wg` prints them, parsed strictly, and usable as a map key.
package wgkey
