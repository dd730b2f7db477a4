package sqlite_test

import (
	"testing"

	"github.com/agentvault/agentvault/recipes"
	"github.com/agentvault/agentvault/recipes/recipestest"
)

// TestRecipesConformance runs the recipe registry's store contract
// (published recipes, submissions, the compare-and-swap review, the
// per-day budget under concurrency) against a real SQLite file.
func TestRecipesConformance(t *testing.T) {
	recipestest.Run(t, func(t *testing.T) recipes.Store { return openTemp(t) })
}
