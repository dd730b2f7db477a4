package sqlite

import (
	"strings"
	"testing"
)

// TestRecipes_MigrationNumber pins the registry's tables to migration 4: a
// merge that adds another migration before it would renumber a shipped
// migration, which the migration table would then skip.
func TestRecipes_MigrationNumber(t *testing.T) {
	if len(migrations) <= recipesMigration || !strings.Contains(migrations[recipesMigration], "CREATE TABLE recipes (") {
		t.Fatalf("migration %d is not the recipe registry's", recipesMigration)
	}
}
