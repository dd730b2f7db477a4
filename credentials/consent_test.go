package credentials_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/credentials"
)

// P24, consent: an admin binds his own API key to a member; until the
// member accepts it on their own signed-in page, the key reaches only the
// organisation's credentials, never the member's personal ones (the
// finding: the admin redeemed the member's password). Once accepted, it
// acts for the member.
func TestP24_OfferedKeyReachesNoPersonalCredentialUntilAccepted(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	anaCred := e.store(t, e.ana, "sankhya", "", "username", "ana", "password", "ana-pw-canary")
	e.store(t, e.admin, "erp", credentials.Org, "token", "org-token")

	b, err := e.svc.BindKey(ctx, e.admin, "key_adm", "Ana@acme.test")
	if err != nil || b.Consented || b.User != "ana@acme.test" || b.By != "admin@acme.test" {
		t.Fatalf("the admin's binding: %+v, %v; want an offer", b, err)
	}
	kp, err := e.svc.KeyPrincipal(ctx, "key_adm")
	if err != nil || kp.User != "ana@acme.test" || kp.Consented {
		t.Fatalf("key principal = %+v, %v", kp, err)
	}
	_, err = e.svc.Use(ctx, kp, "sankhya")
	if code(err) != agentvault.CodeForbidden || !strings.Contains(agentvault.ErrorMessage(err), "Credentials page") {
		t.Fatalf("credential_use of ana's personal credential with an offered key: %v", err)
	}
	if _, err := e.svc.Request(ctx, kp, credentials.RequestArgs{Name: "sankhya", Fields: []string{"password"}}); code(err) != agentvault.CodeForbidden {
		t.Fatalf("credential_request with an offered key: %v", err)
	}
	if err := e.svc.Delete(ctx, kp, anaCred.ID); code(err) != agentvault.CodeForbidden {
		t.Fatalf("credential_delete with an offered key: %v", err)
	}
	list, err := e.svc.List(ctx, kp)
	if err != nil || len(list) != 1 || list[0].Name != "erp" {
		t.Fatalf("credential_list with an offered key shows %+v, %v; want the organisation's only", list, err)
	}
	// The organisation's credentials serve it as they serve any member.
	if got := e.redeem(t, kp, "erp"); got["token"] != "org-token" {
		t.Fatalf("org credential = %v", got)
	}

	// Only ana, signed in, accepts it.
	for _, p := range []credentials.Principal{e.admin, e.bia, e.owner, kp} {
		if err := e.svc.AcceptKey(ctx, p, "key_adm"); err == nil {
			t.Fatalf("%s (consented %v) accepted a key offered to ana", p.User, p.Consented)
		}
	}
	if kp, _ = e.svc.KeyPrincipal(ctx, "key_adm"); kp.Consented {
		t.Fatal("a refused acceptance gave consent")
	}
	if err := e.svc.AcceptKey(ctx, e.ana, "key_adm"); err != nil {
		t.Fatal(err)
	}
	if kp, err = e.svc.KeyPrincipal(ctx, "key_adm"); err != nil || !kp.Consented {
		t.Fatalf("after acceptance: %+v, %v", kp, err)
	}
	if got := e.redeem(t, kp, "sankhya"); got["password"] != "ana-pw-canary" {
		t.Fatalf("ana's own credential after acceptance = %v", got)
	}
	// Offering it to her again does not undo her consent.
	if _, err := e.svc.BindKey(ctx, e.admin, "key_adm", "ana@acme.test"); err != nil {
		t.Fatal(err)
	}
	if kp, _ = e.svc.KeyPrincipal(ctx, "key_adm"); !kp.Consented {
		t.Fatal("a second offer took ana's consent away")
	}
	// Moving it to bia makes it an offer to bia: ana's consent does not
	// follow the key.
	if _, err := e.svc.BindKey(ctx, e.admin, "key_adm", "bia@acme.test"); err != nil {
		t.Fatal(err)
	}
	if kp, _ = e.svc.KeyPrincipal(ctx, "key_adm"); kp.User != "bia@acme.test" || kp.Consented {
		t.Fatalf("after moving the key: %+v", kp)
	}
	if err := e.svc.AcceptKey(ctx, e.ana, "key_adm"); code(err) != agentvault.CodeNotFound {
		t.Fatalf("ana accepting a key now offered to bia: %v", err)
	}
}

// P24, consent: a key bound by its person themselves acts for them at
// once; a key that acts for someone at or above the admin's rank cannot be
// taken by the admin, for himself or for anyone else.
func TestP24_AdminCannotTakeAKeyThatActsForSomeoneAbove(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	if b, err := e.svc.BindKey(ctx, e.owner, "key_own", "owner@acme.test"); err != nil || !b.Consented {
		t.Fatalf("the owner binding a key to themselves: %+v, %v", b, err)
	}
	for _, to := range []string{"admin@acme.test", "ana@acme.test"} {
		if _, err := e.svc.BindKey(ctx, e.admin, "key_own", to); code(err) != agentvault.CodeForbidden {
			t.Fatalf("the admin moved the owner's key to %s: %v", to, err)
		}
	}
	// The default key acts for the single owner with no binding; the admin
	// cannot take it either.
	if _, err := e.svc.BindKey(ctx, e.admin, defaultKey, "admin@acme.test"); code(err) != agentvault.CodeForbidden {
		t.Fatalf("the admin took the owner's default key: %v", err)
	}
	if kp, err := e.svc.KeyPrincipal(ctx, defaultKey); err != nil || kp.User != "owner@acme.test" {
		t.Fatalf("default key = %+v, %v", kp, err)
	}
	// A member cannot bind keys at all.
	if _, err := e.svc.BindKey(ctx, e.ana, "key_x", "ana@acme.test"); code(err) != agentvault.CodeForbidden {
		t.Fatalf("a member bound a key: %v", err)
	}
}

// P24, roles: nobody changes the role of someone at or above their own
// rank (the finding: an admin demoted the owner), nobody gives a role at
// or above their own unless they are an owner, and teams of someone below
// stay a manager's to change.
func TestP24_AdminCannotDemoteOwnerNorAdmin(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	if err := e.svc.PutMember(ctx, e.owner, credentials.Member{Org: org, User: "adm2@acme.test", Role: credentials.RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	refused := []credentials.Member{
		{Org: org, User: "Owner@acme.test", Role: credentials.RoleMember}, // the owner (a dashboard account, no record)
		{Org: org, User: "owner@acme.test", Role: credentials.RoleAdmin},
		{Org: org, User: "adm2@acme.test", Role: credentials.RoleMember},  // a fellow admin
		{Org: org, User: "admin@acme.test", Role: credentials.RoleMember}, // himself
		{Org: org, User: "ana@acme.test", Role: credentials.RoleAdmin},    // a role at his own rank
		{Org: org, User: "new@acme.test", Role: credentials.RoleOwner},
		{Org: org, User: "adm2@acme.test", Role: credentials.RoleAdmin, Teams: []string{"ops"}},  // a fellow admin's teams
		{Org: org, User: "owner@acme.test", Role: credentials.RoleOwner, Teams: []string{"ops"}}, // the owner's teams
	}
	for _, m := range refused {
		if err := e.svc.PutMember(ctx, e.admin, m); code(err) != agentvault.CodeForbidden {
			t.Errorf("admin saved %s as %s %v: %v", m.User, m.Role, m.Teams, err)
		}
	}
	if p, err := e.svc.PrincipalFor(ctx, org, "owner@acme.test"); err != nil || p.Role != credentials.RoleOwner {
		t.Fatalf("the owner is now %+v, %v", p, err)
	}
	if p, _ := e.svc.PrincipalFor(ctx, org, "adm2@acme.test"); p.Role != credentials.RoleAdmin || len(p.Teams) != 0 {
		t.Fatalf("the other admin is now %+v", p)
	}
	// Below him, the admin still manages people.
	for _, m := range []credentials.Member{
		{Org: org, User: "ana@acme.test", Role: credentials.RoleMember, Teams: []string{"finance", "ops"}},
		{Org: org, User: "new@acme.test", Role: credentials.RoleMember},
	} {
		if err := e.svc.PutMember(ctx, e.admin, m); err != nil {
			t.Errorf("admin saving %s: %v", m.User, err)
		}
	}
	// The owner may change anyone below.
	if err := e.svc.PutMember(ctx, e.owner, credentials.Member{Org: org, User: "adm2@acme.test", Role: credentials.RoleMember}); err != nil {
		t.Fatal(err)
	}
}

// P24, roles: there is always an owner. The only owner cannot step down;
// with a second owner, either may.
func TestP24_LastOwnerCannotStepDown(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	for _, r := range []credentials.Role{credentials.RoleAdmin, credentials.RoleMember} {
		if err := e.svc.PutMember(ctx, e.owner, credentials.Member{Org: org, User: "owner@acme.test", Role: r}); code(err) != agentvault.CodeForbidden {
			t.Fatalf("the only owner stepped down to %s: %v", r, err)
		}
	}
	if err := e.svc.PutMember(ctx, e.owner, credentials.Member{Org: org, User: "admin@acme.test", Role: credentials.RoleOwner}); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.PutMember(ctx, e.owner, credentials.Member{Org: org, User: "owner@acme.test", Role: credentials.RoleAdmin}); err != nil {
		t.Fatalf("one of two owners stepping down: %v", err)
	}
	second, _ := e.svc.PrincipalFor(ctx, org, "admin@acme.test")
	if second.Role != credentials.RoleOwner {
		t.Fatalf("the second owner is %s", second.Role)
	}
	if err := e.svc.PutMember(ctx, second, credentials.Member{Org: org, User: "admin@acme.test", Role: credentials.RoleMember}); code(err) != agentvault.CodeForbidden {
		t.Fatalf("the now only owner stepped down: %v", err)
	}
	// A second dashboard account with no membership counts as an owner.
	e.accts.set("owner@acme.test", "co@acme.test")
	if err := e.svc.PutMember(ctx, second, credentials.Member{Org: org, User: "admin@acme.test", Role: credentials.RoleMember}); err != nil {
		t.Fatalf("stepping down beside another owner account: %v", err)
	}
}

// P24 and seed 003: the appliance's default key acts for the owner on a
// single-owner install with no binding, so the person using the agent
// reaches their own credentials with no set-up; with no account yet it
// says to set a password; with several owners it needs a binding.
func TestP24_DefaultKeyActsForSingleOwner(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.store(t, e.owner, "bank", "", "password", "owner-pw-canary")
	kp, err := e.svc.KeyPrincipal(ctx, defaultKey)
	if err != nil || kp.User != "owner@acme.test" || kp.Role != credentials.RoleOwner || !kp.Consented {
		t.Fatalf("default key = %+v, %v", kp, err)
	}
	if got := e.redeem(t, kp, "bank"); got["password"] != "owner-pw-canary" {
		t.Fatalf("the owner's own credential through the default key = %v", got)
	}
	// Another key is not the default one.
	if _, err := e.svc.KeyPrincipal(ctx, "key_other"); code(err) != agentvault.CodeForbidden {
		t.Fatalf("an unbound key: %v", err)
	}
	// An offer of the default key to someone else does not take it from
	// the single owner before they accept.
	if _, err := e.svc.BindKey(ctx, e.owner, defaultKey, "ana@acme.test"); err != nil {
		t.Fatal(err)
	}
	if kp, _ = e.svc.KeyPrincipal(ctx, defaultKey); kp.User != "owner@acme.test" || !kp.Consented {
		t.Fatalf("default key while offered to ana = %+v", kp)
	}
	if err := e.svc.AcceptKey(ctx, e.ana, defaultKey); err != nil {
		t.Fatal(err)
	}
	if kp, _ = e.svc.KeyPrincipal(ctx, defaultKey); kp.User != "ana@acme.test" || !kp.Consented {
		t.Fatalf("default key once ana accepted = %+v", kp)
	}

	// A fresh organisation: no account yet, then two owners.
	e = newEnv(t)
	e.accts.set()
	_, err = e.svc.KeyPrincipal(ctx, defaultKey)
	if code(err) != agentvault.CodeForbidden || !strings.Contains(agentvault.ErrorMessage(err), "proxyd owner set-password") {
		t.Fatalf("no account yet: %v", err)
	}
	e.accts.set("owner@acme.test", "co@acme.test")
	if _, err := e.svc.KeyPrincipal(ctx, defaultKey); code(err) != agentvault.CodeForbidden {
		t.Fatalf("two owners, no binding: %v", err)
	}
	co, err := e.svc.PrincipalFor(ctx, org, "co@acme.test")
	if err != nil || co.Role != credentials.RoleOwner {
		t.Fatalf("the second account = %+v, %v", co, err)
	}
	if _, err := e.svc.BindKey(ctx, co, defaultKey, "co@acme.test"); err != nil {
		t.Fatal(err)
	}
	if kp, err = e.svc.KeyPrincipal(ctx, defaultKey); err != nil || kp.User != "co@acme.test" || !kp.Consented {
		t.Fatalf("default key bound by an owner to themselves = %+v, %v", kp, err)
	}
}
