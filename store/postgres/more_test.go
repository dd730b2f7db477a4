package postgres_test

import (
	"testing"

	"github.com/agentvault/agentvault/credentials"
	"github.com/agentvault/agentvault/credentials/credtest"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/owner/ownertest"
	"github.com/agentvault/agentvault/recipes"
	"github.com/agentvault/agentvault/recipes/recipestest"
)

// TestRecipesConformance runs the recipe registry's store contract
// (recipes/recipestest: the budget and the review's compare-and-swap
// under concurrency) against a real Postgres.
func TestRecipesConformance(t *testing.T) {
	recipestest.Run(t, func(t *testing.T) recipes.Store { return openTemp(t) })
}

// TestCredentialsStoreConformance runs the portal credentials' store
// contract (credentials/credtest: uniqueness, cascades, the one-time link
// race) against a real Postgres.
func TestCredentialsStoreConformance(t *testing.T) {
	credtest.Run(t, func(t *testing.T) credentials.Store { return openTemp(t) })
}

// TestSignupRequestsConformance runs the signup requests' store contract
// (owner/ownertest.RunSignupRequests) against a real Postgres.
func TestSignupRequestsConformance(t *testing.T) {
	ownertest.RunSignupRequests(t, func(t *testing.T) owner.SignupRequestStore { return openTemp(t) })
}
