package sqlite

// Migration 4: the checkout recipe registry (package recipes): published
// recipes, and agents' submissions with their review. Each recipe is kept as
// its JSON; the columns beside it are what queries select on.
func init() {
	migrations = append(migrations, `
CREATE TABLE recipes (
	id         TEXT NOT NULL,
	kind       TEXT NOT NULL,
	body       TEXT NOT NULL,
	updated    INTEGER NOT NULL,
	updated_by TEXT NOT NULL,
	PRIMARY KEY (kind, id)
);
CREATE TABLE recipe_submissions (
	id           TEXT PRIMARY KEY,
	status       TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'merged', 'rejected', 'needs_human')),
	verdict      TEXT NOT NULL,
	body         TEXT NOT NULL,
	note         TEXT NOT NULL,
	verification INTEGER NOT NULL,
	submitter    TEXT NOT NULL,
	merge_into   TEXT NOT NULL,
	created      INTEGER NOT NULL,
	updated      INTEGER NOT NULL,
	decided_by   TEXT NOT NULL
);
CREATE INDEX recipe_submissions_budget ON recipe_submissions (submitter, created);
CREATE INDEX recipe_submissions_created ON recipe_submissions (created);
`)
}

// recipesMigration is the version of the migration above; a test checks
// it, so a merge that renumbers the migrations is noticed.
const recipesMigration = 4
