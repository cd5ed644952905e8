-- Join keys. Times are Unix nanoseconds (UTC); 0 means unset.
CREATE TABLE join_keys (
	id           TEXT PRIMARY KEY,
	kind         TEXT NOT NULL CHECK (kind IN ('org', 'provider')),
	org          TEXT NOT NULL,
	provider     TEXT NOT NULL DEFAULT '',
	secret_hash  BLOB,
	labels       TEXT NOT NULL DEFAULT '{}',
	created_by   TEXT NOT NULL DEFAULT '',
	created_at   INTEGER NOT NULL,
	expires_at   INTEGER NOT NULL,
	max_uses     INTEGER NOT NULL DEFAULT 0 CHECK (max_uses >= 0),
	uses         INTEGER NOT NULL DEFAULT 0 CHECK (uses >= 0),
	revoked_at   INTEGER NOT NULL DEFAULT 0,
	last_used_at INTEGER NOT NULL DEFAULT 0
);

-- The node ledger: one row per machine, unique by hostname, public key and
-- VPN address (an IPv4 address as an integer).
CREATE TABLE nodes (
	hostname      TEXT PRIMARY KEY,
	public_key    BLOB NOT NULL UNIQUE CHECK (length(public_key) = 32),
	vpn_ip        INTEGER NOT NULL UNIQUE,
	pool          TEXT NOT NULL,
	org           TEXT NOT NULL DEFAULT '',
	join_key_id   TEXT NOT NULL DEFAULT '',
	token_hash    BLOB NOT NULL,
	version       TEXT NOT NULL DEFAULT '',
	gpus          TEXT NOT NULL DEFAULT '[]',
	pod_cidr      TEXT NOT NULL DEFAULT '',
	status        TEXT NOT NULL CHECK (status IN ('validated', 'registered', 'disconnected')),
	created_at    INTEGER NOT NULL,
	updated_at    INTEGER NOT NULL,
	registered_at INTEGER NOT NULL DEFAULT 0,
	last_seen_at  INTEGER NOT NULL DEFAULT 0
);

-- Address allocation: per pool, the lowest never-used address, and the
-- addresses released by deleted nodes (reused lowest first).
CREATE TABLE ip_next (
	pool TEXT PRIMARY KEY,
	next INTEGER NOT NULL
);
CREATE TABLE ip_free (
	pool TEXT NOT NULL,
	ip   INTEGER NOT NULL,
	PRIMARY KEY (pool, ip)
) WITHOUT ROWID;

CREATE TABLE audit_events (
	id       INTEGER PRIMARY KEY AUTOINCREMENT,
	at       INTEGER NOT NULL,
	type     TEXT NOT NULL,
	key_id   TEXT NOT NULL DEFAULT '',
	hostname TEXT NOT NULL DEFAULT '',
	actor    TEXT NOT NULL DEFAULT '',
	reason   TEXT NOT NULL DEFAULT ''
);
CREATE INDEX audit_events_hostname ON audit_events (hostname);
CREATE INDEX audit_events_key_id ON audit_events (key_id);
