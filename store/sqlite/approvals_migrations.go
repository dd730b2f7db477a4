package sqlite

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
