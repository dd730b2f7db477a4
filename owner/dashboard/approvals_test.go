package dashboard_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/owner/dashboard"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/vault"
)

// TestApprovalsSayWhatTheyApprove: each request names its site, its card
// (label, last 4 and expiry) and amount, and what a yes does: a new site
// stays authorized for good. The page refreshes itself (no script: a meta
// refresh) and its title counts what is waiting, except while it asks for a
// security code the owner may be typing.
func TestApprovalsSayWhatTheyApprove(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	amt := policy.MustAmount("84.90 EUR")
	if _, err := e.svc.RequestApproval(ctx, owner.ApprovalRequest{Kind: owner.KindPurchase, Reason: string(policy.ReasonOverThreshold),
		Site: "shop.example", CardID: e.card.ID, Amount: &amt, APIKeyID: "avk_1", Session: "s_1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.RequestApproval(ctx, owner.ApprovalRequest{Kind: owner.KindNewDestination, Reason: "new_destination", Site: "tickets.example.org"}); err != nil {
		t.Fatal(err)
	}
	e.signIn(ownerPW)
	code, body := e.get("/")
	if code != 200 {
		t.Fatalf("approvals: %d", code)
	}
	c := e.card.Card
	card := fmt.Sprintf("•••• %s (card %s, exp %02d/%02d)", c.Last4, e.card.Label, c.ExpiryMonth, c.ExpiryYear%100)
	for _, want := range []string{
		"<title>(2) Approvals · agentvault</title>",
		`<meta http-equiv="refresh" content="15">`,
		card,
		"84.90",
		"Approving authorizes tickets.example.org (and its subdomains) for good",
		"until you remove it on the Sites page",
		"Approving lets this one purchase of",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the Approvals page lacks %q", want)
		}
	}
	// Other pages carry the count in their title, but do not refresh.
	if _, cards := e.get("/cards"); !strings.Contains(cards, "<title>(2) Cards") || strings.Contains(cards, "http-equiv=\"refresh\"") {
		t.Error("the Cards page title lacks the count, or it refreshes")
	}

	// A security code asked on the page: no refresh under the owner's typing.
	live := newEnv(t, func(c *dashboard.Config) {
		c.LiveCVV = func(context.Context, owner.Approval, vault.Secret) error { return nil }
	})
	if _, err := live.svc.RequestApproval(ctx, owner.ApprovalRequest{Kind: owner.KindCVVEntry, Reason: string(policy.ReasonCVVEntry),
		Site: "shop.example", CardID: live.card.ID, APIKeyID: "avk_1", Session: "s_2"}); err != nil {
		t.Fatal(err)
	}
	live.signIn(ownerPW)
	_, body = live.get("/")
	if strings.Contains(body, `http-equiv="refresh"`) || !strings.Contains(body, "does not refresh itself while it asks for a security code") {
		t.Error("the page refreshes while it asks for a security code")
	}
}

// TestP11_ApprovalsNameTheItemAndThePage: approvals raised by fills name
// the card (label, last 4, expiry) or other item and the page the agent was
// filling, scheme, host and path only: the page's query and fragment (an
// email here) are nowhere on the dashboard.
func TestP11_ApprovalsNameTheItemAndThePage(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	key, _, err := e.svc.CreateAPIKey(ctx, "agent", owner.Scope{AllCards: true, AllLogins: true})
	if err != nil {
		t.Fatal(err)
	}
	fill := policy.Fill{KeyID: key.ID, Session: "s_1", Item: e.card, Field: vault.FieldNumber, Destination: "pay.shop.example",
		Page: "https://pay.shop.example/checkout/pay?email=ada%40example.com&order=77#card-step"}
	nd, ok := owner.PendingOf(e.svc.Authorize(ctx, fill))
	if !ok || nd.Kind != owner.KindNewDestination {
		t.Fatalf("a card fill on a new site: %+v", nd)
	}
	e.signIn(ownerPW)
	c := e.card.Card
	card := fmt.Sprintf("•••• %s (card %s, exp %02d/%02d)", c.Last4, e.card.Label, c.ExpiryMonth, c.ExpiryYear%100)
	check := func(what string, wants ...string) {
		t.Helper()
		code, body := e.get("/")
		if code != 200 {
			t.Fatalf("approvals: %d", code)
		}
		for _, want := range wants {
			if !strings.Contains(body, want) {
				t.Errorf("%s: the Approvals page lacks %q", what, want)
			}
		}
		for _, leak := range []string{"ada%40example.com", "ada@example.com", "order=77", "card-step", "?email"} {
			if strings.Contains(body, leak) {
				t.Errorf("%s: the Approvals page shows the page's query or fragment (%q)", what, leak)
			}
		}
	}
	check("new site", "<dt>Card</dt><dd>Visa "+card, `<dt>Page</dt><dd><code class="page">https://pay.shop.example/checkout/pay</code>`,
		"Approving authorizes shop.example (and its subdomains) for good")
	if _, err := e.svc.Decide(ctx, nd.ID, true, "owner:"+ownerEmail); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.SetCardPolicy(ctx, owner.CardPolicy{CardID: e.card.ID, Rules: policy.CardPolicy{EveryPurchase: true}}, "owner"); err != nil {
		t.Fatal(err)
	}
	total := policy.MustAmount("19.99 EUR")
	fill.Total = &total
	if pu, ok := owner.PendingOf(e.svc.Authorize(ctx, fill)); !ok || pu.Kind != owner.KindPurchase {
		t.Fatalf("a purchase: %+v", pu)
	}
	check("purchase", "Purchase on", "<dt>Card</dt><dd>Visa "+card, `<code class="page">https://pay.shop.example/checkout/pay</code>`, "19.99",
		// the decided new-site approval names its card too
		"<td>New site</td><td>shop.example</td><td>Visa "+card)
}

// TestP24_TOTPReplacementNamesTheLoginAndTheSite: the owner's question on
// a new authenticator secret for a login that has one says which login
// (its site and label) and which site, the page it came from without its
// query, and what a yes and a no do.
func TestP24_TOTPReplacementNamesTheLoginAndTheSite(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.svc.RequestApproval(ctx, owner.ApprovalRequest{Kind: owner.KindTOTPReplace, Reason: string(owner.KindTOTPReplace),
		Site: "github.com", ItemID: e.login.ID, Page: "https://github.com/settings/2fa?q=JBSWY3DPEHPK3PXP", APIKeyID: "avk_1",
		Session: "s_1", Subject: "tc_1"}); err != nil {
		t.Fatal(err)
	}
	e.signIn(ownerPW)
	code, body := e.get("/")
	if code != 200 {
		t.Fatalf("approvals: %d", code)
	}
	for _, want := range []string{
		"New authenticator secret on <span class=\"site\">github.com</span>",
		"<dt>Login</dt><dd>github.com login " + e.login.Label + "</dd>",
		`<code class="page">https://github.com/settings/2fa</code>`,
		"Approving replaces the authenticator (TOTP) secret stored for this login",
		"denying keeps the stored secret",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the Approvals page lacks %q", want)
		}
	}
	if strings.Contains(body, "JBSWY3DP") {
		t.Error("the Approvals page shows the page's query")
	}
}

// TestActivityCountsOnlyValuesSentToSites: an authorization (the agent got
// a stand-in; the value stayed here) is not counted as a value released;
// a substitution (the value went to a site) is.
func TestActivityCountsOnlyValuesSentToSites(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, purpose := range []string{"authorize", "authorize", "substitute"} {
		if _, err := e.vault.Release(ctx, vault.ReleaseArgs{Org: org, ItemID: e.card.ID, Field: vault.FieldNumber,
			Destination: "shop.example", Actor: "avk_1", Session: "s_1", Purpose: purpose}); err != nil {
			t.Fatal(err)
		}
	}
	e.signIn(ownerPW)
	_, body := e.get("/activity")
	for _, want := range []string{"<strong>1</strong> values sent to sites", "<strong>2</strong> authorizations (the value stayed on this machine)",
		"authorized (not sent)", "sent to site"} {
		if !strings.Contains(body, want) {
			t.Errorf("Activity lacks %q", want)
		}
	}
}

// TestDuplicateCardRefusedOnTheDashboard: the same number added twice is
// refused with the card it duplicates named (compared by keyed HMAC, the
// number never shown); a card that predates the check and shares last 4
// and expiry is added with a warning to judge.
func TestDuplicateCardRefusedOnTheDashboard(t *testing.T) {
	e := newEnv(t)
	e.signIn(ownerPW)
	if code, body := e.post("/cards/new", "/cards", cardForm(newSpaced, newCVV)); code != 200 || !strings.Contains(body, "Card added") {
		t.Fatalf("first add: %d", code)
	}
	code, body := e.post("/cards/new", "/cards", cardForm(strings.ReplaceAll(newSpaced, " ", ""), "1234"))
	if code != 409 || !strings.Contains(body, "already in the vault as card 2: amex •••• 8431, exp 07/31") {
		t.Errorf("the same number twice: %d", code)
	}
	if strings.Contains(body, "371449635398431") {
		t.Error("the refusal shows the number")
	}
	// The env's card (4242…, exp 04/2030) was added without a fingerprint.
	f := cardForm("4000056655024242", "123")
	f.Set("exp_month", "04")
	f.Set("exp_year", "2030")
	if code, body := e.post("/cards/new", "/cards", f); code != 200 || !strings.Contains(body, "may be this same card") {
		t.Errorf("a possible duplicate is not flagged: %d", code)
	}
}
