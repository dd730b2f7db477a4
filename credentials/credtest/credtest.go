// Package credtest is the contract every credentials.Store must pass: run
// Run from the adapter's tests with a constructor of empty stores.
package credtest

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/credentials"
	"github.com/agentvault/agentvault/vault"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// Run runs the suite; open returns a fresh, empty store.
func Run(t *testing.T, open func(t *testing.T) credentials.Store) {
	t.Run("Members", func(t *testing.T) { testMembers(t, open(t)) })
	t.Run("KeyBindings", func(t *testing.T) { testBindings(t, open(t)) })
	t.Run("Credentials", func(t *testing.T) { testCredentials(t, open(t)) })
	t.Run("Grants", func(t *testing.T) { testGrants(t, open(t)) })
	t.Run("Links", func(t *testing.T) { testLinks(t, open(t)) })
	t.Run("LinkRace", func(t *testing.T) { testLinkRace(t, open(t)) })
}

func testMembers(t *testing.T, s credentials.Store) {
	ctx := context.Background()
	if _, err := s.GetMember(ctx, "o", "a@x"); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("missing member: %v", err)
	}
	for _, m := range []credentials.Member{
		{Org: "o", User: "b@x", Role: credentials.RoleMember, Teams: []string{"finance"}},
		{Org: "o", User: "a@x", Role: credentials.RoleAdmin},
		{Org: "p", User: "a@x", Role: credentials.RoleMember},
	} {
		if err := s.PutMember(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutMember(ctx, credentials.Member{Org: "o", User: "b@x", Role: credentials.RoleMember, Teams: []string{"ops", "finance"}}); err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMember(ctx, "o", "b@x")
	if err != nil || len(m.Teams) != 2 || m.Teams[0] != "ops" {
		t.Fatalf("member after replace: %+v, %v", m, err)
	}
	ms, err := s.ListMembers(ctx, "o")
	if err != nil || len(ms) != 2 || ms[0].User != "a@x" || ms[0].Role != credentials.RoleAdmin {
		t.Fatalf("ListMembers = %+v, %v", ms, err)
	}
	if err := s.DeleteMember(ctx, "o", "a@x"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMember(ctx, "o", "a@x"); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := s.GetMember(ctx, "p", "a@x"); err != nil {
		t.Fatalf("other org's member went too: %v", err)
	}
}

func testBindings(t *testing.T, s credentials.Store) {
	ctx := context.Background()
	if _, err := s.GetKeyBinding(ctx, "avk_1"); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("missing binding: %v", err)
	}
	if err := s.BindKey(ctx, credentials.KeyBinding{KeyID: "avk_1", Org: "o", User: "a@x", By: "a@x", Consented: true}); err != nil {
		t.Fatal(err)
	}
	if b, err := s.GetKeyBinding(ctx, "avk_1"); err != nil || !b.Consented || b.By != "a@x" {
		t.Fatalf("own binding = %+v, %v", b, err)
	}
	// Replacing a binding replaces its consent too: an offer to someone
	// else is not consented because the last person was.
	if err := s.BindKey(ctx, credentials.KeyBinding{KeyID: "avk_1", Org: "o", User: "b@x", By: "c@x"}); err != nil {
		t.Fatal(err)
	}
	b, err := s.GetKeyBinding(ctx, "avk_1")
	if err != nil || b.User != "b@x" || b.Org != "o" || b.By != "c@x" || b.Consented {
		t.Fatalf("binding = %+v, %v", b, err)
	}
	// Consent is given only by the person the key is bound to, in its org.
	for _, c := range [][3]string{{"o", "avk_1", "a@x"}, {"p", "avk_1", "b@x"}, {"o", "avk_2", "b@x"}} {
		if err := s.ConsentKey(ctx, c[0], c[1], c[2]); !errors.Is(err, vault.ErrNotFound) {
			t.Fatalf("consent %v: %v, want not found", c, err)
		}
	}
	if b, _ = s.GetKeyBinding(ctx, "avk_1"); b.Consented {
		t.Fatal("a refused consent was recorded")
	}
	if err := s.ConsentKey(ctx, "o", "avk_1", "b@x"); err != nil {
		t.Fatal(err)
	}
	if err := s.ConsentKey(ctx, "o", "avk_1", "b@x"); err != nil {
		t.Fatalf("consenting twice: %v", err)
	}
	if b, err = s.GetKeyBinding(ctx, "avk_1"); err != nil || !b.Consented || b.User != "b@x" || b.By != "c@x" {
		t.Fatalf("after consent: %+v, %v", b, err)
	}
	for _, kb := range []credentials.KeyBinding{
		{KeyID: "avk_0", Org: "o", User: "c@x", By: "a@x"},
		{KeyID: "avk_9", Org: "p", User: "c@x", By: "c@x", Consented: true},
	} {
		if err := s.BindKey(ctx, kb); err != nil {
			t.Fatal(err)
		}
	}
	list, err := s.ListKeyBindings(ctx, "o")
	if err != nil || len(list) != 2 || list[0].KeyID != "avk_0" || list[0].Consented || list[1].KeyID != "avk_1" || !list[1].Consented || list[1].User != "b@x" {
		t.Fatalf("ListKeyBindings = %+v, %v", list, err)
	}
	if none, err := s.ListKeyBindings(ctx, "q"); err != nil || len(none) != 0 {
		t.Fatalf("another org's bindings: %+v, %v", none, err)
	}
}

func cred(id, name string, vis credentials.Visibility, owner string) credentials.Credential {
	return credentials.Credential{ID: id, Org: "o", Name: name, Visibility: vis, Owner: owner,
		Fields: []string{"username", "password"}, Created: t0, Updated: t0}
}

func testCredentials(t *testing.T, s credentials.Store) {
	ctx := context.Background()
	for _, c := range []credentials.Credential{
		cred("cred_2", "sankhya", credentials.Personal, "b@x"),
		cred("cred_1", "sankhya", credentials.Personal, "a@x"),
		cred("cred_3", "sankhya", credentials.Org, "a@x"),
		cred("cred_4", "bank", credentials.Personal, "a@x"),
	} {
		if err := s.CreateCredential(ctx, c); err != nil {
			t.Fatalf("create %s: %v", c.ID, err)
		}
	}
	for _, c := range []credentials.Credential{
		cred("cred_5", "sankhya", credentials.Personal, "a@x"), // a@x has one
		cred("cred_6", "sankhya", credentials.Org, "b@x"),      // the org has one
		cred("cred_1", "other", credentials.Personal, "c@x"),   // id taken
	} {
		if err := s.CreateCredential(ctx, c); agentvault.ErrorCode(err) != agentvault.CodeConflict {
			t.Fatalf("create %s: %v, want conflict", c.ID, err)
		}
	}
	list, err := s.ListCredentials(ctx, "o")
	if err != nil || len(list) != 4 || list[0].ID != "cred_4" || list[1].ID != "cred_1" || list[3].ID != "cred_3" {
		t.Fatalf("ListCredentials = %+v, %v", list, err)
	}
	if other, err := s.ListCredentials(ctx, "p"); err != nil || len(other) != 0 {
		t.Fatalf("another org sees %d credentials, %v", len(other), err)
	}
	c := list[1]
	c.ItemID, c.Fields, c.Updated = "itm_1", []string{"token"}, t0.Add(time.Minute)
	if err := s.UpdateCredential(ctx, c); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetCredential(ctx, "o", "cred_1")
	if err != nil || got.ItemID != "itm_1" || len(got.Fields) != 1 || !got.Updated.Equal(c.Updated) || got.Visibility != credentials.Personal || got.Owner != "a@x" {
		t.Fatalf("after update: %+v, %v", got, err)
	}
	if _, err := s.GetCredential(ctx, "p", "cred_1"); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("read from another org: %v", err)
	}
	if err := s.PutLink(ctx, credentials.Link{TokenHash: []byte("h1"), Kind: credentials.LinkEntry, Org: "o", User: "a@x",
		CredentialID: "cred_1", State: credentials.LinkPending, Created: t0, Expires: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetGrant(ctx, credentials.Grant{Org: "o", CredentialID: "cred_3", Subject: "team:finance", Write: true}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteCredential(ctx, "p", "cred_1"); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("delete from another org: %v", err)
	}
	for _, id := range []string{"cred_1", "cred_3"} {
		if err := s.DeleteCredential(ctx, "o", id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.GetLink(ctx, []byte("h1")); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("a deleted credential's link survived: %v", err)
	}
	if gs, err := s.ListGrants(ctx, "o", "cred_3"); err != nil || len(gs) != 0 {
		t.Fatalf("a deleted credential's grants survived: %v, %v", gs, err)
	}
	// The name is free again.
	if err := s.CreateCredential(ctx, cred("cred_7", "sankhya", credentials.Personal, "a@x")); err != nil {
		t.Fatal(err)
	}
}

func testGrants(t *testing.T, s credentials.Store) {
	ctx := context.Background()
	if err := s.CreateCredential(ctx, cred("cred_1", "erp", credentials.Org, "a@x")); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"user:b@x", "team:ops", "user:b@x"} {
		if err := s.SetGrant(ctx, credentials.Grant{Org: "o", CredentialID: "cred_1", Subject: sub, Write: true}); err != nil {
			t.Fatal(err)
		}
	}
	gs, err := s.ListGrants(ctx, "o", "cred_1")
	if err != nil || len(gs) != 2 || gs[0].Subject != "team:ops" || !gs[0].Write {
		t.Fatalf("grants = %+v, %v", gs, err)
	}
	if err := s.SetGrant(ctx, credentials.Grant{Org: "o", CredentialID: "cred_1", Subject: "team:ops", Write: false}); err != nil {
		t.Fatal(err)
	}
	if gs, _ = s.ListGrants(ctx, "o", "cred_1"); len(gs) != 1 || gs[0].Subject != "user:b@x" {
		t.Fatalf("after revoke: %+v", gs)
	}
}

func testLinks(t *testing.T, s credentials.Store) {
	ctx := context.Background()
	if err := s.CreateCredential(ctx, cred("cred_1", "erp", credentials.Personal, "a@x")); err != nil {
		t.Fatal(err)
	}
	l := credentials.Link{TokenHash: []byte("entry-hash"), Kind: credentials.LinkEntry, Org: "o", User: "a@x", CredentialID: "cred_1",
		Fields: []string{"username", "password"}, State: credentials.LinkPending, Created: t0, Expires: t0.Add(time.Hour)}
	if err := s.PutLink(ctx, l); err != nil {
		t.Fatal(err)
	}
	if err := s.PutLink(ctx, l); agentvault.ErrorCode(err) != agentvault.CodeConflict {
		t.Fatalf("duplicate link: %v", err)
	}
	got, err := s.GetLink(ctx, []byte("entry-hash"))
	if err != nil || got.User != "a@x" || len(got.Fields) != 2 || !got.Expires.Equal(l.Expires) || got.State != credentials.LinkPending {
		t.Fatalf("GetLink = %+v, %v", got, err)
	}
	if _, err := s.AdvanceLink(ctx, []byte("entry-hash"), credentials.LinkUse, credentials.LinkPending, credentials.LinkDone, t0); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("advance as another kind: %v", err)
	}
	if _, err := s.AdvanceLink(ctx, []byte("nope"), credentials.LinkEntry, credentials.LinkPending, credentials.LinkOpened, t0); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("advance unknown: %v", err)
	}
	if got, err = s.AdvanceLink(ctx, []byte("entry-hash"), credentials.LinkEntry, credentials.LinkPending, credentials.LinkOpened, t0.Add(59*time.Minute)); err != nil || got.State != credentials.LinkOpened {
		t.Fatalf("open: %+v, %v", got, err)
	}
	if _, err := s.AdvanceLink(ctx, []byte("entry-hash"), credentials.LinkEntry, credentials.LinkPending, credentials.LinkOpened, t0.Add(time.Minute)); agentvault.ErrorCode(err) != agentvault.CodeLinkUsed {
		t.Fatalf("second open: %v", err)
	}
	if _, err := s.AdvanceLink(ctx, []byte("entry-hash"), credentials.LinkEntry, credentials.LinkOpened, credentials.LinkDone, t0.Add(time.Hour)); agentvault.ErrorCode(err) != agentvault.CodeLinkExpired {
		t.Fatalf("submit at expiry: %v", err)
	}
	if got, _ = s.GetLink(ctx, []byte("entry-hash")); got.State != credentials.LinkOpened || !bytes.Equal(got.TokenHash, []byte("entry-hash")) {
		t.Fatalf("a refused advance changed the link: %+v", got)
	}
}

func testLinkRace(t *testing.T, s credentials.Store) {
	ctx := context.Background()
	if err := s.CreateCredential(ctx, cred("cred_1", "erp", credentials.Personal, "a@x")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutLink(ctx, credentials.Link{TokenHash: []byte("use"), Kind: credentials.LinkUse, Org: "o", User: "a@x", CredentialID: "cred_1",
		State: credentials.LinkPending, Created: t0, Expires: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.AdvanceLink(ctx, []byte("use"), credentials.LinkUse, credentials.LinkPending, credentials.LinkDone, t0)
			if err == nil {
				mu.Lock()
				wins++
				mu.Unlock()
			} else if agentvault.ErrorCode(err) != agentvault.CodeLinkUsed {
				t.Errorf("racing advance: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d callers spent one link", wins)
	}
}
