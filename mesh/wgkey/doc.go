// Package wgkey is the WireGuard key value type shared by mesh (peers) and
// joinkeys (the node ledger): 32 bytes, written as standard base64 the way
// `wg` prints them, parsed strictly, and usable as a map key. Key is a
// public key; PrivateKey is a distinct type that never prints, logs or
// marshals its bytes unless asked to with Base64.
package wgkey
