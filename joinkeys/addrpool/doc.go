// Package addrpool is the address arithmetic behind the node ledger's VPN
// pool: an IPv4 range with reserved addresses, and the allocation rule a
// store applies inside its own transaction (the lowest released address
// first, else the next never-used one). Addresses are handled as integers
// here because that is how stores index them.
//
// It is storage plumbing: users of joinkeys configure a joinkeys.Pool;
// only Store implementations (joinkeys/sqlitestore, joinkeys/memstore)
// import this package.
package addrpool
