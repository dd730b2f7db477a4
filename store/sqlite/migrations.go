package sqlite

import "fmt"

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

// numberedMigrations are migrations that name their own version, so that
// features developed side by side do not fight over the next position of
// migrations (whose versions are their index). A numbered version must be
// above every positional one; the gap between is never applied.
var numberedMigrations = map[int]string{}

// schema is every migration by version: migrations, then the numbered ones
// at their versions, "" in the gaps.
func schema() []string {
	all := append([]string(nil), migrations...)
	for v, m := range numberedMigrations {
		if v < len(migrations) {
			panic(fmt.Sprintf("sqlite: numbered migration %d collides with positional migrations 1..%d", v, len(migrations)-1))
		}
		for len(all) <= v {
			all = append(all, "")
		}
		all[v] = m
	}
	return all
}
