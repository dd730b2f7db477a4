package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/e2e/merchant"
	"github.com/agentvault/agentvault/internal/leakcheck"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/proxyd"
	"github.com/agentvault/agentvault/vault"
)

const overlayFrame = "#checkout-overlay"

// confirmPosts counts the card confirmations the processor received.
func confirmPosts(m *merchant.Merchant) int {
	n := 0
	for _, r := range m.Pay.Requests() {
		if r.Method == "POST" && strings.HasSuffix(r.Path, "/confirm") {
			n++
		}
	}
	return n
}

// TestP18_Seed004OrderTotalHintInACrossOriginFrame: a card with a spending
// cap (per purchase) on the overlay checkout, whose total lives only in the
// processor's cross-origin iframe. Without a hint the card number's fill is
// refused with checkout_total_unknown (seed 004) and the processor is
// never charged; after declare_page_hint order.total pointing into the
// frame, the same card pays the frame's total and the processor is charged
// once, for that total. In real Chromium over proxyd; no card value in any
// transcript or log (P11).
func TestP18_Seed004OrderTotalHintInACrossOriginFrame(t *testing.T) {
	requireE2E(t, true)
	ap := startAppliance(t)
	ctx := context.Background()
	items, err := ap.vault.List(ctx, proxyd.DefaultOrg)
	if err != nil {
		t.Fatal(err)
	}
	var cardID string
	for _, it := range items {
		if it.Kind == vault.KindCard {
			cardID = it.ID
		}
	}
	limit, err := policy.ParseDecimal("100.00", "EUR")
	if err != nil {
		t.Fatal(err)
	}
	if err := ap.pm.Owner.SetCardPolicy(ctx, owner.CardPolicy{CardID: cardID, Currency: "EUR",
		Rules: policy.CardPolicy{PerPurchaseCap: &limit}}, "e2e"); err != nil {
		t.Fatal(err)
	}
	bin := buildCmd(t, "mcpd")
	args, env := ap.mcpdArgs()
	agent := startAgent(t, bin, args, env)
	checkoutURL := ap.m.Shop.URL + "/overlay/checkout"
	cat := agent.must("get_token_catalog", map[string]any{"url": checkoutURL})
	numberTok, cvvTok := findToken(cat.text, "card", "number"), findToken(cat.text, "card", "cvv")
	if numberTok == "" || cvvTok == "" {
		t.Fatal("the catalog has no card tokens for the shop")
	}
	openOverlay := func() {
		agent.must("open_page", map[string]any{"url": checkoutURL})
		agent.must("wait_for_selector", map[string]any{"selector": "#card-number", "frame": overlayFrame, "timeout": 30000})
		agent.must("fill_checkout", map[string]any{"fields": []map[string]any{
			{"selector": "#exp-month", "value": ap.card.month, "kind": "select", "frame": overlayFrame},
			{"selector": "#exp-year", "value": ap.card.year, "kind": "select", "frame": overlayFrame},
		}})
	}

	// 1. No hint: the total is nowhere the vault looks, and the card has a
	// cap, so the number is refused before anything is typed.
	openOverlay()
	r := agent.refused("fill_checkout", map[string]any{"fields": []map[string]any{
		{"selector": "#card-number", "value": numberTok, "frame": overlayFrame},
	}}, "checkout_total_unknown")
	if !strings.Contains(r.status(), "filled=0/1") {
		t.Errorf("refused number fill status %q, want filled=0/1", r.status())
	}
	agent.must("click", map[string]any{"selector": "#ov-pay", "frame": overlayFrame})
	agent.must("wait_for_selector", map[string]any{"selector": "#ov-error:not(:empty)", "frame": overlayFrame, "timeout": 30000})
	if n := len(ap.m.Charges()); n != 0 || confirmPosts(ap.m) != 0 || ap.m.Pay.Saw(ap.card.number) {
		t.Fatalf("without the hint the processor got %d confirmations and charged %d times", confirmPosts(ap.m), n)
	}
	agent.must("close_session", map[string]any{})

	// 2. The agent points at the total inside the frame: it is read there,
	// checked against the cap at the number's fill, and the card pays.
	openOverlay()
	kinds := agent.must("list_page_hint_kinds", map[string]any{})
	if !strings.Contains(kinds.text, `"order.total"`) {
		t.Fatal("list_page_hint_kinds lacks order.total")
	}
	agent.refused("declare_page_hint", map[string]any{"kind": "order.total", "selector": "#no-such-total", "frame": overlayFrame}, "hint_unresolved")
	h := agent.must("declare_page_hint", map[string]any{"kind": "order.total", "selector": "#ov-due", "frame": overlayFrame}).json(t)
	if h["accepted"] != true || h["checked"] != true || h["amount"] != merchant.OverlayTotal || h["currency"] != "EUR" {
		t.Fatalf("declare_page_hint order.total in the frame answered %v", h)
	}
	agent.must("fill_checkout", map[string]any{"fields": []map[string]any{
		{"selector": "#card-number", "value": numberTok, "frame": overlayFrame},
	}})
	agent.must("fill_checkout", map[string]any{"fields": []map[string]any{
		{"selector": "#card-cvc", "value": cvvTok, "frame": overlayFrame},
	}})
	agent.must("click", map[string]any{"selector": "#ov-pay", "frame": overlayFrame})
	out := agent.must("get_session_outcome", map[string]any{"successSelector": "#order-success", "timeout": 30000}).json(t)
	if out["outcome"] != "success" {
		t.Fatalf("the hinted checkout did not complete: %v", out["outcome"])
	}
	rep := agent.must("get_run_report", map[string]any{})
	if !strings.Contains(rep.text, `"card"`) {
		t.Errorf("the run report does not list the card fill")
	}
	agent.must("close_session", map[string]any{})
	agent.close()

	ch := ap.m.Charges()
	if len(ch) != 1 || confirmPosts(ap.m) != 1 || ch[0].Amount != merchant.OverlayTotal || ch[0].Currency != "EUR" || ch[0].Last4 != ap.card.number[len(ap.card.number)-4:] {
		t.Fatalf("the processor charged %d times (%d confirmations); want once, EUR %s on the vault's card", len(ch), confirmPosts(ap.m), merchant.OverlayTotal)
	}
	l := leakcheck.New(leakcheck.Value("card number", ap.card.number), leakcheck.Value("cvv", ap.card.cvv))
	agent.transcript.sweep(t, l, "MCP results")
	l.Logs(t, "mcpd log", agent.logs.Bytes())
	l.Logs(t, "proxyd logs", ap.logs.Bytes())
	l.Metrics(t, "proxyd metrics", ap.metrics(t))
}
