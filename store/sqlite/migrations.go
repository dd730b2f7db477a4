package sqlite

// migrations are applied in order, each in its own transaction, and recorded
// in schema_migrations. Never edit a shipped migration: append a new one
// (approvals, API keys and sessions will arrive this way).
var migrations = []string{
	1: `
CREATE TABLE keys (
	id          TEXT PRIMARY KEY,
	state       TEXT NOT NULL CHECK (state IN ('active', 'retired')),
	check_value BLOB NOT NULL,
	created     INTEGER NOT NULL
);
CREATE TABLE items (
	id          TEXT PRIMARY KEY,
	org         TEXT NOT NULL,
	owner       TEXT NOT NULL,
	kind        TEXT NOT NULL,
	label       TEXT NOT NULL,
	created     INTEGER NOT NULL,
	updated     INTEGER NOT NULL,
	fields      TEXT NOT NULL,
	key_id      TEXT NOT NULL REFERENCES keys (id),
	wrapped_key BLOB NOT NULL,
	meta        BLOB NOT NULL,
	UNIQUE (org, kind, label)
);
CREATE INDEX items_org_created ON items (org, created, id);
CREATE TABLE item_values (
	item_id TEXT NOT NULL REFERENCES items (id) ON DELETE CASCADE,
	field   TEXT NOT NULL,
	value   BLOB NOT NULL,
	PRIMARY KEY (item_id, field)
);
CREATE TABLE label_seq (
	org  TEXT NOT NULL,
	kind TEXT NOT NULL,
	last INTEGER NOT NULL,
	PRIMARY KEY (org, kind)
);
CREATE TABLE audit (
	seq         INTEGER PRIMARY KEY AUTOINCREMENT,
	time        INTEGER NOT NULL,
	action      TEXT NOT NULL,
	org         TEXT NOT NULL,
	item_id     TEXT NOT NULL,
	kind        TEXT NOT NULL,
	field       TEXT NOT NULL,
	destination TEXT NOT NULL,
	session     TEXT NOT NULL,
	actor       TEXT NOT NULL,
	purpose     TEXT NOT NULL,
	value_hmac  BLOB
);
CREATE INDEX audit_org_time ON audit (org, time);
CREATE INDEX audit_item ON audit (item_id);
CREATE INDEX audit_session ON audit (session);
CREATE TABLE blobs (
	name        TEXT PRIMARY KEY,
	key_id      TEXT NOT NULL REFERENCES keys (id),
	wrapped_key BLOB NOT NULL,
	data        BLOB NOT NULL,
	updated     INTEGER NOT NULL
);
`,
}
