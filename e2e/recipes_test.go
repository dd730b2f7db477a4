package e2e

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/e2e/merchant"
	"github.com/agentvault/agentvault/internal/leakcheck"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/proxyd"
	"github.com/mxschmitt/playwright-go"
)

// startRecipeAppliance is startAppliance (proxyd's own Main, the merchant
// under DNS names, its sites authorized) with the owner's dashboard on a
// TLS loopback listener and an owner account, so the owner can review
// recipe submissions in a browser of their own.
func startRecipeAppliance(t *testing.T) *ownerAppliance {
	t.Helper()
	m, err := merchant.Start(merchant.Options{ShopHost: "shop.test", PayHost: "pay.test", LoginHost: "login.test",
		JSHost: "js.pay.test", APIHost: "api.pay.test", CollectHost: "collect.pay.test",
		VaultHost: "checkout.cardvault.test", CSEHost: "checkoutshopper-test.adyen.com"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	ap := &appliance{m: m, dataDir: t.TempDir(), logs: &syncBuffer{}}
	caPath, err := ap.m.WriteCA(ap.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	pm := proxyd.NewMain()
	pm.Stderr = ap.logs
	pm.Config.DataDir = ap.dataDir
	pm.Config.Listen = proxyd.ListenConfig{Proxy: "127.0.0.1:0", Control: "127.0.0.1:0", Admin: "127.0.0.1:0", Dashboard: "127.0.0.1:0"}
	pm.Config.UnsafeAllowPrivateRanges = true
	pm.Config.UnsafeTestHosts = m.HostMap()
	for _, in := range m.Integrations() {
		pm.Config.Policy.PaymentIntegrations = append(pm.Config.Policy.PaymentIntegrations,
			policy.Integration{Name: in.Name, Frames: in.Frames, PostsTo: in.PostsTo})
	}
	pm.Config.Policy.AuthorizedDestinations = []string{"shop.test", "pay.test", "login.test"}
	pm.Config.TLS.ExtraRoots = []string{caPath}
	pm.Config.Log = proxyd.LogConfig{Level: "debug", Format: "json"}
	ctx, cancel := context.WithCancel(context.Background())
	if err := pm.Open(ctx); err != nil {
		cancel()
		t.Fatalf("proxyd Open: %v", err)
	}
	ap.vault = pm.Vault
	ap.seed(t, pm.Vault)
	oa := &ownerAppliance{appliance: ap, pm: pm, ownerEmail: "owner@example.org", ownerPassword: "Owner-" + randomHex(8)}
	if err := pm.Owner.SetOwnerPassword(ctx, oa.ownerEmail, oa.ownerPassword); err != nil {
		cancel()
		t.Fatalf("owner password: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- pm.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("proxyd Run: %v", err)
		}
	})
	ap.proxyAddr = pm.ProxyAddr.String()
	ap.controlURL = "http://" + pm.ControlAddr.String()
	ap.controlTokenFile = filepath.Join(ap.dataDir, proxyd.ControlTokenFile)
	ap.apiKeyFile = filepath.Join(ap.dataDir, proxyd.APIKeyFile)
	ap.apiKey = pm.APIKey
	ap.metricsURL = "http://" + pm.AdminAddr.String() + "/metrics"
	ap.ctl = control.NewClient(ap.controlURL, pm.ControlToken, nil)
	oa.dashURL = "https://" + pm.DashboardAddr.String()
	oa.dashSPKI = dashboardSPKI(t, pm.DashboardAddr.String())
	return oa
}

// countingAgent counts every tool call of one checkout run, per tool.
type countingAgent struct {
	*mcpAgent
	calls map[string]int
	total int
}

func (c *countingAgent) must(name string, args map[string]any) answer {
	c.t.Helper()
	c.calls[name]++
	c.total++
	return c.mcpAgent.must(name, args)
}

// target is a selector and the frame holding it, as fill_checkout takes
// them and a recipe's overrides name them.
type target struct {
	Selector string `json:"selector"`
	Frame    string `json:"frame,omitempty"`
}

// checkoutRun is what one scripted checkout did.
type checkoutRun struct {
	calls      int
	perTool    map[string]int
	usedRecipe bool
	// learned are the selectors the run found and used, by role: what it
	// submits to the registry afterwards.
	learned map[string]target
	lookup  map[string]any
}

// The roles a checkout on the test shop needs, and the accessible names a
// snapshot gives their fields (the first field of that name; card fields
// sit inside the payment frame).
var checkoutRoles = []struct {
	role, name string
	inFrame    bool
}{
	{"email", "Email", false}, {"firstName", "First name", false}, {"lastName", "Last name", false},
	{"addressLine1", "Address", false}, {"postalCode", "Postcode", false}, {"city", "City", false},
	{"country", "Country", false}, {"expMonth", "Expiry month", true}, {"expYear", "Expiry year", true},
	{"cardNumber", "Card number", true}, {"cvc", "Security code", true},
}

var (
	snapLineRe  = regexp.MustCompile(`^\s*- (\w+) "([^"]*)".*\[ref=([a-z0-9]+)\]`)
	fieldLineRe = regexp.MustCompile(`^# ([a-z0-9]+): selector=(\S+)(?: frame=(.+))?$`)
)

// selectorsFromSnapshot reads the roles' selectors off a snapshot: the
// accessible name of each ref, then the '# Field selectors' comment.
func selectorsFromSnapshot(snap string) map[string]target {
	names := map[string]string{} // ref -> accessible name
	var order []string
	fields := map[string]target{}
	for _, l := range strings.Split(snap, "\n") {
		if m := snapLineRe.FindStringSubmatch(l); m != nil {
			names[m[3]] = strings.TrimSpace(m[2])
			order = append(order, m[3])
		}
		if m := fieldLineRe.FindStringSubmatch(l); m != nil {
			fields[m[1]] = target{Selector: m[2], Frame: strings.TrimSpace(m[3])}
		}
	}
	out := map[string]target{}
	for _, r := range checkoutRoles {
		for _, ref := range order {
			f, ok := fields[ref]
			if !ok || !strings.HasPrefix(names[ref], r.name) || (f.Frame != "") != r.inFrame {
				continue
			}
			out[r.role] = f
			break
		}
	}
	return out
}

// scriptedCheckout is the agent's checkout on the test shop, the same
// script in both runs: read the catalog and the recipe registry, put a
// product in the cart, go to checkout, fill, place the order, confirm. With
// a merchant recipe it fills with the selectors the recipe names; without
// one it orients with a snapshot first (looking again until the card frame
// has loaded) and guesses the confirmation.
func scriptedCheckout(t *testing.T, a *mcpAgent, ap *appliance) checkoutRun {
	t.Helper()
	c := &countingAgent{mcpAgent: a, calls: map[string]int{}}
	cat := c.must("get_token_catalog", map[string]any{"url": ap.m.Shop.URL + "/checkout"})
	numberTok, cvvTok := findToken(cat.text, "card", "number"), findToken(cat.text, "card", "cvv")
	if numberTok == "" || cvvTok == "" {
		t.Fatalf("catalog (%d bytes) has no card tokens", len(cat.text))
	}
	// The page URL carries a query and a fragment: they are stripped
	// before the lookup.
	lookup := c.must("get_checkout_recipes", map[string]any{"url": ap.m.Shop.URL + "/products/trail-shoes?utm_source=agent&ref=e2e#reviews"}).json(t)
	run := checkoutRun{lookup: lookup}
	sel := map[string]target{}
	if mr, _ := lookup["merchant"].(map[string]any); mr != nil {
		ov, _ := mr["overrides"].(map[string]any)
		for role, v := range ov {
			m, _ := v.(map[string]any)
			s, _ := m["selector"].(string)
			f, _ := m["frame"].(string)
			sel[role] = target{Selector: s, Frame: f}
		}
		run.usedRecipe = true
	}
	c.must("open_page", map[string]any{"url": ap.m.Shop.URL + "/products/trail-shoes"})
	c.must("click", map[string]any{"selector": "#add-to-cart"})
	c.must("wait_for_selector", map[string]any{"selector": "#checkout", "timeout": 30000})
	c.must("click", map[string]any{"selector": "#checkout"})
	if run.usedRecipe {
		// The recipe names the card field and its frame: wait for it
		// directly, no snapshot.
		num := sel["cardNumber"]
		c.must("wait_for_selector", map[string]any{"selector": num.Selector, "frame": num.Frame, "timeout": 30000})
	} else {
		c.must("wait_for_selector", map[string]any{"selector": "iframe", "timeout": 30000})
		for i := 0; ; i++ {
			snap := c.must("snapshot_page", map[string]any{})
			sel = selectorsFromSnapshot(snap.text)
			if _, ok := sel["cardNumber"]; ok || i == 4 {
				break
			}
		}
		sel["submit"] = target{Selector: `button:has-text("Place order")`}
		// Text selectors are refused after a fill (P19): the agent guesses
		// the confirmation and the error by their roles.
		sel["success"] = target{Selector: `[role=status] h1`}
		sel["failure"] = target{Selector: `[role=alert]:not([hidden]):not(:empty)`}
	}
	for _, r := range checkoutRoles {
		if sel[r.role].Selector == "" {
			t.Fatalf("no selector for %s (recipe used: %v)", r.role, run.usedRecipe)
		}
	}
	field := func(role string, value any, kind string) map[string]any {
		f := map[string]any{"selector": sel[role].Selector, "value": value}
		if sel[role].Frame != "" {
			f["frame"] = sel[role].Frame
		}
		if kind != "" {
			f["kind"] = kind
		}
		return f
	}
	r := c.must("fill_checkout", map[string]any{"fields": []map[string]any{
		field("email", "ada@example.org", ""), field("firstName", "Ada", ""), field("lastName", "Lovelace", ""),
		field("addressLine1", "12 Analytical Row", ""), field("postalCode", "10115", ""), field("city", "Berlin", ""),
		field("country", "DE", "select"), field("expMonth", ap.card.month, "select"), field("expYear", ap.card.year, "select"),
	}, "timeout": 5000})
	if !strings.Contains(r.status(), "filled=9/9") {
		t.Fatalf("address and expiry fill: %q", r.status())
	}
	c.must("fill_checkout", map[string]any{"fields": []map[string]any{field("cardNumber", numberTok, ""), field("cvc", cvvTok, "")}, "timeout": 5000})
	c.must("click", map[string]any{"selector": sel["submit"].Selector})
	o := c.must("get_session_outcome", map[string]any{
		"successSelector": sel["success"].Selector, "failureSelector": sel["failure"].Selector,
		"confirmsCheckout": true, "submitSelector": sel["submit"].Selector, "timeout": 20000,
	}).json(t)
	if o["outcome"] != "success" || o["corroborated"] != true {
		t.Fatalf("checkout (recipe used: %v): outcome %v, corroborated %v, because %v", run.usedRecipe, o["outcome"], o["corroborated"], o["notCorroboratedBecause"])
	}
	c.must("close_session", map[string]any{})
	run.calls, run.perTool, run.learned = c.total, c.calls, sel
	return run
}

// TestRecipes_CheckoutRecipeEndToEnd is issue 15's proof in real Chromium,
// through the built mcpd over stdio and proxyd's own Main on the test
// merchant:
//
//   - A first agent finds no recipe for the shop (all four slots null),
//     orients with a snapshot and buys. Its submissions with a forbidden
//     precondition or status verified are refused with invalid_recipe;
//     the recipe it learned is screened (needs_human) and not yet served.
//   - The owner sees it on the dashboard over TLS and accepts it as
//     verified.
//   - A second agent (a new mcpd and session) reads the recipe, fills with
//     the selectors it names without a snapshot or a frame list, and
//     completes the checkout in fewer tool calls than the first.
func TestRecipes_CheckoutRecipeEndToEnd(t *testing.T) {
	requireE2E(t, true)
	oa := startRecipeAppliance(t)
	bin := buildCmd(t, "mcpd")
	args, env := oa.mcpdArgs()

	first := startAgent(t, bin, args, env)
	tools := " " + strings.Join(first.toolNames(), " ") + " "
	for _, want := range []string{"get_checkout_recipes", "submit_checkout_recipe", "get_recipe_submission"} {
		if !strings.Contains(tools, " "+want+" ") {
			t.Fatalf("mcpd does not offer %s", want)
		}
	}
	without := scriptedCheckout(t, first, oa.appliance)
	if without.usedRecipe {
		t.Fatal("the first run found a recipe before anyone submitted one")
	}
	for _, slot := range []string{"merchant", "platform", "signup", "signupPlatform"} {
		if v, ok := without.lookup[slot]; !ok || v != nil {
			t.Errorf("empty registry: slot %s = %v, want null", slot, v)
		}
	}

	shopHost := strings.Split(strings.TrimPrefix(oa.m.Shop.URL, "https://"), ":")[0]
	overrides := map[string]any{"addToCart": target{Selector: "#add-to-cart"}, "checkout": target{Selector: "#checkout"}}
	for role, tg := range without.learned {
		overrides[role] = tg
	}
	recipe := func(mod func(map[string]any)) map[string]any {
		r := map[string]any{"id": shopHost, "kind": "merchant", "hosts": []string{shopHost}, "platform": "stripe-payment-element",
			"cardSurface": "stripe-payment-element", "status": "partial", "overrides": overrides,
			"exampleProductUrl": oa.m.Shop.URL + "/products/trail-shoes?utm_source=agent",
			"gotchas":           []string{"The card fields load in the payment frame after the checkout page; wait for the number field in it."}}
		if mod != nil {
			mod(r)
		}
		return r
	}
	// The registry's rules, refused with the seed's code: a precondition
	// outside the closed list, and verified from an agent.
	first.refused("submit_checkout_recipe", map[string]any{"recipe": recipe(func(r map[string]any) { r["preconditions"] = []string{"captcha"} })}, "invalid_recipe")
	first.refused("submit_checkout_recipe", map[string]any{"recipe": recipe(func(r map[string]any) { r["status"] = "verified" }),
		"note": "Bought it."}, "invalid_recipe")

	note := "Completed a test order of EUR 42.50 with the card in the payment frame; the order confirmation showed."
	sub := first.must("submit_checkout_recipe", map[string]any{"recipe": recipe(nil), "note": note, "verificationRequested": true}).json(t)
	subID, _ := sub["id"].(string)
	if sub["_status"] != "ok" || sub["status"] != "needs_human" || sub["verdict"] == "" || subID == "" {
		t.Fatalf("screened submission = %v, want needs_human with a verdict", sub)
	}
	if p := first.must("get_recipe_submission", map[string]any{"id": subID}).json(t); p["status"] != "needs_human" {
		t.Errorf("poll before the owner's review: %v", p["status"])
	}
	first.refused("get_recipe_submission", map[string]any{"id": "rs_000000000000000000000000"}, "not_found")
	if l := first.must("get_checkout_recipes", map[string]any{"url": oa.m.Shop.URL + "/checkout"}).json(t); l["merchant"] != nil {
		t.Fatal("a submission the owner has not reviewed is served")
	}
	first.close()

	// The owner reviews it on the dashboard, over TLS, in their own browser.
	owner := oa.signInOwner(t)
	owner.open(t, "/recipes")
	art := owner.page.Locator("#sub-" + subID)
	txt, err := art.InnerText()
	if err != nil {
		t.Fatalf("the submission is not on the owner's recipes page: %v", err)
	}
	owner.keep(t)
	if !strings.Contains(txt, shopHost) || !strings.Contains(txt, note) || !strings.Contains(txt, "Passed screening") {
		t.Errorf("the dashboard shows %q, want the host, the note and the screening verdict", leakcheck.Redact(txt))
	}
	must(t, "mark verified", art.Locator("input[name=verified]").Check())
	must(t, "accept", art.Locator("form[action$='/accept'] button").Click())
	must(t, "after accepting", owner.page.Locator(".flash").WaitFor(playwright.LocatorWaitForOptions{Timeout: playwright.Float(10000)}))
	owner.keep(t)
	if flash, _ := owner.page.Locator(".flash").InnerText(); !strings.Contains(flash, "approved") {
		t.Errorf("after accepting, the dashboard says %q", flash)
	}

	// The next session is served the recipe and needs fewer calls.
	second := startAgent(t, bin, args, env)
	if p := second.must("get_recipe_submission", map[string]any{"id": subID}).json(t); p["status"] != "approved" {
		t.Errorf("poll after the owner accepted: %v", p)
	}
	with := scriptedCheckout(t, second, oa.appliance)
	if !with.usedRecipe {
		t.Fatal("the second run was not served the accepted recipe")
	}
	mr, _ := with.lookup["merchant"].(map[string]any)
	if mr["status"] != "verified" || mr["evidence"] != note || mr["exampleProductUrl"] != oa.m.Shop.URL+"/products/trail-shoes" {
		t.Errorf("served recipe: status %v, evidence %v, example %v", mr["status"], mr["evidence"], mr["exampleProductUrl"])
	}
	if pr, _ := with.lookup["platform"].(map[string]any); pr == nil || pr["id"] != "stripe-payment-element" {
		t.Errorf("platform slot = %v, want the shipped Stripe Payment Element recipe", with.lookup["platform"])
	}
	if with.perTool["snapshot_page"]+with.perTool["list_frames"] != 0 {
		t.Errorf("the run with the recipe still oriented: %v", with.perTool)
	}
	t.Logf("tool calls: %d without a recipe %v, %d with it %v", without.calls, without.perTool, with.calls, with.perTool)
	if with.calls >= without.calls {
		t.Errorf("with the recipe the checkout took %d tool calls, without it %d: want fewer", with.calls, without.calls)
	}
	if o := oa.m.Orders(); len(o) != 2 {
		t.Errorf("merchant has %d orders, want one per run", len(o))
	}
	second.close()
	l := leakcheck.New(leakcheck.Value("card number", oa.card.number), leakcheck.Value("cvv", oa.card.cvv))
	first.transcript.sweep(t, l, "MCP results (first agent)")
	second.transcript.sweep(t, l, "MCP results (second agent)")
	l.Text(t, "dashboard pages", owner.seen.Bytes())
	l.Logs(t, "proxyd logs", oa.logs.Bytes())
}
