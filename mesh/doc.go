// Package mesh owns the master's WireGuard peers. A Mesh reports its device's
// public key and upserts, removes and lists peers, each peer a public key with
// the overlay prefixes it may use and an optional endpoint and keepalive.
//
// mesh/wgmesh programs a kernel or userspace (wireguard-go) device through
// wgctrl, sending only differences; mesh/memmesh keeps peers in memory;
// mesh/meshtest is the conformance suite both pass. This package never
// imports wgctrl.
package mesh
