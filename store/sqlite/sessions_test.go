package sqlite_test

import (
	"testing"

	"github.com/agentvault/agentvault/broker"
	"github.com/agentvault/agentvault/broker/sessionstoretest"
)

// TestSessionStoreConformance runs broker/sessionstoretest (sessions,
// grants, the one-purchase claim) against a real SQLite file.
func TestSessionStoreConformance(t *testing.T) {
	sessionstoretest.Run(t, func(t *testing.T) broker.SessionStore { return openTemp(t) })
}
