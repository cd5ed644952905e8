// Package memstore is an in-memory joinkeys.Store: the ledger lives in maps
// behind one mutex, so a reservation is trivially atomic and a node write
// checks its revision under the same lock. The zero value is ready to use.
// It suits tests and examples; nothing survives the process.
package memstore
