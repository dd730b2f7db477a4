package credentials_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/credentials"
	"github.com/agentvault/agentvault/store/sqlite"
	"github.com/agentvault/agentvault/vault"

	"github.com/agentvault/agentvault/internal/leakcheck"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type env struct {
	svc   *credentials.Service
	v     *vault.Vault
	clk   *clock
	path  string
	accts *accounts // the dashboard accounts (owner@acme.test at first)
	owner credentials.Principal
	admin credentials.Principal
	ana   credentials.Principal // member, team finance
	bia   credentials.Principal // member
}

const org = "acme"

// defaultKey is the appliance's first-start key in these tests.
const defaultKey = "key_default"

// accounts stands in for the owner store's dashboard accounts.
type accounts struct {
	mu   sync.Mutex
	list []string
}

func (a *accounts) set(list ...string) { a.mu.Lock(); a.list = list; a.mu.Unlock() }
func (a *accounts) of(_ context.Context, o string) ([]string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if o != org {
		return nil, nil
	}
	return append([]string(nil), a.list...), nil
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "vault.db")
	st, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := &clock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	key := bytes.Repeat([]byte{7}, 32)
	v, err := vault.Open(ctx, vault.Config{Store: st, MasterKey: key, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	accts := &accounts{list: []string{"owner@acme.test"}}
	svc, err := credentials.New(credentials.Config{Store: st, Values: v, Now: clk.Now, Accounts: accts.of,
		DefaultKeyID: defaultKey, DefaultKeyOrg: org})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{svc: svc, v: v, clk: clk, path: path, accts: accts}
	if e.owner, err = svc.PrincipalFor(ctx, org, "Owner@acme.test"); err != nil || e.owner.Role != credentials.RoleOwner {
		t.Fatalf("the dashboard account is not the owner: %+v, %v", e.owner, err)
	}
	for _, m := range []credentials.Member{
		{Org: org, User: "admin@acme.test", Role: credentials.RoleAdmin},
		{Org: org, User: "ana@acme.test", Role: credentials.RoleMember, Teams: []string{"finance"}},
		{Org: org, User: "bia@acme.test", Role: credentials.RoleMember},
	} {
		if err := svc.PutMember(ctx, e.owner, m); err != nil {
			t.Fatal(err)
		}
	}
	e.admin, _ = svc.PrincipalFor(ctx, org, "admin@acme.test")
	e.ana, _ = svc.PrincipalFor(ctx, org, "ana@acme.test")
	e.bia, _ = svc.PrincipalFor(ctx, org, "bia@acme.test")
	return e
}

func secrets(pairs ...string) map[string]vault.Secret {
	m := map[string]vault.Secret{}
	for i := 0; i+1 < len(pairs); i += 2 {
		m[pairs[i]] = vault.NewSecret([]byte(pairs[i+1]))
	}
	return m
}

// store requests name for p and types values through the entry link.
func (e *env) store(t *testing.T, p credentials.Principal, name string, vis credentials.Visibility, pairs ...string) credentials.Credential {
	t.Helper()
	ctx := context.Background()
	var fields []string
	for i := 0; i < len(pairs); i += 2 {
		fields = append(fields, pairs[i])
	}
	iss, err := e.svc.Request(ctx, p, credentials.RequestArgs{Name: name, Fields: fields, Visibility: vis})
	if err != nil {
		t.Fatalf("request %s: %v", name, err)
	}
	if _, _, err := e.svc.OpenEntry(ctx, p, iss.Token); err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	c, err := e.svc.SubmitEntry(ctx, p, iss.Token, secrets(pairs...))
	if err != nil {
		t.Fatalf("submit %s: %v", name, err)
	}
	return c
}

func (e *env) redeem(t *testing.T, p credentials.Principal, name string) map[string]string {
	t.Helper()
	ctx := context.Background()
	iss, err := e.svc.Use(ctx, p, name)
	if err != nil {
		t.Fatalf("use %s: %v", name, err)
	}
	r, err := e.svc.Redeem(ctx, iss.Token)
	if err != nil {
		t.Fatalf("redeem %s: %v", name, err)
	}
	out := map[string]string{}
	for _, cv := range r.Values {
		out[string(cv.Field)] = string(cv.Value.InsecureRawBytes())
	}
	return out
}

func code(err error) agentvault.Code { return agentvault.ErrorCode(err) }

// Seed 003: the link is valid once, for one hour, and only for whoever
// requested it; signing in as someone else does not spend it.
func TestCredentials_EntryLinkOnceOneHourRequesterOnly(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	iss, err := e.svc.Request(ctx, e.ana, credentials.RequestArgs{Name: "sankhya", Fields: []string{"username", "password"}})
	if err != nil {
		t.Fatal(err)
	}
	if !iss.Expires.Equal(e.clk.Now().Add(time.Hour)) || iss.Credential.Visibility != credentials.Personal {
		t.Fatalf("issued %+v", iss)
	}
	if _, _, err := e.svc.OpenEntry(ctx, e.bia, iss.Token); code(err) != agentvault.CodeForbidden {
		t.Fatalf("opened by another member: %v", err)
	}
	if _, _, err := e.svc.OpenEntry(ctx, e.owner, iss.Token); code(err) != agentvault.CodeForbidden {
		t.Fatalf("opened by the owner: %v", err)
	}
	_, l, err := e.svc.OpenEntry(ctx, e.ana, iss.Token)
	if err != nil || len(l.Fields) != 2 {
		t.Fatalf("requester's open: %v", err)
	}
	if _, _, err := e.svc.OpenEntry(ctx, e.ana, iss.Token); code(err) != agentvault.CodeLinkUsed {
		t.Fatalf("second open: %v", err)
	}
	if _, err := e.svc.SubmitEntry(ctx, e.ana, iss.Token, secrets("username", "ana")); code(err) != agentvault.CodeInvalidInput {
		t.Fatalf("submit missing a field: %v", err)
	}
	if _, err := e.svc.SubmitEntry(ctx, e.ana, iss.Token, secrets("username", "ana", "password", "pw1")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.SubmitEntry(ctx, e.ana, iss.Token, secrets("username", "ana", "password", "pw2")); code(err) != agentvault.CodeLinkUsed {
		t.Fatalf("second submit: %v", err)
	}
	// One hour is the limit, measured on the injected clock.
	late, err := e.svc.Request(ctx, e.ana, credentials.RequestArgs{Name: "bank", Fields: []string{"password"}})
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Add(time.Hour)
	if _, _, err := e.svc.OpenEntry(ctx, e.ana, late.Token); code(err) != agentvault.CodeLinkExpired {
		t.Fatalf("open after an hour: %v", err)
	}
	if _, _, err := e.svc.OpenEntry(ctx, e.ana, "not-a-token"); code(err) != agentvault.CodeNotFound {
		t.Fatalf("unknown token: %v", err)
	}
}

// Seed 003: asking again with the same name replaces the values.
func TestCredentials_SameNameReplacesValues(t *testing.T) {
	e := newEnv(t)
	first := e.store(t, e.ana, "sankhya", "", "username", "ana", "password", "old-pw")
	second := e.store(t, e.ana, "sankhya", "", "username", "ana", "password", "new-pw")
	if first.ID != second.ID {
		t.Fatalf("a second request made a second credential: %s, %s", first.ID, second.ID)
	}
	if got := e.redeem(t, e.ana, "sankhya"); got["password"] != "new-pw" {
		t.Fatalf("values = %v", got)
	}
	list, _ := e.svc.List(context.Background(), e.ana)
	if len(list) != 1 {
		t.Fatalf("list = %+v", list)
	}
}

// Seed 003: credential_list shows names, fields, whose it is and whether it
// has values, never the values; isSelected marks what credential_use gives.
func TestCredentials_ListNamesFieldsOwnerNoValuesIsSelected(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.store(t, e.admin, "sankhya", credentials.Org, "username", "shared", "password", "org-pw-canary")
	e.store(t, e.ana, "sankhya", "", "username", "ana", "password", "ana-pw-canary")
	if _, err := e.svc.Request(ctx, e.ana, credentials.RequestArgs{Name: "bank", Fields: []string{"token"}}); err != nil {
		t.Fatal(err)
	}
	list, err := e.svc.List(ctx, e.ana)
	if err != nil {
		t.Fatal(err)
	}
	sel := map[string]bool{}
	for _, l := range list {
		sel[l.Name+"/"+string(l.Visibility)] = l.IsSelected
		if l.Name == "bank" && l.HasValues() {
			t.Fatal("bank has no values yet")
		}
	}
	if len(list) != 3 || !sel["sankhya/personal"] || sel["sankhya/org"] || sel["bank/personal"] != true {
		t.Fatalf("ana's list = %+v", list)
	}
	bl, _ := e.svc.List(ctx, e.bia)
	if len(bl) != 1 || bl[0].Visibility != credentials.Org || !bl[0].IsSelected {
		t.Fatalf("bia's list = %+v", bl)
	}
	// The listing types carry no value: encode them the way tools do.
	values := leakcheck.New(leakcheck.Value("org password", "org-pw-canary"), leakcheck.Value("ana's password", "ana-pw-canary"))
	for _, l := range append(list, bl...) {
		b, _ := json.Marshal(l)
		values.Answer(t, "a credential listing", b)
	}
}

// Seed 003: name gives your own credential, else the organisation's shared
// one; with neither, credential_use fails with not_found.
func TestCredentials_UseOwnFirstThenOrgElseNotFound(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	if _, err := e.svc.Use(ctx, e.ana, "sankhya"); code(err) != agentvault.CodeNotFound {
		t.Fatalf("use with neither: %v", err)
	}
	e.store(t, e.owner, "sankhya", credentials.Org, "username", "shared", "password", "org-pw")
	if got := e.redeem(t, e.ana, "sankhya"); got["username"] != "shared" {
		t.Fatalf("ana without her own gets %v", got)
	}
	e.store(t, e.ana, "sankhya", "", "username", "ana", "password", "ana-pw")
	if got := e.redeem(t, e.ana, "sankhya"); got["username"] != "ana" {
		t.Fatalf("ana with her own gets %v", got)
	}
	if got := e.redeem(t, e.bia, "sankhya"); got["username"] != "shared" {
		t.Fatalf("bia gets %v", got)
	}
	// A credential requested but never typed is not usable yet.
	if _, err := e.svc.Request(ctx, e.bia, credentials.RequestArgs{Name: "bank", Fields: []string{"token"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Use(ctx, e.bia, "bank"); code(err) != agentvault.CodeNotFound {
		t.Fatalf("use without values: %v", err)
	}
}

// Seed 003: the use URL is valid once, for about 60 seconds.
func TestCredentials_UseURLOnceWithinSixtySeconds(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.store(t, e.ana, "sankhya", "", "username", "ana", "password", "pw")
	iss, err := e.svc.Use(ctx, e.ana, "sankhya")
	if err != nil {
		t.Fatal(err)
	}
	if !iss.Expires.Equal(e.clk.Now().Add(60 * time.Second)) {
		t.Fatalf("expires %v", iss.Expires)
	}
	e.clk.Add(59 * time.Second)
	r, err := e.svc.Redeem(ctx, iss.Token)
	if err != nil || r.Name != "sankhya" || len(r.Values) != 2 {
		t.Fatalf("first POST: %+v, %v", r, err)
	}
	if _, err := e.svc.Redeem(ctx, iss.Token); code(err) != agentvault.CodeLinkUsed {
		t.Fatalf("second POST: %v", err)
	}
	late, _ := e.svc.Use(ctx, e.ana, "sankhya")
	e.clk.Add(60 * time.Second)
	if _, err := e.svc.Redeem(ctx, late.Token); code(err) != agentvault.CodeLinkExpired {
		t.Fatalf("POST after 60 s: %v", err)
	}
	if _, err := e.svc.Redeem(ctx, "forged"); code(err) != agentvault.CodeNotFound {
		t.Fatalf("forged token: %v", err)
	}
}

// Seed 003 and P12: each use is recorded with the credential, the person
// and the time, with an HMAC of each value and never the value.
func TestCredentials_EveryUseAudited(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	c := e.store(t, e.ana, "sankhya", "", "username", "ana", "password", "audited-pw")
	e.redeem(t, e.ana, "sankhya")
	recs, err := e.v.Audit(ctx, vault.AuditFilter{Org: org, Action: vault.AuditCredentialUse})
	if err != nil || len(recs) != 2 {
		t.Fatalf("audit = %+v, %v", recs, err)
	}
	for _, r := range recs {
		if r.Actor != "ana@acme.test" || r.Session != c.ID || r.ItemID != c.ItemID || !r.Time.Equal(e.clk.Now()) || len(r.ValueHMAC) == 0 {
			t.Fatalf("audit record %+v", r)
		}
	}
	if !bytes.Equal(recs[1].ValueHMAC, e.v.AuditHMAC(vault.NewSecret([]byte("audited-pw")))) {
		t.Fatal("the HMAC is not the password's")
	}
}

// Seed 003: a personal credential is used and changed only by whoever made
// it; another member asking with its name gets their own or not_found.
func TestCredentials_PersonalOnlyItsOwnerUsesOrChanges(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	c := e.store(t, e.ana, "sankhya", "", "username", "ana", "password", "ana-pw")
	if _, err := e.svc.Use(ctx, e.bia, "sankhya"); code(err) != agentvault.CodeNotFound {
		t.Fatalf("bia uses ana's: %v", err)
	}
	// bia asking for "sankhya" makes her own, never touches ana's.
	b := e.store(t, e.bia, "sankhya", "", "username", "bia", "password", "bia-pw")
	if b.ID == c.ID {
		t.Fatal("bia's request changed ana's credential")
	}
	if got := e.redeem(t, e.ana, "sankhya"); got["password"] != "ana-pw" {
		t.Fatalf("ana's values changed: %v", got)
	}
}

// Seed 003: owners and admins see that a personal credential exists and may
// delete it (when someone leaves), but never use it or read its values.
func TestCredentials_AdminsSeeAndDeleteButNeverUsePersonal(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	c := e.store(t, e.ana, "sankhya", "", "username", "ana", "password", "ana-pw")
	for _, p := range []credentials.Principal{e.admin, e.owner} {
		list, err := e.svc.List(ctx, p)
		if err != nil || len(list) != 1 || list[0].ID != c.ID || list[0].Owner != "ana@acme.test" || list[0].CanUse || list[0].IsSelected || !list[0].HasValues() {
			t.Fatalf("%s sees %+v, %v", p.Role, list, err)
		}
		if _, err := e.svc.Use(ctx, p, "sankhya"); code(err) != agentvault.CodeNotFound {
			t.Fatalf("%s used ana's credential: %v", p.Role, err)
		}
	}
	for _, p := range []credentials.Principal{e.admin, e.owner} {
		iss, err := e.svc.Request(ctx, p, credentials.RequestArgs{Name: "sankhya", Fields: []string{"password"}})
		if err != nil || iss.Credential.ID == c.ID || iss.Credential.Owner != p.User {
			t.Fatalf("%s asking for sankhya: %+v, %v", p.Role, iss.Credential, err) // makes their own
		}
	}
	if list, _ := e.svc.List(ctx, e.bia); len(list) != 0 {
		t.Fatalf("a member sees another's personal credential: %+v", list)
	}
	if err := e.svc.Delete(ctx, e.bia, c.ID); code(err) != agentvault.CodeNotFound {
		t.Fatalf("bia deletes ana's: %v", err)
	}
	if err := e.svc.Delete(ctx, e.admin, c.ID); err != nil {
		t.Fatalf("admin delete: %v", err)
	}
	if _, err := e.svc.Use(ctx, e.ana, "sankhya"); code(err) != agentvault.CodeNotFound {
		t.Fatalf("use after delete: %v", err)
	}
	if _, err := e.v.ReleaseCredential(ctx, vault.ReleaseArgs{Org: org, ItemID: c.ItemID}); code(err) != agentvault.CodeNotFound {
		t.Fatalf("the values survived the delete: %v", err)
	}
}

// Seed 003: a personal credential cannot be shared (grant_set refuses it).
func TestCredentials_PersonalCannotBeShared(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	c := e.store(t, e.ana, "sankhya", "", "password", "pw")
	for _, p := range []credentials.Principal{e.ana, e.admin, e.owner} {
		if _, err := e.svc.SetGrant(ctx, p, c.ID, "user:bia@acme.test", true); err == nil {
			t.Fatalf("%s shared a personal credential", p.User)
		}
	}
}

// Seed 003: only owners and admins create the organisation's credential; it
// serves every member without their own of that name.
func TestCredentials_OrgCredentialByOwnersAndAdminsServesMembers(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	if _, err := e.svc.Request(ctx, e.ana, credentials.RequestArgs{Name: "sankhya", Fields: []string{"password"}, Visibility: credentials.Org}); code(err) != agentvault.CodeForbidden {
		t.Fatalf("member creates an org credential: %v", err)
	}
	e.store(t, e.admin, "sankhya", credentials.Org, "password", "org-pw")
	for _, p := range []credentials.Principal{e.ana, e.bia, e.admin, e.owner} {
		if got := e.redeem(t, p, "sankhya"); got["password"] != "org-pw" {
			t.Fatalf("%s gets %v", p.User, got)
		}
	}
}

// Seed 003: grant_set lets named members or teams change an organisation
// credential's values; nobody else may.
func TestCredentials_GrantSetWriteForMembersAndTeams(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	c := e.store(t, e.owner, "sankhya", credentials.Org, "password", "v1")
	ask := func(p credentials.Principal) error {
		_, err := e.svc.Request(ctx, p, credentials.RequestArgs{Name: "sankhya", Fields: []string{"password"}, Visibility: credentials.Org})
		return err
	}
	if err := ask(e.ana); code(err) != agentvault.CodeForbidden {
		t.Fatalf("ana without a grant: %v", err)
	}
	if _, err := e.svc.SetGrant(ctx, e.ana, c.ID, "team:finance", true); code(err) != agentvault.CodeForbidden {
		t.Fatalf("a member grants: %v", err)
	}
	if _, err := e.svc.SetGrant(ctx, e.admin, c.ID, "team:finance", true); err != nil {
		t.Fatal(err)
	}
	e.store(t, e.ana, "sankhya", credentials.Org, "password", "v2-by-finance")
	if err := ask(e.bia); code(err) != agentvault.CodeForbidden {
		t.Fatalf("bia (not in finance): %v", err)
	}
	if _, err := e.svc.SetGrant(ctx, e.owner, c.ID, "user:bia@acme.test", true); err != nil {
		t.Fatal(err)
	}
	e.store(t, e.bia, "sankhya", credentials.Org, "password", "v3-by-bia")
	if got := e.redeem(t, e.owner, "sankhya"); got["password"] != "v3-by-bia" {
		t.Fatalf("values = %v", got)
	}
	if _, err := e.svc.SetGrant(ctx, e.owner, c.ID, "user:bia@acme.test", false); err != nil {
		t.Fatal(err)
	}
	if err := ask(e.bia); code(err) != agentvault.CodeForbidden {
		t.Fatalf("bia after revoke: %v", err)
	}
	if _, err := e.svc.SetGrant(ctx, e.owner, c.ID, "user:nobody@else.test", true); code(err) != agentvault.CodeNotFound {
		t.Fatalf("grant to a stranger: %v", err)
	}
}

// Seed 003: credential_delete erases the values, the open links and the
// grants.
func TestCredentials_DeleteErasesValuesLinksAndGrants(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	c := e.store(t, e.owner, "sankhya", credentials.Org, "password", "v1")
	if _, err := e.svc.SetGrant(ctx, e.owner, c.ID, "team:finance", true); err != nil {
		t.Fatal(err)
	}
	entry, err := e.svc.Request(ctx, e.owner, credentials.RequestArgs{Name: "sankhya", Fields: []string{"password"}, Visibility: credentials.Org})
	if err != nil {
		t.Fatal(err)
	}
	use, err := e.svc.Use(ctx, e.ana, "sankhya")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Delete(ctx, e.ana, c.ID); code(err) != agentvault.CodeForbidden {
		t.Fatalf("a member deletes the org credential: %v", err)
	}
	if err := e.svc.Delete(ctx, e.owner, c.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.svc.OpenEntry(ctx, e.owner, entry.Token); code(err) != agentvault.CodeNotFound {
		t.Fatalf("entry link after delete: %v", err)
	}
	if _, err := e.svc.Redeem(ctx, use.Token); code(err) != agentvault.CodeNotFound {
		t.Fatalf("use link after delete: %v", err)
	}
	// A new credential of the same name starts without grants.
	c2 := e.store(t, e.owner, "sankhya", credentials.Org, "password", "v2")
	if gs, _ := e.svc.Grants(ctx, e.owner, c2.ID); len(gs) != 0 {
		t.Fatalf("grants survived: %+v", gs)
	}
}

// Seed 003: the values are encrypted before they reach the database, and
// the organisation is part of the cipher: the file holds ciphertext only,
// WAL included.
func TestCredentials_ValuesAtRestAreCiphertextOnly(t *testing.T) {
	e := newEnv(t)
	canary := "canary-at-rest-91d3f0"
	e.store(t, e.ana, "sankhya", "", "username", "user-canary-77ab", "password", canary)
	e.redeem(t, e.ana, "sankhya")
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		b, err := os.ReadFile(e.path + suffix)
		if err != nil {
			continue
		}
		leakcheck.New(leakcheck.Value("password", canary), leakcheck.Value("username", "user-canary-77ab")).
			Binary(t, filepath.Base(e.path+suffix), b)
	}
}

// A member removed from the organisation cannot spend a use link issued
// before.
func TestCredentials_UseRecheckedAtRedeem(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	c := e.store(t, e.ana, "sankhya", "", "password", "pw")
	iss, err := e.svc.Use(ctx, e.ana, "sankhya")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Delete(ctx, e.admin, c.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Redeem(ctx, iss.Token); err == nil {
		t.Fatal("a use link outlived its credential")
	}
}
