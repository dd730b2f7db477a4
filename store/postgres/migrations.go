package postgres

// migrations are applied in order, each in its own transaction under an
// advisory lock (replicas starting together migrate once), and recorded in
// schema_migrations. Never edit a shipped migration: append a new one. They
// mirror store/sqlite's migrations 1 to 4, 50, 51, 61, 62, 70, 71 and 224 (same tables,
// same meaning), with Postgres types: bytea, boolean, bigint nanoseconds
// for times (exact round trips, as SQLite), identity columns for sequence
// numbers.
var migrations = []string{
	1: `
CREATE TABLE keys (
	id          text PRIMARY KEY,
	state       text NOT NULL CHECK (state IN ('active', 'retired')),
	check_value bytea NOT NULL,
	created     bigint NOT NULL
);
CREATE TABLE items (
	id          text PRIMARY KEY,
	org         text NOT NULL,
	owner       text NOT NULL,
	kind        text NOT NULL,
	label       text NOT NULL,
	created     bigint NOT NULL,
	updated     bigint NOT NULL,
	fields      text NOT NULL,
	key_id      text NOT NULL REFERENCES keys (id),
	wrapped_key bytea NOT NULL,
	meta        bytea NOT NULL,
	UNIQUE (org, kind, label)
);
CREATE INDEX items_org_created ON items (org, created, id);
CREATE TABLE item_values (
	item_id text NOT NULL REFERENCES items (id) ON DELETE CASCADE,
	field   text NOT NULL,
	value   bytea NOT NULL,
	PRIMARY KEY (item_id, field)
);
CREATE TABLE label_seq (
	org  text NOT NULL,
	kind text NOT NULL,
	last bigint NOT NULL,
	PRIMARY KEY (org, kind)
);
CREATE TABLE audit (
	seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	time        bigint NOT NULL,
	action      text NOT NULL,
	org         text NOT NULL,
	item_id     text NOT NULL,
	kind        text NOT NULL,
	field       text NOT NULL,
	destination text NOT NULL,
	session     text NOT NULL,
	actor       text NOT NULL,
	purpose     text NOT NULL,
	value_hmac  bytea
);
CREATE INDEX audit_org_time ON audit (org, time);
CREATE INDEX audit_item ON audit (item_id);
CREATE INDEX audit_session ON audit (session);
CREATE TABLE blobs (
	name        text PRIMARY KEY,
	key_id      text NOT NULL REFERENCES keys (id),
	wrapped_key bytea NOT NULL,
	data        bytea NOT NULL,
	updated     bigint NOT NULL
);
`,
	// The owner side: API keys, card policies, authorized destinations,
	// approvals, the spending ledger, owner accounts, dashboard sessions,
	// pre-approved signups.
	2: `
CREATE TABLE api_keys (
	id                text PRIMARY KEY,
	org               text NOT NULL,
	name              text NOT NULL,
	secret_hash       bytea NOT NULL,
	all_cards         boolean NOT NULL,
	card_ids          text NOT NULL,
	all_logins        boolean NOT NULL,
	login_ids         text NOT NULL,
	can_create_logins boolean NOT NULL,
	created           bigint NOT NULL,
	revoked_at        bigint
);
CREATE INDEX api_keys_org ON api_keys (org, created);
CREATE TABLE card_policies (
	org                text NOT NULL,
	card_id            text NOT NULL,
	currency           text NOT NULL,
	paused             boolean NOT NULL,
	blocked_merchants  text NOT NULL,
	per_purchase_cap   bigint,
	daily_cap          bigint,
	monthly_cap        bigint,
	approval_threshold bigint,
	every_purchase     boolean NOT NULL,
	live_cvv           boolean NOT NULL,
	strict_amount      boolean NOT NULL,
	updated            bigint NOT NULL,
	updated_by         text NOT NULL,
	PRIMARY KEY (org, card_id)
);
CREATE TABLE destinations (
	org      text NOT NULL,
	host     text NOT NULL,
	added_by text NOT NULL,
	added    bigint NOT NULL,
	PRIMARY KEY (org, host)
);
CREATE TABLE approvals (
	id              text PRIMARY KEY,
	org             text NOT NULL,
	kind            text NOT NULL CHECK (kind IN ('new_destination', 'purchase', 'cvv_entry', 'signup')),
	reason          text NOT NULL,
	site            text NOT NULL,
	amount_minor    bigint,
	amount_currency text NOT NULL,
	card_id         text NOT NULL,
	api_key_id      text NOT NULL,
	session         text NOT NULL,
	created         bigint NOT NULL,
	expires         bigint NOT NULL,
	status          text NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired')),
	decided_by      text NOT NULL,
	decided_at      bigint,
	dedupe          text NOT NULL
);
CREATE UNIQUE INDEX approvals_pending_dedupe ON approvals (dedupe) WHERE status = 'pending';
CREATE INDEX approvals_status ON approvals (status, expires);
CREATE INDEX approvals_org_created ON approvals (org, created);
CREATE TABLE ledger (
	id       text PRIMARY KEY,
	card_id  text NOT NULL,
	day      text NOT NULL,
	month    text NOT NULL,
	currency text NOT NULL,
	minor    bigint NOT NULL CHECK (minor >= 0),
	created  bigint NOT NULL
);
CREATE INDEX ledger_day ON ledger (card_id, currency, day);
CREATE INDEX ledger_month ON ledger (card_id, currency, month);
CREATE TABLE owner_accounts (
	email         text PRIMARY KEY,
	org           text NOT NULL,
	password_hash text NOT NULL,
	created       bigint NOT NULL,
	updated       bigint NOT NULL
);
CREATE TABLE dash_sessions (
	token_hash bytea PRIMARY KEY,
	email      text NOT NULL,
	created    bigint NOT NULL,
	expires    bigint NOT NULL
);
CREATE INDEX dash_sessions_email ON dash_sessions (email);
CREATE TABLE signups (
	org      text NOT NULL,
	site     text NOT NULL,
	email    text NOT NULL,
	added_by text NOT NULL,
	added    bigint NOT NULL,
	PRIMARY KEY (org, site, email)
);
`,
	// Refused fills for the owner's Activity page.
	3: `
CREATE TABLE refusals (
	seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	org        text NOT NULL,
	time       bigint NOT NULL,
	api_key_id text NOT NULL,
	session    text NOT NULL,
	item_id    text NOT NULL,
	kind       text NOT NULL,
	field      text NOT NULL,
	site       text NOT NULL,
	code       text NOT NULL
);
CREATE INDEX refusals_org_time ON refusals (org, time);
`,
	// What an approval raised by a fill is about: the vault item the fill
	// named and the page the agent was filling (scheme, host and path
	// only). Mirrors store/sqlite's migration 62.
	4: `
ALTER TABLE approvals ADD COLUMN item_id text NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN page text NOT NULL DEFAULT '';
`,
	// Proxy sessions and their grants, shared by every proxyd replica
	// (broker.SessionStore, sessions.go). An ended session stays as a
	// tombstone so no replica serves it again; its grants go. Mirrors
	// store/sqlite's migration 70.
	5: sessionsMigration,
	// The checkout recipe registry (recipes.go). Mirrors store/sqlite's
	// migration 4.
	6: recipesMigration,
	// Portal credentials (credentials.go). Mirrors store/sqlite's
	// migration 50.
	7: credentialsMigration,
	// Agents' signup requests and counted login changes (signups.go).
	// Mirrors store/sqlite's migration 61.
	8: signupRequestsMigration,
	// Open sessions counted per API key across replicas, and purged by
	// age. Mirrors store/sqlite's migration 71.
	9: `
CREATE INDEX proxy_sessions_key ON proxy_sessions (api_key_id, ended);
`,
	// Who made each API key binding and whether its person consented
	// (credentials.go). Mirrors store/sqlite's migration 51.
	10: credKeyConsentMigration,
	// An approval may ask about replacing a login's TOTP seed
	// (owner.KindTOTPReplace, P24). Mirrors store/sqlite's migration 224.
	11: `
ALTER TABLE approvals DROP CONSTRAINT approvals_kind_check;
ALTER TABLE approvals ADD CONSTRAINT approvals_kind_check
	CHECK (kind IN ('new_destination', 'purchase', 'cvv_entry', 'signup', 'totp_replace'));
`,
}

// LatestSchemaVersion is the version Open migrates to.
func LatestSchemaVersion() int { return len(migrations) - 1 }
