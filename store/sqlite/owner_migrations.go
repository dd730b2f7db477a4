package sqlite

// The owner side's tables (package owner): API keys, card policies,
// authorized destinations, the approval queue, the spending ledger, owner
// accounts, dashboard sessions and pre-approved signups. Added as a new
// migration; migration 1 is untouched.
func init() {
	migrations = append(migrations, `
CREATE TABLE api_keys (
	id                TEXT PRIMARY KEY,
	org               TEXT NOT NULL,
	name              TEXT NOT NULL,
	secret_hash       BLOB NOT NULL,
	all_cards         INTEGER NOT NULL,
	card_ids          TEXT NOT NULL,
	all_logins        INTEGER NOT NULL,
	login_ids         TEXT NOT NULL,
	can_create_logins INTEGER NOT NULL,
	created           INTEGER NOT NULL,
	revoked_at        INTEGER
);
CREATE INDEX api_keys_org ON api_keys (org, created);
CREATE TABLE card_policies (
	org               TEXT NOT NULL,
	card_id           TEXT NOT NULL,
	currency          TEXT NOT NULL,
	paused            INTEGER NOT NULL,
	blocked_merchants TEXT NOT NULL,
	per_purchase_cap  INTEGER,
	daily_cap         INTEGER,
	monthly_cap       INTEGER,
	approval_threshold INTEGER,
	every_purchase    INTEGER NOT NULL,
	live_cvv          INTEGER NOT NULL,
	strict_amount     INTEGER NOT NULL,
	updated           INTEGER NOT NULL,
	updated_by        TEXT NOT NULL,
	PRIMARY KEY (org, card_id)
);
CREATE TABLE destinations (
	org      TEXT NOT NULL,
	host     TEXT NOT NULL,
	added_by TEXT NOT NULL,
	added    INTEGER NOT NULL,
	PRIMARY KEY (org, host)
);
CREATE TABLE approvals (
	id              TEXT PRIMARY KEY,
	org             TEXT NOT NULL,
	kind            TEXT NOT NULL CHECK (kind IN ('new_destination', 'purchase', 'cvv_entry', 'signup')),
	reason          TEXT NOT NULL,
	site            TEXT NOT NULL,
	amount_minor    INTEGER,
	amount_currency TEXT NOT NULL,
	card_id         TEXT NOT NULL,
	api_key_id      TEXT NOT NULL,
	session         TEXT NOT NULL,
	created         INTEGER NOT NULL,
	expires         INTEGER NOT NULL,
	status          TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
	decided_by      TEXT NOT NULL,
	decided_at      INTEGER,
	dedupe          TEXT NOT NULL
);
CREATE UNIQUE INDEX approvals_pending_dedupe ON approvals (dedupe) WHERE status = 'pending';
CREATE INDEX approvals_status ON approvals (status, expires);
CREATE INDEX approvals_org_created ON approvals (org, created);
CREATE TABLE ledger (
	id       TEXT PRIMARY KEY,
	card_id  TEXT NOT NULL,
	day      TEXT NOT NULL,
	month    TEXT NOT NULL,
	currency TEXT NOT NULL,
	minor    INTEGER NOT NULL CHECK (minor >= 0),
	created  INTEGER NOT NULL
);
CREATE INDEX ledger_day ON ledger (card_id, currency, day);
CREATE INDEX ledger_month ON ledger (card_id, currency, month);
CREATE TABLE owner_accounts (
	email         TEXT PRIMARY KEY,
	org           TEXT NOT NULL,
	password_hash TEXT NOT NULL,
	created       INTEGER NOT NULL,
	updated       INTEGER NOT NULL
);
CREATE TABLE dash_sessions (
	token_hash BLOB PRIMARY KEY,
	email      TEXT NOT NULL,
	created    INTEGER NOT NULL,
	expires    INTEGER NOT NULL
);
CREATE INDEX dash_sessions_email ON dash_sessions (email);
CREATE TABLE signups (
	org      TEXT NOT NULL,
	site     TEXT NOT NULL,
	email    TEXT NOT NULL,
	added_by TEXT NOT NULL,
	added    INTEGER NOT NULL,
	PRIMARY KEY (org, site, email)
);
`)
}

// Migration 3: refused fills for the owner's Activity page.
func init() {
	migrations = append(migrations, `
CREATE TABLE refusals (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT,
	org        TEXT NOT NULL,
	time       INTEGER NOT NULL,
	api_key_id TEXT NOT NULL,
	session    TEXT NOT NULL,
	item_id    TEXT NOT NULL,
	kind       TEXT NOT NULL,
	field      TEXT NOT NULL,
	site       TEXT NOT NULL,
	code       TEXT NOT NULL
);
CREATE INDEX refusals_org_time ON refusals (org, time);
`)
}

// LatestSchemaVersion is the version Open migrates to.
func LatestSchemaVersion() int { return len(schema()) - 1 }
