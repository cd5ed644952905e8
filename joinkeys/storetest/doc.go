// Package storetest is the conformance suite for joinkeys.Store
// implementations. Run calls it with a constructor; every store in this
// module (sqlitestore, memstore) passes it, and so must any other. It
// exercises a store through a real joinkeys.Keyring, with an injected clock,
// including the concurrent cases that break naive stores: 500 parallel
// reservations, 50 racers for one hostname, and max_uses spent in parallel.
package storetest
