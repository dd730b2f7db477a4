// Package ownertest is the conformance suite every owner.Store must pass
// (store/sqlite and store/postgres). It speaks only the
// owner.Store interface and policy/ledgertest; it must never reach into an
// implementation or assume one process.
package ownertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/policy/ledgertest"
	"github.com/agentvault/agentvault/vault"
)

// Run runs the suite; open returns a fresh, empty store for each subtest.
func Run(t *testing.T, open func(t *testing.T) owner.Store) {
	t.Run("APIKeys", func(t *testing.T) { apiKeys(t, open(t)) })
	t.Run("CardPolicies", func(t *testing.T) { cardPolicies(t, open(t)) })
	t.Run("Destinations", func(t *testing.T) { destinations(t, open(t)) })
	t.Run("ApprovalsLifecycle", func(t *testing.T) { approvals(t, open(t)) })
	t.Run("ApprovalItemAndPage", func(t *testing.T) { approvalItemPage(t, open(t)) })
	t.Run("EveryApprovalKind", func(t *testing.T) { everyKind(t, open(t)) })
	t.Run("ApprovalsDedupeUnderConcurrency", func(t *testing.T) { dedupeConcurrent(t, open(t)) })
	t.Run("DecideOnlyOnce", func(t *testing.T) { decideOnce(t, open(t)) })
	t.Run("AccountsAndSessions", func(t *testing.T) { accounts(t, open(t)) })
	t.Run("Signups", func(t *testing.T) { signups(t, open(t)) })
	t.Run("GetReservation", func(t *testing.T) { reservation(t, open(t)) })
	t.Run("Refusals", func(t *testing.T) { refusals(t, open(t)) })
	t.Run("Ledger", func(t *testing.T) {
		ledgertest.Run(t, func(t *testing.T) policy.Ledger { return open(t) })
	})
}

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func amt(s string) *policy.Amount { a := policy.MustAmount(s); return &a }

func apiKeys(t *testing.T, st owner.Store) {
	ctx := context.Background()
	k := owner.APIKey{ID: "avk_0000000000000001", Org: "o", Name: "agent", SecretHash: bytes.Repeat([]byte{7}, 32),
		Scope: owner.Scope{CardIDs: []string{"itm_a", "itm_b"}, AllLogins: true}, Created: t0}
	if err := st.CreateAPIKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateAPIKey(ctx, k); agentvault.ErrorCode(err) != agentvault.CodeConflict {
		t.Fatalf("duplicate id: %v", err)
	}
	got, err := st.GetAPIKey(ctx, k.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "agent" || !bytes.Equal(got.SecretHash, k.SecretHash) || !got.Scope.AllLogins || got.Scope.AllCards ||
		fmt.Sprint(got.Scope.CardIDs) != "[itm_a itm_b]" || !got.Created.Equal(t0) || got.Revoked() {
		t.Fatalf("round trip: %+v", got)
	}
	if err := st.SetAPIKeyScope(ctx, k.ID, owner.Scope{AllCards: true, LoginIDs: []string{"itm_l"}, CanCreateLogins: true}); err != nil {
		t.Fatal(err)
	}
	got, _ = st.GetAPIKey(ctx, k.ID)
	if !got.Scope.AllCards || got.Scope.AllLogins || fmt.Sprint(got.Scope.LoginIDs) != "[itm_l]" || !got.Scope.CanCreateLogins || got.Scope.CardIDs != nil {
		t.Fatalf("scope: %+v", got.Scope)
	}
	if err := st.RevokeAPIKey(ctx, k.ID, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := st.RevokeAPIKey(ctx, k.ID, t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	got, _ = st.GetAPIKey(ctx, k.ID)
	if !got.RevokedAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("revoked at %v, want the first revocation", got.RevokedAt)
	}
	if _, err := st.GetAPIKey(ctx, "avk_nope"); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("missing key: %v", err)
	}
	if err := st.RevokeAPIKey(ctx, "avk_nope", t0); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("revoke missing key: %v", err)
	}
	k2 := k
	k2.ID, k2.Created, k2.Org = "avk_0000000000000002", t0.Add(time.Minute), "o"
	k3 := k
	k3.ID, k3.Org = "avk_0000000000000003", "other"
	for _, x := range []owner.APIKey{k2, k3} {
		if err := st.CreateAPIKey(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	list, err := st.ListAPIKeys(ctx, "o")
	if err != nil || len(list) != 2 || list[0].ID != k.ID || list[1].ID != k2.ID {
		t.Fatalf("list: %d keys, %v", len(list), err)
	}
}

func cardPolicies(t *testing.T, st owner.Store) {
	ctx := context.Background()
	p := owner.CardPolicy{Org: "o", CardID: "itm_c", Currency: "EUR", Updated: t0, UpdatedBy: "owner:a@b.c",
		Rules: policy.CardPolicy{Paused: true, BlockedMerchants: []string{"bad.example"}, PerPurchaseCap: amt("50.00 EUR"),
			DailyCap: amt("100.00 EUR"), MonthlyCap: amt("1000.00 EUR"), ApprovalThreshold: amt("20.00 EUR"),
			EveryPurchase: true, LiveCVV: true, StrictAmount: true}}
	if err := st.PutCardPolicy(ctx, p); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetCardPolicy(ctx, "o", "itm_c")
	if err != nil {
		t.Fatal(err)
	}
	r := got.Rules
	if !r.Paused || !r.EveryPurchase || !r.LiveCVV || !r.StrictAmount || fmt.Sprint(r.BlockedMerchants) != "[bad.example]" ||
		*r.PerPurchaseCap != *p.Rules.PerPurchaseCap || *r.DailyCap != *p.Rules.DailyCap || *r.MonthlyCap != *p.Rules.MonthlyCap ||
		*r.ApprovalThreshold != *p.Rules.ApprovalThreshold || got.Currency != "EUR" || got.UpdatedBy != p.UpdatedBy {
		t.Fatalf("round trip: %+v", got)
	}
	p.Rules = policy.CardPolicy{}
	p.Currency = ""
	if err := st.PutCardPolicy(ctx, p); err != nil {
		t.Fatal(err)
	}
	got, _ = st.GetCardPolicy(ctx, "o", "itm_c")
	if got.Rules.Paused || got.Rules.DailyCap != nil || got.Rules.BlockedMerchants != nil {
		t.Fatalf("replace: %+v", got.Rules)
	}
	bad := p
	bad.Currency = "EUR"
	bad.Rules.DailyCap = amt("1.00 USD")
	if err := st.PutCardPolicy(ctx, bad); agentvault.ErrorCode(err) != agentvault.CodeInvalidInput {
		t.Fatalf("mixed currencies: %v", err)
	}
	if _, err := st.GetCardPolicy(ctx, "other", "itm_c"); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("other org: %v", err)
	}
	list, err := st.ListCardPolicies(ctx, "o")
	if err != nil || len(list) != 1 {
		t.Fatalf("list: %d, %v", len(list), err)
	}
	if err := st.DeleteCardPolicy(ctx, "o", "itm_c"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetCardPolicy(ctx, "o", "itm_c"); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
}

func destinations(t *testing.T, st owner.Store) {
	ctx := context.Background()
	for _, d := range []owner.Destination{
		{Org: "o", Host: "shop.example", AddedBy: "owner:a@b.c", Added: t0},
		{Org: "o", Host: "shop.example", AddedBy: "approval:apr_x", Added: t0.Add(time.Hour)},
		{Org: "o", Host: "a.example", AddedBy: "config", Added: t0},
		{Org: "other", Host: "z.example", AddedBy: "config", Added: t0},
	} {
		if err := st.AddDestination(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	list, err := st.ListDestinations(ctx, "o")
	if err != nil || len(list) != 2 || list[0].Host != "a.example" || list[1].AddedBy != "owner:a@b.c" {
		t.Fatalf("list: %+v, %v", list, err)
	}
	if err := st.RemoveDestination(ctx, "o", "shop.example"); err != nil {
		t.Fatal(err)
	}
	if err := st.RemoveDestination(ctx, "o", "shop.example"); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("remove twice: %v", err)
	}
}

func newApproval(id string, kind owner.ApprovalKind) owner.Approval {
	return owner.Approval{ID: id, Org: "o", Kind: kind, Reason: "over_threshold", Site: "shop.example", Amount: amt("12.34 EUR"),
		CardID: "itm_c", APIKeyID: "avk_1", Session: "s_1", Created: t0, Expires: t0.Add(15 * time.Minute), Status: owner.StatusPending}
}

// everyKind: the store keeps an approval of every kind the owner can be
// asked (a schema that lists kinds must list a new one too).
func everyKind(t *testing.T, st owner.Store) {
	ctx := context.Background()
	for _, k := range []owner.ApprovalKind{owner.KindNewDestination, owner.KindPurchase, owner.KindCVVEntry, owner.KindSignup, owner.KindTOTPReplace} {
		if !k.Valid() {
			t.Fatalf("%s is not a valid kind", k)
		}
		a := newApproval("apr_k_"+string(k), k)
		if _, created, err := st.CreateApproval(ctx, a, "kind "+string(k), t0); err != nil || !created {
			t.Fatalf("create a %s approval: %v %v", k, created, err)
		}
		if got, err := st.GetApproval(ctx, a.ID); err != nil || got.Kind != k {
			t.Fatalf("read a %s approval: %+v %v", k, got, err)
		}
	}
}

// approvalItemPage: the item and page an approval shows come back from
// every read (get, list, the deduped create, decide, expire); an approval
// without them reads back empty.
func approvalItemPage(t *testing.T, st owner.Store) {
	ctx := context.Background()
	a := newApproval("apr_ip", owner.KindCVVEntry)
	a.ItemID, a.Page = "itm_c", "https://shop.example/checkout/pay"
	same := func(what string, got owner.Approval) {
		t.Helper()
		if got.ItemID != "itm_c" || got.Page != "https://shop.example/checkout/pay" || got.CardID != "itm_c" {
			t.Fatalf("%s: item %q page %q card %q", what, got.ItemID, got.Page, got.CardID)
		}
	}
	got, created, err := st.CreateApproval(ctx, a, "kip", t0)
	if err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	same("create", got)
	twin := newApproval("apr_ip2", owner.KindCVVEntry)
	twin.ItemID, twin.Page = "itm_other", "https://shop.example/other"
	if got, created, err = st.CreateApproval(ctx, twin, "kip", t0.Add(time.Second)); err != nil || created {
		t.Fatalf("dedupe: %v %v", created, err)
	}
	same("deduped create", got)
	got, err = st.GetApproval(ctx, "apr_ip")
	if err != nil {
		t.Fatal(err)
	}
	same("get", got)
	list, err := st.ListApprovals(ctx, owner.ApprovalFilter{Org: "o", Status: owner.StatusPending})
	if err != nil || len(list) != 1 {
		t.Fatalf("list: %+v %v", list, err)
	}
	same("list", list[0])
	if got, err = st.DecideApproval(ctx, "apr_ip", owner.StatusApproved, "owner", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	same("decide", got)
	plain := newApproval("apr_plain", owner.KindNewDestination)
	plain.CardID = ""
	if _, _, err := st.CreateApproval(ctx, plain, "kplain", t0); err != nil {
		t.Fatal(err)
	}
	exp, err := st.ExpireApprovals(ctx, t0.Add(time.Hour))
	if err != nil || len(exp) != 1 || exp[0].ItemID != "" || exp[0].Page != "" {
		t.Fatalf("expire an approval without item or page: %+v %v", exp, err)
	}
	withItem := newApproval("apr_exp", owner.KindNewDestination)
	withItem.ItemID, withItem.Page, withItem.Created, withItem.Expires = "itm_l", "https://shop.example/login", t0.Add(2*time.Hour), t0.Add(3*time.Hour)
	if _, _, err := st.CreateApproval(ctx, withItem, "kexp", t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	exp, err = st.ExpireApprovals(ctx, t0.Add(4*time.Hour))
	if err != nil || len(exp) != 1 || exp[0].ItemID != "itm_l" || exp[0].Page != "https://shop.example/login" {
		t.Fatalf("expire: %+v %v", exp, err)
	}
}

func approvals(t *testing.T, st owner.Store) {
	ctx := context.Background()
	a := newApproval("apr_1", owner.KindPurchase)
	got, created, err := st.CreateApproval(ctx, a, "k1", t0)
	if err != nil || !created || got.ID != "apr_1" || got.Status != owner.StatusPending {
		t.Fatalf("create: %+v %v %v", got, created, err)
	}
	twin := newApproval("apr_2", owner.KindPurchase)
	twin.Expires = t0.Add(18 * time.Minute)
	got, created, err = st.CreateApproval(ctx, twin, "k1", t0.Add(time.Minute))
	if err != nil || created || got.ID != "apr_1" {
		t.Fatalf("dedupe: %+v %v %v", got, created, err)
	}
	read, err := st.GetApproval(ctx, "apr_1")
	if err != nil || read.Kind != owner.KindPurchase || read.Reason != "over_threshold" || read.Site != "shop.example" ||
		read.Amount == nil || *read.Amount != *a.Amount || read.CardID != "itm_c" || read.APIKeyID != "avk_1" || read.Session != "s_1" ||
		!read.Created.Equal(t0) || !read.Expires.Equal(a.Expires) {
		t.Fatalf("read: %+v %v", read, err)
	}
	noAmount := newApproval("apr_3", owner.KindNewDestination)
	noAmount.Amount = nil
	if _, _, err := st.CreateApproval(ctx, noAmount, "k3", t0); err != nil {
		t.Fatal(err)
	}
	if r, _ := st.GetApproval(ctx, "apr_3"); r.Amount != nil {
		t.Fatalf("nil amount came back as %v", r.Amount)
	}
	pending, err := st.ListApprovals(ctx, owner.ApprovalFilter{Org: "o", Status: owner.StatusPending})
	if err != nil || len(pending) != 2 {
		t.Fatalf("pending: %d %v", len(pending), err)
	}
	dec, err := st.DecideApproval(ctx, "apr_1", owner.StatusApproved, "owner:a@b.c", t0.Add(2*time.Minute))
	if err != nil || dec.Status != owner.StatusApproved || dec.DecidedBy != "owner:a@b.c" || !dec.DecidedAt.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("decide: %+v %v", dec, err)
	}
	// Once decided, an identical request asks again.
	got, created, err = st.CreateApproval(ctx, twin, "k1", t0.Add(3*time.Minute))
	if err != nil || !created || got.ID != "apr_2" {
		t.Fatalf("after decision: %+v %v %v", got, created, err)
	}
	// Expiry: at the expiry instant the approval is expired.
	exp, err := st.ExpireApprovals(ctx, t0.Add(15*time.Minute))
	if err != nil || len(exp) != 1 || exp[0].ID != "apr_3" || exp[0].Status != owner.StatusExpired {
		t.Fatalf("expire: %+v %v", exp, err)
	}
	if _, err := st.DecideApproval(ctx, "apr_2", owner.StatusDenied, "x", t0.Add(20*time.Minute)); agentvault.ErrorCode(err) != agentvault.CodeApprovalExpired {
		t.Fatalf("deciding an overdue approval: %v", err)
	}
	if r, _ := st.GetApproval(ctx, "apr_2"); r.Status != owner.StatusExpired {
		t.Fatalf("overdue approval is %s", r.Status)
	}
	// A stale pending twin does not block a new request.
	stale := newApproval("apr_4", owner.KindSignup)
	if _, _, err := st.CreateApproval(ctx, stale, "k4", t0); err != nil {
		t.Fatal(err)
	}
	fresh := newApproval("apr_5", owner.KindSignup)
	fresh.Created, fresh.Expires = t0.Add(time.Hour), t0.Add(time.Hour+15*time.Minute)
	got, created, err = st.CreateApproval(ctx, fresh, "k4", t0.Add(time.Hour))
	if err != nil || !created || got.ID != "apr_5" {
		t.Fatalf("stale twin: %+v %v %v", got, created, err)
	}
	all, err := st.ListApprovals(ctx, owner.ApprovalFilter{Org: "o", Session: "s_1", Limit: 2})
	if err != nil || len(all) != 2 || all[0].ID != "apr_5" {
		t.Fatalf("list newest first with limit: %+v %v", all, err)
	}
	if _, err := st.GetApproval(ctx, "apr_none"); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
	// Approving a new destination authorizes its site in the same step.
	nd := newApproval("apr_6", owner.KindNewDestination)
	nd.Site = "new.example"
	nd.Expires = t0.Add(2 * time.Hour)
	if _, _, err := st.CreateApproval(ctx, nd, "k6", t0); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DecideApproval(ctx, "apr_6", owner.StatusApproved, "owner", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	ds, err := st.ListDestinations(ctx, "o")
	if err != nil || len(ds) != 1 || ds[0].Host != "new.example" || ds[0].AddedBy != "approval:apr_6" {
		t.Fatalf("destinations after approving a new one: %+v %v", ds, err)
	}
}

func dedupeConcurrent(t *testing.T, st owner.Store) {
	ctx := context.Background()
	var wg sync.WaitGroup
	ids := make([]string, 16)
	var createdN int
	var mu sync.Mutex
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, created, err := st.CreateApproval(ctx, newApproval(fmt.Sprintf("apr_c%d", i), owner.KindNewDestination), "same", t0)
			if err != nil {
				t.Errorf("create %d: %v", i, err)
				return
			}
			mu.Lock()
			ids[i] = got.ID
			if created {
				createdN++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if createdN != 1 {
		t.Fatalf("%d approvals created for one question, want 1", createdN)
	}
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("callers got different approvals: %v", ids)
		}
	}
}

func decideOnce(t *testing.T, st owner.Store) {
	ctx := context.Background()
	if _, _, err := st.CreateApproval(ctx, newApproval("apr_1", owner.KindPurchase), "k", t0); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := map[owner.ApprovalStatus]int{}
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st8 := owner.StatusApproved
			if i%2 == 1 {
				st8 = owner.StatusDenied
			}
			_, err := st.DecideApproval(ctx, "apr_1", st8, "x", t0.Add(time.Minute))
			switch agentvault.ErrorCode(err) {
			case "":
				mu.Lock()
				wins[st8]++
				mu.Unlock()
			case agentvault.CodeConflict:
			default:
				t.Errorf("decide: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins[owner.StatusApproved]+wins[owner.StatusDenied] != 1 {
		t.Fatalf("%v decisions won, want exactly one", wins)
	}
	if _, err := st.DecideApproval(ctx, "apr_1", owner.StatusPending, "x", t0); agentvault.ErrorCode(err) != agentvault.CodeInvalidInput {
		t.Fatalf("deciding pending: %v", err)
	}
}

func accounts(t *testing.T, st owner.Store) {
	ctx := context.Background()
	if n, err := st.CountAccounts(ctx); err != nil || n != 0 {
		t.Fatalf("count: %d %v", n, err)
	}
	a := owner.Account{Org: "o", Email: "me@example.com", PasswordHash: "$argon2id$x", Created: t0, Updated: t0}
	if err := st.PutAccount(ctx, a); err != nil {
		t.Fatal(err)
	}
	a.PasswordHash, a.Updated, a.Created = "$argon2id$y", t0.Add(time.Hour), t0.Add(time.Hour)
	if err := st.PutAccount(ctx, a); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetAccount(ctx, "me@example.com")
	if err != nil || got.PasswordHash != "$argon2id$y" || !got.Created.Equal(t0) || !got.Updated.Equal(t0.Add(time.Hour)) {
		t.Fatalf("account: %+v %v", got, err)
	}
	if n, _ := st.CountAccounts(ctx); n != 1 {
		t.Fatalf("count %d", n)
	}
	if err := st.PutAccount(ctx, owner.Account{Org: "o", Email: "ada@example.com", PasswordHash: "$argon2id$z", Created: t0, Updated: t0}); err != nil {
		t.Fatal(err)
	}
	if list, err := st.ListAccounts(ctx); err != nil || len(list) != 2 || list[0].Email != "ada@example.com" || list[1].Email != "me@example.com" ||
		list[1].Org != "o" || list[0].PasswordHash != "" || !list[1].Updated.Equal(t0.Add(time.Hour)) {
		t.Fatalf("ListAccounts = %+v, %v", list, err)
	}
	if _, err := st.GetAccount(ctx, "nobody@example.com"); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("missing account: %v", err)
	}
	h1, h2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	for _, d := range []owner.DashSession{
		{TokenHash: h1, Email: "me@example.com", Created: t0, Expires: t0.Add(time.Hour)},
		{TokenHash: h2, Email: "me@example.com", Created: t0, Expires: t0.Add(3 * time.Hour)},
	} {
		if err := st.PutDashSession(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	d, err := st.GetDashSession(ctx, h1)
	if err != nil || d.Email != "me@example.com" || !d.Expires.Equal(t0.Add(time.Hour)) {
		t.Fatalf("session: %+v %v", d, err)
	}
	if err := st.DeleteExpiredDashSessions(ctx, t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetDashSession(ctx, h1); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("expired session: %v", err)
	}
	if _, err := st.GetDashSession(ctx, h2); err != nil {
		t.Fatalf("live session: %v", err)
	}
	if err := st.DeleteDashSessions(ctx, "me@example.com"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetDashSession(ctx, h2); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("after sign-out everywhere: %v", err)
	}
}

func signups(t *testing.T, st owner.Store) {
	ctx := context.Background()
	for range 2 {
		if err := st.AddSignup(ctx, owner.Signup{Org: "o", Site: "news.example", Email: "me@example.com", AddedBy: "owner", Added: t0}); err != nil {
			t.Fatal(err)
		}
	}
	list, err := st.ListSignups(ctx, "o")
	if err != nil || len(list) != 1 || list[0].Site != "news.example" || !list[0].Added.Equal(t0) {
		t.Fatalf("list: %+v %v", list, err)
	}
	if err := st.RemoveSignup(ctx, "o", "news.example", "me@example.com"); err != nil {
		t.Fatal(err)
	}
	if err := st.RemoveSignup(ctx, "o", "news.example", "me@example.com"); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("remove twice: %v", err)
	}
}

func reservation(t *testing.T, st owner.Store) {
	ctx := context.Background()
	if _, err := st.GetReservation(ctx, "r1"); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("missing reservation: %v", err)
	}
	r := policy.Reservation{ID: "r1", CardID: "itm_c", Amount: policy.MustAmount("12.34 EUR"), Day: "2026-11-30", Month: "2026-11"}
	if err := st.Reserve(ctx, r); err != nil {
		t.Fatal(err)
	}
	got, err := st.GetReservation(ctx, "r1")
	if err != nil || got.CardID != r.CardID || got.Amount != r.Amount || got.Day != r.Day || got.Month != r.Month {
		t.Fatalf("reservation: %+v %v", got, err)
	}
}

func refusals(t *testing.T, st owner.Store) {
	ctx := context.Background()
	for i, org := range []string{"o", "o", "other", "o"} {
		r := owner.Refusal{Org: org, Time: t0.Add(time.Duration(i) * time.Hour), APIKeyID: "avk_1", Session: "s_1", ItemID: "itm_c",
			Kind: "card", Field: "number", Site: "shop.example", Code: fmt.Sprint("code", i)}
		if err := st.AppendRefusal(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := st.ListRefusals(ctx, "o", t0.Add(time.Hour), 0)
	if err != nil || len(got) != 2 || got[0].Code != "code3" || got[1].Code != "code1" || !got[1].Time.Equal(t0.Add(time.Hour)) || got[0].Site != "shop.example" {
		t.Fatalf("refusals: %+v %v", got, err)
	}
	if got, _ := st.ListRefusals(ctx, "o", time.Time{}, 1); len(got) != 1 || got[0].Code != "code3" {
		t.Fatalf("limit: %+v", got)
	}
}
