package authz_test

import (
	"strings"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/authz"
)

func TestP24_EveryEntryHasALevelAndWords(t *testing.T) {
	for _, s := range []authz.Surface{authz.Dashboard, authz.Control, authz.CLI} {
		if len(authz.Entries(s)) == 0 {
			t.Fatalf("%s has no entries", s)
		}
		for _, e := range authz.Entries(s) {
			r, _ := authz.Lookup(s, e)
			if r.Level < authz.Public || r.Level > authz.Shell || r.What == "" {
				t.Errorf("%s %q: level %d, what %q", s, e, r.Level, r.What)
			}
			if r.Area != "" && (r.Level != authz.OwnerOnly || !authz.ValidArea(r.Area)) {
				t.Errorf("%s %q: area %q only goes with OwnerOnly and must be a known area", s, e, r.Area)
			}
			if r.ForPerson && r.Level != authz.Agent {
				t.Errorf("%s %q: ForPerson is for agent calls", s, e)
			}
			if r.OwnKey && (r.Level != authz.Agent || s != authz.Control || r.ForPerson) {
				t.Errorf("%s %q: OwnKey is for control API calls of an agent that act for no person", s, e)
			}
		}
	}
	for _, a := range authz.Areas {
		if authz.AreaNames[a] == "" {
			t.Errorf("area %q has no words", a)
		}
	}
}

func TestP24_ChecksByRole(t *testing.T) {
	owner := authz.PersonAs("o@x.test", authz.Owner, nil)
	admin := authz.PersonAs("a@x.test", authz.Admin, nil)
	adminCards := authz.PersonAs("a@x.test", authz.Admin, []authz.Area{authz.Cards})
	member := authz.PersonAs("m@x.test", authz.Member, nil)
	cases := []struct {
		sub   authz.Subject
		entry string
		ok    bool
	}{
		{owner, "POST /keys", true},
		{admin, "POST /keys", false},
		{adminCards, "POST /keys", false},
		{adminCards, "POST /cards/{id}", true},
		{member, "GET /cards", false},
		{member, "GET /{$}", false},
		{member, "POST /approvals/{id}", false},
		{member, "GET /credentials", true},
		{member, "POST /credentials/members", false},
		{member, "POST /credentials/keys", false},
		{admin, "POST /credentials/members", true},
		{admin, "POST /delegation", false},
		{owner, "POST /delegation", true},
		{authz.Anyone, "GET /signin", true},
		{authz.Anyone, "GET /credentials", false},
		{authz.AgentCaller, "GET /cards", false},
		{authz.ShellOwner, "GET /credentials", false},
		{owner, "GET /no/such/route", false},
	}
	for _, c := range cases {
		err := authz.Check(c.sub, authz.Dashboard, c.entry)
		if (err == nil) != c.ok {
			t.Errorf("%v %s on %q: err %v, want ok=%v", c.sub.Role, c.sub.Delegated, c.entry, err, c.ok)
		}
		if err != nil && agentvault.ErrorCode(err) != agentvault.CodeForbidden {
			t.Errorf("%q: code %s", c.entry, agentvault.ErrorCode(err))
		}
	}
	err := authz.Check(member, authz.Dashboard, "GET /cards")
	if !strings.Contains(agentvault.ErrorMessage(err), "only the owner may see cards (or an admin the owner allowed to manage cards") {
		t.Errorf("the refusal should say who can: %q", agentvault.ErrorMessage(err))
	}
	if authz.Check(authz.AgentCaller, authz.Control, "POST /v1/sessions") != nil || authz.Check(member, authz.Control, "POST /v1/sessions") == nil {
		t.Error("control routes are for agents' keys through mcpd")
	}
	// An agent with its own key as the bearer reaches the calls of the
	// bring-your-own-browser flow and nothing else mcpd may call.
	for _, e := range []string{"POST /v1/sessions", "GET /v1/catalog", "POST /v1/sessions/{id}/authorize", "GET /v1/waits/{id}",
		"POST /v1/sessions/{id}/events", "GET /v1/sessions/{id}/report", "DELETE /v1/sessions/{id}"} {
		if err := authz.Check(authz.AgentKeyCaller, authz.Control, e); err != nil {
			t.Errorf("own key on %q: %v", e, err)
		}
	}
	for _, e := range []string{"POST /v1/hints/totp/take", "POST /v1/apps/sessions", "POST /v1/keys/authenticate", "POST /v1/credentials/use",
		"POST /v1/logins/create", "POST /v1/handoffs/{id}/frame", "GET /v1/payment-integrations", "POST /v1/recipes/submissions"} {
		err := authz.Check(authz.AgentKeyCaller, authz.Control, e)
		if err == nil || !strings.Contains(agentvault.ErrorMessage(err), "through mcpd") {
			t.Errorf("own key on %q: %v, want a refusal saying it goes through mcpd", e, err)
		}
	}
	if authz.Check(authz.AgentKeyCaller, authz.Dashboard, "GET /cards") == nil || authz.Check(authz.AgentKeyCaller, authz.CLI, "owner revoke") == nil {
		t.Error("an agent's own key reaches the dashboard or the CLI")
	}
	if authz.Check(authz.ShellOwner, authz.CLI, "owner revoke") != nil || authz.Check(owner, authz.CLI, "owner revoke") == nil {
		t.Error("CLI commands are the shell's")
	}
}

func TestP24_RolesChangeOnlyFromAbove(t *testing.T) {
	O, A, M := authz.Owner, authz.Admin, authz.Member
	cases := []struct {
		by, cur, next authz.Role
		self          bool
		owners        int
		ok            bool
	}{
		{A, O, M, false, 1, false}, // an admin demotes the owner
		{A, O, M, false, 2, false}, // nor any owner
		{A, A, M, false, 1, false}, // nor a fellow admin
		{A, M, A, false, 1, false}, // nor makes an admin
		{A, M, O, false, 1, false}, // nor an owner
		{A, "", M, false, 1, true}, // adds a member
		{A, "", A, false, 1, false},
		{A, A, M, true, 1, false}, // nor changes themselves
		{M, "", M, false, 1, false},
		{M, M, A, true, 1, false},
		{O, M, A, false, 1, true},
		{O, A, O, false, 1, true},
		{O, O, M, true, 1, false}, // the last owner stays
		{O, O, M, true, 2, true},  // one of two steps down
		{O, O, A, false, 2, true}, // an owner demotes another owner while one remains
		{O, O, O, true, 1, true},
	}
	for _, c := range cases {
		err := authz.SetRole(c.by, c.cur, c.next, c.self, c.owners)
		if (err == nil) != c.ok {
			t.Errorf("by %s: %q -> %s (self %v, owners %d): %v, want ok=%v", c.by, c.cur, c.next, c.self, c.owners, err, c.ok)
		}
	}
}
