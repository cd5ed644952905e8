// Package memstore is an in-memory joinkeys.Store: the ledger lives in maps
// behind one mutex, so a reservation is trivially atomic. The zero value is
// ready to use. It suits tests, examples and the embedded demo; nothing
// survives the process.
package memstore
