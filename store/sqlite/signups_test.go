package sqlite_test

import (
	"testing"

	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/owner/ownertest"
)

// TestSignupRequestsConformance runs the signup requests' store contract
// (owner/ownertest.RunSignupRequests) against a real SQLite file.
func TestSignupRequestsConformance(t *testing.T) {
	ownertest.RunSignupRequests(t, func(t *testing.T) owner.SignupRequestStore { return openTemp(t) })
}
