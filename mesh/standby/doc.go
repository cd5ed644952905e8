// Package standby is the mesh of a server replica that drives the
// WireGuard device only while it is the leader. Until a device is
// attached, peers are kept in memory (the ledger, shared by every
// replica, is what the leader's device is rebuilt from) and routes are
// not made; Attach hands every call to the device from then on, Detach
// takes it back. Observe gives a replica without the device what the
// leader's device observed of each peer, so that every replica shows the
// same.
package standby
