// Package keyedlock is a set of mutexes by name: one lock per key, taken
// with a context (a waiter gives up when its context ends), and forgotten
// when nobody holds or waits for it, so memory stays bounded however many
// keys a long-running process touches. Work on different keys never waits;
// TryLock takes a lock only when it is free.
// rayctl serialises a Client's writes of one RayCluster with it; the
// control-plane service its work on one node.
package keyedlock
