// Package sqlitestore is the SQLite joinkeys.Store, on
// github.com/mattn/go-sqlite3 (cgo).
//
// The database runs in WAL mode with a busy timeout. Writes go through one
// connection, so they queue in Go rather than spin on SQLITE_BUSY, in BEGIN
// IMMEDIATE transactions; reads use a small pool of read-only connections
// that WAL lets run beside the writer. Writes that queue while another
// commits share one transaction (group commit), each in a savepoint of its
// own: one that fails or panics undoes only its own work, the batch
// commits once, and each caller is answered after that commit. If SQLite
// loses the shared transaction (after a full disk, say, or a failed
// commit), its writes run again, each alone, so each is answered what it
// alone comes to. A caller whose context ends before its write starts
// stops waiting, and its write never runs; one that started runs to its
// end. A reservation — key spend,
// address allocation and node insert — is one transaction, and UNIQUE
// constraints on hostname, public key and VPN address back the Keyring's
// checks.
//
// Durability: synchronous=FULL. In WAL mode, NORMAL survives a crash of the
// process but may lose the last commits on power loss or a kernel crash,
// because it syncs the WAL only at checkpoints; FULL syncs the WAL at every
// commit, so a reservation that was acknowledged to a node survives power
// loss too. It costs one fsync per commit, shared by the writes of a batch,
// which the benchmarks include.
//
// The schema is versioned: migrations/NNNN_name.sql files are embedded and
// applied in order at Open, each in its own transaction, and recorded in
// schema_migrations.
package sqlitestore
