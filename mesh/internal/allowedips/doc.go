// Package allowedips is the one-holder rule that every mesh backend
// enforces: a Table records which peer holds each allowed IP prefix and
// finds, for an upsert, a prefix that overlaps one held by another peer.
//
// Overlap means containment either way (equal, inside, around), because
// WireGuard routes by longest prefix match: a /32 inside another peer's /24
// takes that address from it. Finding the overlaps of one prefix costs a
// few map lookups (one per prefix length in use, for the prefixes around
// it) and a binary search (for the prefixes inside it), so an upsert checks
// only its own prefixes, never every pair.
package allowedips
