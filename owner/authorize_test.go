package owner_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/store/sqlite"
	"github.com/agentvault/agentvault/vault"
)

func lastTwoLabels(h string) (string, error) {
	parts := strings.Split(h, ".")
	return strings.Join(parts[len(parts)-2:], "."), nil
}

// TestP18_AuthorizeAsksThenReservesOnce walks proxyd's authorize hook
// through a new site, a purchase over the threshold, the owner's yes, a
// retried call that spends nothing more, a cap, a denial and a revocation.
func TestP18_AuthorizeAsksThenReservesOnce(t *testing.T) {
	ctx := context.Background()
	s, k := deciding(t, openStore(t), owner.Scope{AllCards: true})
	card := vault.Item{ID: "itm_c", Kind: vault.KindCard, Fields: []vault.Field{vault.FieldNumber, vault.FieldCVV}, Card: &vault.CardMeta{AnySite: true}}
	if err := s.SetCardPolicy(ctx, owner.CardPolicy{CardID: card.ID, Rules: policy.CardPolicy{
		ApprovalThreshold: ptr(policy.MustAmount("50.00 EUR")), DailyCap: ptr(policy.MustAmount("100.00 EUR"))}}, "owner"); err != nil {
		t.Fatal(err)
	}
	total := policy.MustAmount("80.00 EUR")
	fill := policy.Fill{KeyID: k.ID, Session: "s_1", Item: card, Field: vault.FieldNumber, Destination: "pay.shop.example", Total: &total}

	pendingOn := func(want owner.ApprovalKind) owner.Approval {
		t.Helper()
		err := s.Authorize(ctx, fill)
		p, ok := owner.PendingOf(err)
		if agentvault.ErrorCode(err) != agentvault.CodeApprovalPending || !ok || p.Kind != want {
			t.Fatalf("want pending %s, got %v", want, err)
		}
		return p
	}
	p := pendingOn(owner.KindNewDestination)
	if p.Site != "shop.example" || !strings.HasPrefix(p.ID, "apr_") || p.Expires.IsZero() {
		t.Fatalf("pending approval %+v", p)
	}
	if again := pendingOn(owner.KindNewDestination); again.ID != p.ID {
		t.Fatal("a retried authorize asked the owner twice")
	}
	if _, err := s.Decide(ctx, p.ID, true, "owner"); err != nil {
		t.Fatal(err)
	}
	p = pendingOn(owner.KindPurchase)
	if p.Reason != string(policy.ReasonOverThreshold) || p.Amount == nil || *p.Amount != total {
		t.Fatalf("purchase pending %+v", p)
	}
	a, _ := s.Decide(ctx, p.ID, true, "owner")
	if a.Status != owner.StatusApproved || a.Outcome() != nil {
		t.Fatalf("approval %+v", a)
	}
	for range 3 {
		if err := s.Authorize(ctx, fill); err != nil {
			t.Fatalf("approved fill: %v", err)
		}
	}
	today, _, _ := s.Ledger().Spent(ctx, card.ID, s.Day(newClock().Now()), s.Month(newClock().Now()), "EUR")
	if today != total {
		t.Fatalf("spent %s after three calls, want one charge of %s", today, total)
	}
	// Another session's 80.00 would break the daily cap: refused, not asked.
	other := fill
	other.Session = "s_2"
	if err := s.Authorize(ctx, other); agentvault.ErrorCode(err) != agentvault.CodeDailyLimit {
		t.Fatalf("over the cap: %v", err)
	}
	if rs, err := s.Refusals(ctx, time.Time{}, 0); err != nil || len(rs) != 1 || rs[0].Code != string(agentvault.CodeDailyLimit) || rs[0].Session != "s_2" || rs[0].Site != "shop.example" {
		t.Fatalf("refusal log: %+v %v", rs, err)
	}
	// A denied purchase answers approval_denied to the waiter.
	small := policy.MustAmount("10.00 EUR")
	s.SetCardPolicy(ctx, owner.CardPolicy{CardID: card.ID, Rules: policy.CardPolicy{EveryPurchase: true}}, "owner")
	other.Total = &small
	err := s.Authorize(ctx, other)
	p, _ = owner.PendingOf(err)
	a, _ = s.Decide(ctx, p.ID, false, "owner")
	if a.Status != owner.StatusDenied || agentvault.ErrorCode(a.Outcome()) != agentvault.CodeApprovalDenied {
		t.Fatalf("denied approval %+v", a)
	}
	if err := s.Revoke(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Authorize(ctx, fill); agentvault.ErrorCode(err) != agentvault.CodeKeyRevoked {
		t.Fatalf("revoked key: %v", err)
	}
}

// TestP11_ApprovalNamesItemAndPageNotQuery: an approval a fill raises names
// the item and the page (scheme, host and path: a query or fragment never
// reaches the store). The page and the item are not part of what makes two
// requests one: a new site asked by a card and then by an identity (another
// item, another page) is one question, showing the first fill; a purchase
// is per card.
func TestP11_ApprovalNamesItemAndPageNotQuery(t *testing.T) {
	ctx := context.Background()
	s, k := deciding(t, openStore(t), owner.Scope{AllCards: true, AllLogins: true})
	card := vault.Item{ID: "itm_c", Kind: vault.KindCard, Fields: []vault.Field{vault.FieldNumber, vault.FieldCVV}, Card: &vault.CardMeta{AnySite: true}}
	ident := vault.Item{ID: "itm_i", Kind: vault.KindIdentity, Fields: []vault.Field{vault.FieldName}}
	pending := func(r policy.Fill) owner.Approval {
		t.Helper()
		a, ok := owner.PendingOf(s.Authorize(ctx, r))
		if !ok {
			t.Fatalf("fill of %s did not wait on the owner", r.Item.ID)
		}
		return a
	}
	byCard := policy.Fill{KeyID: k.ID, Session: "s_1", Item: card, Field: vault.FieldNumber, Destination: "pay.shop.example",
		Page: "https://pay.shop.example/checkout?email=ada%40example.com#card"}
	nd := pending(byCard)
	if nd.Kind != owner.KindNewDestination || nd.ItemID != card.ID || nd.CardID != "" || nd.Page != "https://pay.shop.example/checkout" {
		t.Fatalf("new site approval: kind %s item %q card %q page %q", nd.Kind, nd.ItemID, nd.CardID, nd.Page)
	}
	byIdent := policy.Fill{KeyID: k.ID, Session: "s_2", Item: ident, Field: vault.FieldName, Destination: "shop.example",
		Page: "https://shop.example/address"}
	if again := pending(byIdent); again.ID != nd.ID || again.ItemID != card.ID || again.Page != nd.Page {
		t.Fatalf("another item's fill of the same new site asked again or changed it: %+v", again)
	}
	if _, err := s.Decide(ctx, nd.ID, true, "owner"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetCardPolicy(ctx, owner.CardPolicy{CardID: card.ID, Rules: policy.CardPolicy{EveryPurchase: true}}, "owner"); err != nil {
		t.Fatal(err)
	}
	total := policy.MustAmount("10.00 EUR")
	byCard.Total = &total
	pu := pending(byCard)
	if pu.Kind != owner.KindPurchase || pu.ItemID != card.ID || pu.CardID != card.ID || pu.Page != "https://pay.shop.example/checkout" {
		t.Fatalf("purchase approval: %+v", pu)
	}
	read, err := s.Approval(ctx, pu.ID)
	if err != nil || read.ItemID != card.ID || read.Page != pu.Page {
		t.Fatalf("stored purchase approval: %+v %v", read, err)
	}
	// Another page of the same purchase is the same question.
	byCard.Page = "https://pay.shop.example/checkout/step2"
	if again := pending(byCard); again.ID != pu.ID {
		t.Fatal("the page became part of the purchase's dedupe key")
	}
}

// openStore is a SQLite store in a file of the test's, closed after it.
func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "vault.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// deciding is a service over st that decides fills (with a policy engine)
// and an agent's API key of scope.
func deciding(t *testing.T, st owner.Store, scope owner.Scope) (*owner.Service, owner.APIKey) {
	t.Helper()
	s, err := owner.New(owner.Config{Store: st, Org: "o", Now: newClock().Now, Password: fastPW,
		Engine: policy.NewEngine(policy.Rates{}, lastTwoLabels)})
	if err != nil {
		t.Fatal(err)
	}
	k, _, err := s.CreateAPIKey(context.Background(), "agent", scope)
	if err != nil {
		t.Fatal(err)
	}
	return s, k
}

// countingStore counts the ledger reads of a retried-authorize check.
type countingStore struct {
	*sqlite.Store
	reads int
}

func (c *countingStore) GetReservation(ctx context.Context, id string) (policy.Reservation, error) {
	c.reads++
	return c.Store.GetReservation(ctx, id)
}

// TestAuthorizeReadsTheLedgerEntryOnlyOnARefusal: an allowed purchase
// decides without reading its own ledger entry (a new purchase has none); a
// retried call that the caps would refuse when counted against itself reads
// it, is allowed, and spends nothing more; another purchase over the cap
// reads it, finds none, and is refused.
func TestAuthorizeReadsTheLedgerEntryOnlyOnARefusal(t *testing.T) {
	ctx := context.Background()
	cs := &countingStore{Store: openStore(t)}
	s, k := deciding(t, cs, owner.Scope{AllCards: true})
	card := vault.Item{ID: "itm_c", Kind: vault.KindCard, Fields: []vault.Field{vault.FieldNumber}, Card: &vault.CardMeta{AnySite: true}}
	if err := s.SetCardPolicy(ctx, owner.CardPolicy{CardID: card.ID, Rules: policy.CardPolicy{
		DailyCap: ptr(policy.MustAmount("100.00 EUR"))}}, "owner"); err != nil {
		t.Fatal(err)
	}
	if err := s.AuthorizeSite(ctx, "shop.example", "owner"); err != nil {
		t.Fatal(err)
	}
	total := policy.MustAmount("60.00 EUR")
	fill := policy.Fill{KeyID: k.ID, Session: "s_1", Item: card, Field: vault.FieldNumber, Destination: "pay.shop.example", Total: &total}
	if err := s.Authorize(ctx, fill); err != nil {
		t.Fatal(err)
	}
	if cs.reads != 0 {
		t.Fatalf("an allowed purchase read the ledger entry %d times", cs.reads)
	}
	if err := s.Authorize(ctx, fill); err != nil { // 60 + 60 > 100 unless it is the same charge
		t.Fatalf("retried purchase: %v", err)
	}
	if cs.reads != 1 {
		t.Fatalf("the retried purchase read the ledger entry %d times, want 1", cs.reads)
	}
	today, _, _ := s.Ledger().Spent(ctx, card.ID, s.Day(newClock().Now()), s.Month(newClock().Now()), "EUR")
	if today != total {
		t.Fatalf("spent %s after a retry, want one charge of %s", today, total)
	}
	other := fill
	other.Session = "s_2"
	if err := s.Authorize(ctx, other); agentvault.ErrorCode(err) != agentvault.CodeDailyLimit {
		t.Fatalf("another purchase over the cap: %v", err)
	}
	if cs.reads != 2 {
		t.Fatalf("the refused purchase read the ledger entry %d times in all, want 2", cs.reads)
	}
}
