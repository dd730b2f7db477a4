package sqlite

import "strings"

// Migration 62 (numbered, beside 50 and 61): what an approval raised by a
// fill is about, for the owner's eyes: the vault item the fill named and
// the page the agent was filling (scheme, host and path only, never a
// query or fragment). Rows from before are left empty.
func init() {
	numberedMigrations[approvalsItemPageMigration] = `
ALTER TABLE approvals ADD COLUMN item_id TEXT NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN page TEXT NOT NULL DEFAULT '';
`
}

// approvalsItemPageMigration is the version of the migration above.
const approvalsItemPageMigration = 62

// Migration 224 (numbered): an approval may ask about replacing a login's
// TOTP seed (owner.KindTOTPReplace, P24). SQLite cannot change a CHECK
// constraint in place, so the table is built again with the kind added,
// its rows copied, and its indexes and its store_version triggers
// (migration 72) made again as they were.
func init() {
	var b strings.Builder
	b.WriteString(`
CREATE TABLE approvals_new (
	id              TEXT PRIMARY KEY,
	org             TEXT NOT NULL,
	kind            TEXT NOT NULL CHECK (kind IN ('new_destination', 'purchase', 'cvv_entry', 'signup', 'totp_replace')),
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
	dedupe          TEXT NOT NULL,
	item_id         TEXT NOT NULL DEFAULT '',
	page            TEXT NOT NULL DEFAULT ''
);
INSERT INTO approvals_new (id, org, kind, reason, site, amount_minor, amount_currency, card_id, api_key_id, session,
	created, expires, status, decided_by, decided_at, dedupe, item_id, page)
SELECT id, org, kind, reason, site, amount_minor, amount_currency, card_id, api_key_id, session,
	created, expires, status, decided_by, decided_at, dedupe, item_id, page FROM approvals;
DROP TABLE approvals;
ALTER TABLE approvals_new RENAME TO approvals;
CREATE UNIQUE INDEX approvals_pending_dedupe ON approvals (dedupe) WHERE status = 'pending';
CREATE INDEX approvals_status ON approvals (status, expires);
CREATE INDEX approvals_org_created ON approvals (org, created);
`)
	for _, op := range []string{"INSERT", "UPDATE", "DELETE"} {
		b.WriteString("CREATE TRIGGER store_version_approvals_" + strings.ToLower(op) +
			" AFTER " + op + " ON approvals BEGIN\n\tUPDATE store_version SET v = v + 1 WHERE id = 1;\nEND;\n")
	}
	// The copy changed every row: caches read before it are stale.
	b.WriteString("UPDATE store_version SET v = v + 1 WHERE id = 1;\n")
	numberedMigrations[approvalsTOTPReplaceMigration] = b.String()
}

// approvalsTOTPReplaceMigration is the version of the migration above.
const approvalsTOTPReplaceMigration = 224
