package control

import (
	"testing"

	"github.com/agentvault/agentvault/authz"
)

// TestOwnKeyBindingsMatchAuthz: every control call authz lets an agent make
// with its own key is bound to that key here, and nothing is bound that
// authz does not admit (P24: the table decides who, this file how the call
// stays within the key).
func TestOwnKeyBindingsMatchAuthz(t *testing.T) {
	for _, e := range authz.Entries(authz.Control) {
		r, _ := authz.Lookup(authz.Control, e)
		if _, bound := ownKeyBindings[e]; r.OwnKey != bound {
			t.Errorf("%q: authz OwnKey %v, bound here %v", e, r.OwnKey, bound)
		}
	}
	for e := range ownKeyBindings {
		if _, ok := authz.Lookup(authz.Control, e); !ok {
			t.Errorf("%q is bound here but has no entry in authz's table", e)
		}
	}
}
