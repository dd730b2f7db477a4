package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/internal/leakcheck"
)

// TestOwnerApprovesInDashboard is the issue-5 proof in real Chromium. proxyd's
// own Main runs with the owner's rules on (set explicitly) and the dashboard
// on TLS; the built mcpd is the agent's MCP server over stdio; the test
// merchant sells. The card has an approval threshold of EUR 50.
//
//   - The agent's first card-number fill on the processor (a site the owner
//     never authorized) waits: progress notifications reach the MCP client
//     while the owner, in a second Chromium, signs in to the dashboard over
//     TLS, sees the banner and approves. The fill completes, the order goes
//     through and is corroborated.
//   - A second order over the threshold asks for a purchase approval; the
//     owner denies it on the dashboard and the agent gets approval_denied,
//     with nothing typed in the number field.
//   - A total raised after the owner's approval is refused at proxyd with
//     amount_mismatch.
func TestOwnerApprovesInDashboard(t *testing.T) {
	requireE2E(t, true)
	oa := startOwnerAppliance(t, "50.00")
	bin := buildCmd(t, "mcpd")
	args, env := oa.mcpdArgs()
	agent, progress := startAgentWithProgress(t, bin, args, env)
	owner := oa.signInOwner(t)

	cat := agent.must("get_token_catalog", map[string]any{"url": oa.m.Shop.URL + "/checkout"})
	numberTok, cvvTok := findToken(cat.text, "card", "number"), findToken(cat.text, "card", "cvv")
	if numberTok == "" || cvvTok == "" {
		t.Fatalf("catalog (%d bytes) has no card tokens", len(cat.text))
	}
	toCheckout := func(products ...string) {
		t.Helper()
		for _, p := range products {
			agent.must("open_page", map[string]any{"url": oa.m.Shop.URL + "/products/" + p})
			agent.must("click", map[string]any{"selector": "#add-to-cart"})
			agent.must("wait_for_selector", map[string]any{"selector": "#checkout", "timeout": 30000})
		}
		agent.must("click", map[string]any{"selector": "#checkout"})
		agent.must("wait_for_selector", map[string]any{"selector": numberSel, "frame": payFrame, "timeout": 30000})
		agent.must("fill_checkout", map[string]any{"fields": []map[string]any{
			{"selector": "#email", "value": "ada@example.org"},
			{"selector": "#first-name", "value": "Ada"},
			{"selector": "#last-name", "value": "Lovelace"},
			{"selector": "#address-line1", "value": "12 Analytical Row"},
			{"selector": "#postal-code", "value": "10115"},
			{"selector": "#city", "value": "Berlin"},
			{"selector": "#country", "value": "DE", "kind": "select"},
			{"selector": "#exp-month", "value": oa.card.month, "kind": "select", "frame": payFrame},
			{"selector": "#exp-year", "value": oa.card.year, "kind": "select", "frame": payFrame},
		}, "timeout": 5000})
	}
	numberFill := []map[string]any{{"selector": numberSel, "value": numberTok, "frame": payFrame}, {"selector": cvcSel, "value": cvvTok, "frame": payFrame}}

	t.Run("new site approved on the dashboard", func(t *testing.T) {
		toCheckout("trail-shoes")
		progress.drain()
		fill := agent.callAsync("fill_checkout", map[string]any{"fields": numberFill, "timeout": 5000}, "new-site")
		first := progress.next(t, 60*time.Second)
		if !strings.Contains(first, "approve new site") {
			t.Fatalf("first progress notification %q does not say a new site waits", first)
		}
		banner := owner.decideNext(t, "approve")
		approvedAt := time.Now()
		if !strings.Contains(banner, "waiting for you") || !strings.Contains(strings.ToLower(banner), "new site") {
			t.Errorf("dashboard banner %q does not show the new site", banner)
		}
		r := fill.wait(t)
		t.Logf("the fill finished %v after the owner's approval page loaded (%d progress notifications)", time.Since(approvedAt).Round(time.Millisecond), progress.count())
		if r.isErr || !strings.HasPrefix(r.text, "status=ok filled=2/2") || !strings.Contains(r.text, ": approved.") {
			t.Fatalf("fill after the owner's approval: %q", r.status())
		}
		if n := progress.atLeast(2, 10*time.Second); n < 2 {
			t.Errorf("%d progress notifications, want the wait and its end", n)
		}
		agent.must("click", map[string]any{"selector": "#place-order"})
		o := agent.must("get_session_outcome", map[string]any{
			"successSelector": successSel, "failureSelector": "#form-error:not([hidden])",
			"confirmsCheckout": true, "submitSelector": "#place-order", "timeout": 20000,
		}).json(t)
		if o["outcome"] != "success" || o["corroborated"] != true {
			t.Fatalf("outcome %v, corroborated %v, because %v", o["outcome"], o["corroborated"], o["notCorroboratedBecause"])
		}
		// The confirmation announces itself in a live region: observe_page
		// reads it without calling the page an error page.
		obs := agent.must("observe_page", map[string]any{}).json(t)
		if obs["error"] == true {
			t.Errorf("observe_page calls the confirmation an error: %v", leakcheck.Redact(strings.Join(asStrings(obs["errorText"]), "|")))
		}
		if orders := oa.m.Orders(); len(orders) != 1 || orders[0].Total != "42.50" {
			t.Fatalf("merchant has %d orders, want one of EUR 42.50", len(orders))
		}
		agent.must("close_session", map[string]any{})
	})

	t.Run("purchase over the threshold denied on the dashboard", func(t *testing.T) {
		charges := len(oa.m.Charges())
		toCheckout("trail-shoes", "headlamp") // 37.60 + 29.90 + 4.90 shipping = 72.40
		progress.drain()
		fill := agent.callAsync("fill_checkout", map[string]any{"fields": numberFill, "timeout": 5000}, "purchase")
		for {
			msg := progress.next(t, 60*time.Second)
			if strings.HasPrefix(msg, "Waiting for the account owner to approve new site") {
				// The site approval covered the first session only.
				owner.decideNext(t, "approve")
				continue
			}
			if strings.HasPrefix(msg, "Waiting for the account owner to approve a purchase") {
				if !strings.Contains(msg, "EUR 72.40") {
					t.Errorf("purchase wait %q does not name the total", msg)
				}
				break
			}
		}
		owner.decideNext(t, "deny")
		r := fill.wait(t)
		if !r.isErr || r.code() != "approval_denied" || !strings.Contains(r.status(), "filled=0/2") {
			t.Fatalf("denied purchase: %q", r.status())
		}
		if !strings.Contains(r.text, "approve a purchase of EUR 72.40") || !strings.Contains(r.text, "denied") {
			t.Errorf("the refusal does not say what was asked and how it ended: %q", leakcheck.Redact(r.text))
		}
		if len(oa.m.Charges()) != charges {
			t.Error("a denied purchase reached the processor")
		}
		agent.must("close_session", map[string]any{})
	})

	t.Run("total raised after approval", func(t *testing.T) {
		oa.amountMismatch(t, owner)
	})

	agent.close()
	l := leakcheck.New(leakcheck.Value("card number", oa.card.number), leakcheck.Value("cvv", oa.card.cvv))
	agent.transcript.sweep(t, l, "MCP results")
	l.Logs(t, "mcpd log", agent.logs.Bytes())
	l.Logs(t, "proxyd logs", oa.logs.Bytes())
	l.Text(t, "owner's dashboard pages", owner.seen.Bytes())
	t.Logf("P11 sweep covered %s", l.Summary())
}

func asStrings(v any) []string {
	var out []string
	if xs, ok := v.([]any); ok {
		for _, x := range xs {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// amountMismatch: the owner approves, on the dashboard, a purchase for the
// total the page showed when the number was authorized; a payment that then
// names a larger amount is refused at proxyd with amount_mismatch before
// anything reaches the processor, while the approved amount goes through.
// The authorize here is the control API itself (what mcpd calls), and the
// payment is the processor's plain form posted through the session's proxy:
// the merchant's card iframe does not put the amount on the wire.
func (oa *ownerAppliance) amountMismatch(t *testing.T, owner *ownerBrowser) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := oa.ctl.CreateSession(ctx, oa.apiKey)
	if err != nil {
		t.Fatalf("create session: %v", err)
	}
	defer oa.ctl.CloseSession(context.Background(), s.ID)
	legacy := oa.m.Pay.URL + "/legacy/checkout"
	cat, err := oa.ctl.Catalog(ctx, oa.apiKey, legacy)
	if err != nil {
		t.Fatalf("catalog: %v", err)
	}
	ps := proxySession{s: s, legacyCheckout: legacy,
		numberToken: findToken(string(cat), "card", "number"), cvvToken: findToken(string(cat), "card", "cvv")}
	total := &control.OrderTotal{Amount: "72.40", Currency: "EUR"}
	authorize := func(token string) string {
		t.Helper()
		for range 4 {
			a, err := oa.ctl.Authorize(ctx, s.ID, control.AuthorizeRequest{Token: token, PageURL: legacy, OrderTotal: total})
			p, pending := control.PendingOf(err)
			if !pending {
				if err != nil {
					t.Fatalf("authorize: %v", err)
				}
				return a.Value
			}
			if p.Kind == "purchase" && (p.Amount == nil || p.Amount.Amount != "72.40") {
				t.Errorf("purchase approval for %v, want EUR 72.40", p.Amount)
			}
			owner.decideNext(t, "approve")
			for {
				w, err := oa.ctl.Wait(ctx, p.WaitID, 10*time.Second)
				if err != nil {
					t.Fatalf("wait: %v", err)
				}
				if w.Status == "approved" {
					break
				}
				if w.Status != "pending" {
					t.Fatalf("approval ended %s (%s)", w.Status, w.Code)
				}
			}
		}
		t.Fatal("authorize still pending after 4 approvals")
		return ""
	}
	ps.numberStandIn = authorize(ps.numberToken)
	ps.cvvStandIn = authorize(ps.cvvToken)
	client := ps.goClient(t)
	before := oa.m.Pay.Count(oa.card.number)

	raised := ps.form(oa.appliance)
	raised.Set("amount", "99.00")
	res, err := client.PostForm(legacy, raised)
	if code, _ := refusal(t, res, err); code != "amount_mismatch" {
		t.Errorf("a payment of EUR 99.00 after approving EUR 72.40: code %q, want amount_mismatch", code)
	}
	if oa.m.Pay.Count(oa.card.number) != before {
		t.Fatal("the raised payment reached the processor with the real number")
	}

	approved := ps.form(oa.appliance)
	approved.Set("amount", "72.40")
	res, err = ps.goClient(t).PostForm(legacy, approved)
	if err != nil {
		t.Fatalf("approved payment: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || oa.m.Pay.Count(oa.card.number) != before+1 {
		t.Errorf("the approved amount: status %d, processor saw the number %d times", res.StatusCode, oa.m.Pay.Count(oa.card.number)-before)
	}
}
