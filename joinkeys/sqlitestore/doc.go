// Package sqlitestore is the SQLite joinkeys.Store, on
// github.com/mattn/go-sqlite3 (cgo).
//
// The database runs in WAL mode with a busy timeout. Writes go through one
// connection, so they queue in Go rather than spin on SQLITE_BUSY, and each
// is a BEGIN IMMEDIATE transaction; reads use a small pool of read-only
// connections that WAL lets run beside the writer. A reservation — key spend,
// address allocation and node insert — is one transaction, and UNIQUE
// constraints on hostname, public key and VPN address back the Keyring's
// checks.
//
// Durability: synchronous=FULL. In WAL mode, NORMAL survives a crash of the
// process but may lose the last commits on power loss or a kernel crash,
// because it syncs the WAL only at checkpoints; FULL syncs the WAL at every
// commit, so a reservation that was acknowledged to a node survives power
// loss too. It costs one fsync per write, which the benchmarks include.
//
// The schema is versioned: migrations/NNNN_name.sql files are embedded and
// applied in order at Open, each in its own transaction, and recorded in
// schema_migrations.
package sqlitestore
