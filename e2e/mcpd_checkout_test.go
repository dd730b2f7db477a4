package e2e

import (
	"fmt"
	"github.com/agentvault/agentvault/internal/leakcheck"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// mcpdEnv is how the built mcpd is pointed at the running proxyd.
func (ap *appliance) mcpdArgs() ([]string, []string) {
	args := []string{
		"--control-url", ap.controlURL,
		"--control-token-file", ap.controlTokenFile,
		"--api-key-file", ap.apiKeyFile,
		"--driver-dir", driverDir(),
		"--chromium", chromiumPath(),
		"--log-level", "debug",
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + ap.dataDir}
	if v := os.Getenv("PLAYWRIGHT_NODEJS_PATH"); v != "" {
		env = append(env, "PLAYWRIGHT_NODEJS_PATH="+v)
	} else if _, err := os.Stat("/usr/bin/node"); err == nil {
		env = append(env, "PLAYWRIGHT_NODEJS_PATH=/usr/bin/node")
	}
	return args, env
}

const (
	payFrame   = `iframe[title='Secure payment input frame']`
	numberSel  = `input[name='number']`
	cvcSel     = `input[name='cvc']`
	successSel = `#order-success`
)

// TestP11_MCPCheckoutCanary is the issue-4 proof: a scripted agent drives
// the built mcpd over stdio through a real checkout on the test merchant,
// with proxyd in between and canary card values in the vault.
//
// It runs twice: over proxyd's own Main with an anySite card (the merchant on
// localhost and 127.0.0.1), and over the wired appliance whose merchant has
// DNS names, with a card the owner allowed on the shop and its processor only.
func TestP11_MCPCheckoutCanary(t *testing.T) {
	requireE2E(t, true)
	t.Run("ProxydMain", func(t *testing.T) { mcpCheckout(t, startAppliance(t)) })
	t.Run("SiteScopedCard", func(t *testing.T) { mcpCheckout(t, startWiredAppliance(t)) })
}

// mcpCheckout runs the whole checkout over the built mcpd; extra are more
// flags (a remote browser's, remote_browser_test.go).
func mcpCheckout(t *testing.T, ap *appliance, extra ...string) {
	bin := buildCmd(t, "mcpd")
	args, env := ap.mcpdArgs()
	args = append(args, extra...)

	started := time.Now()
	agent := startAgent(t, bin, args, env)
	t.Logf("mcpd answered initialize after %v", time.Since(started).Round(time.Millisecond))
	tools := strings.Join(agent.toolNames(), " ")
	for _, want := range []string{"get_token_catalog", "open_page", "click", "press", "wait_for_selector", "count",
		"wait_for_popup", "close_popup", "fill_checkout", "fill_login", "snapshot_page", "observe_page", "list_frames",
		"detect_challenge", "get_session_outcome", "get_run_report", "close_session"} {
		if !strings.Contains(" "+tools+" ", " "+want+" ") {
			t.Errorf("mcpd does not offer %s", want)
		}
	}

	checkoutURL := ap.m.Shop.URL + "/checkout"
	cat := agent.must("get_token_catalog", map[string]any{"url": checkoutURL})
	numberTok := findToken(cat.text, "card", "number")
	cvvTok := findToken(cat.text, "card", "cvv")
	if numberTok == "" || cvvTok == "" {
		t.Fatalf("catalog (%d bytes) has no card number or cvv token", len(cat.text))
	}
	emailTok := findToken(cat.text, "identity", "email")
	phoneTok := findToken(cat.text, "identity", "phone")
	line1Tok := findToken(cat.text, "address", "line1")
	cityTok := findToken(cat.text, "address", "city")
	postTok := findToken(cat.text, "address", "postal_code")

	// P4 through the whole chain: a plain-http page is refused by open_page
	// with insecure_site, and the plain listener sees nothing.
	var plainHits atomic.Int64
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { plainHits.Add(1) }))
	defer plain.Close()
	agent.refused("open_page", map[string]any{"url": plain.URL + "/checkout"}, "insecure_site")
	if plainHits.Load() != 0 {
		t.Errorf("the plain-http site received %d requests", plainHits.Load())
	}

	runStart := time.Now()
	agent.must("open_page", map[string]any{"url": ap.m.Shop.URL + "/products/trail-shoes"})
	agent.must("click", map[string]any{"selector": "#add-to-cart"})
	agent.must("wait_for_selector", map[string]any{"selector": "#checkout", "timeout": 30000})
	agent.must("click", map[string]any{"selector": "#checkout"})
	agent.must("wait_for_selector", map[string]any{"selector": "#place-order", "timeout": 30000})
	agent.must("wait_for_selector", map[string]any{"selector": numberSel, "frame": payFrame, "timeout": 30000})

	// Orientation before any fill: the snapshot works and reaches into the
	// card iframe.
	snap := agent.must("snapshot_page", map[string]any{})
	if !strings.Contains(snap.text, "ref=") {
		t.Errorf("snapshot before any fill has no refs: %q", snap.status())
	}
	if i := strings.Index(snap.text, "# Field selectors"); i < 0 {
		t.Error("snapshot has no trailing # Field selectors comment")
	} else {
		tail := snap.text[i:]
		// Each field inside the card iframe names its frame (seed 004).
		for _, id := range []string{"#card-number", "#exp-month", "#exp-year", "#card-cvc"} {
			if !strings.Contains(tail, "selector="+id+" frame=") {
				t.Errorf("field selectors do not name %s with its iframe", id)
			}
		}
	}

	tokOr := func(tok, literal string) string {
		if tok != "" {
			return tok
		}
		return literal
	}
	shipping := []map[string]any{
		{"selector": "#email", "value": tokOr(emailTok, "ada@example.org")},
		{"selector": "#phone", "value": tokOr(phoneTok, "+49 30 1234567")},
		{"selector": "#first-name", "value": "Ada"},
		{"selector": "#last-name", "value": "Lovelace"},
		{"selector": "#address-line1", "value": tokOr(line1Tok, "12 Analytical Row")},
		{"selector": "#postal-code", "value": tokOr(postTok, "10115")},
		{"selector": "#city", "value": tokOr(cityTok, "Berlin")},
		{"selector": "#country", "value": "DE", "kind": "select"},
	}
	r := agent.must("fill_checkout", map[string]any{"fields": shipping, "timeout": 5000})
	if !strings.Contains(r.status(), "filled=8/8") {
		t.Errorf("shipping fill status %q, want filled=8/8", r.status())
	}

	// observe_page reads the page's own validation output: a rejected promo
	// code shows up in errorText.
	agent.must("fill_checkout", map[string]any{"fields": []map[string]any{{"selector": "#promo-code", "value": "SPRINGSALE"}}})
	agent.must("click", map[string]any{"selector": "#apply-promo"})
	obs := agent.must("observe_page", map[string]any{}).json(t)
	if errs, _ := obs["errorText"].([]any); !strings.Contains(fmt.Sprint(errs), "promo code is not valid") {
		t.Errorf("observe_page errorText = %v, want the promo code message", errs)
	}

	// Card order (seed 004): a field straight after the number is refused
	// before anything is typed.
	r = agent.refused("fill_checkout", map[string]any{"fields": []map[string]any{
		{"selector": numberSel, "value": numberTok, "frame": payFrame},
		{"selector": "#postal-code", "value": "10115"},
	}}, "card_field_order")
	if !strings.Contains(r.status(), "filled=0/2") {
		t.Errorf("refused batch status %q, want filled=0/2", r.status())
	}

	// Expiry first, then the number alone: the next fill must start with
	// the CVV.
	agent.must("fill_checkout", map[string]any{"fields": []map[string]any{
		{"selector": "#exp-month", "value": ap.card.month, "kind": "select", "frame": payFrame},
		{"selector": "#exp-year", "value": ap.card.year, "kind": "select", "frame": payFrame},
	}})
	fillStart := time.Now()
	agent.must("fill_checkout", map[string]any{"fields": []map[string]any{
		{"selector": numberSel, "value": numberTok, "frame": payFrame},
	}, "timeout": 5000})
	t.Logf("card number fill (authorize + type) took %v", time.Since(fillStart).Round(time.Millisecond))
	agent.refused("fill_checkout", map[string]any{"fields": []map[string]any{
		{"selector": "#city", "value": "Berlin"},
	}}, "card_field_order")

	// Reads between the number and the code are allowed and do not spend
	// the CVV authorization; value-testing probes are refused (P19).
	agent.must("count", map[string]any{"selector": cvcSel, "frame": payFrame})
	agent.refused("count", map[string]any{"selector": numberSel + "[value*='4']", "frame": payFrame}, "sensitive_data_blocked")
	agent.refused("count", map[string]any{"selector": "text=" + ap.card.number[12:], "frame": payFrame}, "sensitive_data_blocked")
	obs2 := agent.must("observe_page", map[string]any{})
	if strings.Contains(obs2.text, `"inconclusive":true`) {
		t.Logf("observe_page was inconclusive")
	}
	agent.must("fill_checkout", map[string]any{"fields": []map[string]any{
		{"selector": cvcSel, "value": cvvTok, "frame": payFrame},
	}, "timeout": 5000})

	// After a token fill the snapshot is closed for the rest of the session,
	// and clipboard chords are refused (P19).
	agent.refused("snapshot_page", map[string]any{}, "sensitive_data_blocked")
	agent.refused("list_frames", map[string]any{}, "sensitive_data_blocked")
	agent.must("detect_challenge", map[string]any{})
	agent.refused("press", map[string]any{"selector": numberSel, "key": "Control+C", "frame": payFrame}, "clipboard_blocked")

	agent.must("click", map[string]any{"selector": "#place-order"})
	out := agent.must("get_session_outcome", map[string]any{
		"successSelector":  successSel,
		"failureSelector":  "#form-error:not([hidden])",
		"confirmsCheckout": true,
		"submitSelector":   "#place-order",
		"timeout":          20000,
	})
	o := out.json(t)
	if o["outcome"] != "success" || o["corroborated"] != true {
		t.Fatalf("outcome %v, corroborated %v (status %q)", o["outcome"], o["corroborated"], out.status())
	}
	checkoutTook := time.Since(runStart)

	rep := agent.must("get_run_report", map[string]any{}).json(t)
	kinds, _ := rep["filledFieldKinds"].([]any)
	var ks []string
	for _, k := range kinds {
		ks = append(ks, k.(string))
	}
	wantKinds := []string{"card"}
	if emailTok != "" || phoneTok != "" {
		wantKinds = append(wantKinds, "identity")
	}
	if line1Tok != "" || cityTok != "" || postTok != "" {
		wantKinds = append(wantKinds, "address")
	}
	for _, k := range wantKinds {
		if !slices.Contains(ks, k) {
			t.Errorf("run report filled kinds %v lack %s", ks, k)
		}
	}
	t.Logf("run report: filled kinds %v, total %v, denied %v", ks, rep["orderTotal"], rep["deniedCount"])
	if rep["confirmationDetected"] != true {
		t.Errorf("run report does not record the confirmation")
	}
	if tot, _ := rep["orderTotal"].(map[string]any); tot == nil || tot["amount"] != "42.50" || tot["currency"] != "EUR" {
		t.Errorf("run report total = %v, want EUR 42.50", rep["orderTotal"])
	}
	closed := agent.must("close_session", map[string]any{})

	// The merchant side: the processor got the real card, the shop never did.
	if !ap.m.Pay.Saw(ap.card.number) || !ap.m.Pay.SawField(ap.card.cvv) {
		t.Error("the payments API did not receive the real number and CVV")
	}
	if ap.m.Shop.Saw(ap.card.number) || ap.m.Shop.SawField(ap.card.cvv) {
		t.Error("the shop received the real card number or CVV")
	}
	if o := ap.m.Orders(); len(o) != 1 || o[0].Total != "42.50" {
		t.Errorf("merchant has %d orders, want one of EUR 42.50", len(o))
	}

	// P11: every sink, grepped for the canaries and their encodings.
	agent.close()
	l := leakcheck.New(leakcheck.Value("card number", ap.card.number), leakcheck.Value("cvv", ap.card.cvv))
	agent.transcript.sweep(t, l, "MCP results")
	l.Answer(t, "close_session answer", []byte(closed.text))
	l.Logs(t, "mcpd log", agent.logs.Bytes())
	l.Logs(t, "proxyd logs", ap.logs.Bytes())
	l.Metrics(t, "proxyd metrics", ap.metrics(t))
	for i, img := range agent.images {
		l.Binary(t, "screenshot "+itoa(i), img)
	}
	t.Logf("checkout run (open_page to confirmed outcome) took %v; per-call means: %s", checkoutTook.Round(time.Millisecond), agent.latencyReport())
	t.Logf("P11 sweep covered %s", l.Summary())
}

// TestMCPEmailFirstLogin signs in on the merchant's email-first form with
// fill_login in two calls and lands on the account page.
func TestMCPEmailFirstLogin(t *testing.T) {
	requireE2E(t, true)
	ap := startWiredAppliance(t)
	bin := buildCmd(t, "mcpd")
	args, env := ap.mcpdArgs()
	agent := startAgent(t, bin, args, env)

	loginURL := ap.m.Login.URL + "/login"
	cat := agent.must("get_token_catalog", map[string]any{"url": loginURL})
	emailTok := findToken(cat.text, "login", "email")
	pwTok := findToken(cat.text, "login", "password")
	if emailTok == "" || pwTok == "" {
		t.Fatalf("catalog (%d bytes) has no login email/password token for the login site", len(cat.text))
	}
	agent.must("open_page", map[string]any{"url": loginURL})
	// Both halves before the password field exists: nothing is filled.
	r := agent.call("fill_login", map[string]any{
		"usernameSelector": "input[type='email']", "usernameToken": emailTok,
		"passwordSelector": "input[type='password']", "passwordToken": pwTok,
	})
	if !r.isErr {
		t.Errorf("fill_login with a missing password field succeeded: %q", r.status())
	}
	agent.must("fill_login", map[string]any{"usernameSelector": "input[type='email']", "usernameToken": emailTok})
	agent.must("click", map[string]any{"selector": "#continue"})
	agent.must("fill_login", map[string]any{"passwordSelector": "input[type='password']", "passwordToken": pwTok})
	agent.must("click", map[string]any{"selector": "#sign-in"})
	out := agent.must("get_session_outcome", map[string]any{
		"successSelector": "#account", "failureSelector": "#signin-error:not(:empty)", "timeout": 30000,
	}).json(t)
	if out["outcome"] != "success" {
		obs := agent.call("observe_page", map[string]any{})
		t.Fatalf("sign-in outcome %v; observe_page: %.300s; failed sign-ins at the site: %d; site saw the real password: %v",
			out["outcome"], leakcheck.Redact(obs.text), ap.m.FailedSignIns(), ap.m.Login.Saw(ap.login.password))
	}
	agent.must("close_session", map[string]any{})
	if !ap.m.Login.Saw(ap.login.password) {
		t.Error("the login site did not receive the real password")
	}
	agent.close()
	l := leakcheck.New(leakcheck.Value("password", ap.login.password))
	agent.transcript.sweep(t, l, "MCP results")
	l.Logs(t, "mcpd log", agent.logs.Bytes())
	l.Logs(t, "proxyd logs", ap.logs.Bytes())
	l.Metrics(t, "proxyd metrics", ap.metrics(t))
	t.Logf("sign-in per-call means: %s; P11 sweep covered %s", agent.latencyReport(), l.Summary())
}

// TestMCPDeclinedCardIsNotConfirmed fills the card with a wrong expiry year:
// the processor declines, the page says so in its validation output, the
// outcome is a failure, and the run report shows the card was entered but
// no confirmation was recorded. Nothing leaks on this path either.
func TestMCPDeclinedCardIsNotConfirmed(t *testing.T) {
	requireE2E(t, true)
	ap := startAppliance(t)
	bin := buildCmd(t, "mcpd")
	args, env := ap.mcpdArgs()
	agent := startAgent(t, bin, args, env)

	cat := agent.must("get_token_catalog", map[string]any{"url": ap.m.Shop.URL + "/checkout"})
	numberTok, cvvTok := findToken(cat.text, "card", "number"), findToken(cat.text, "card", "cvv")
	agent.must("open_page", map[string]any{"url": ap.m.Shop.URL + "/products/headlamp"})
	agent.must("click", map[string]any{"selector": "#add-to-cart"})
	agent.must("wait_for_selector", map[string]any{"selector": "#checkout", "timeout": 30000})
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
		{"selector": "#exp-month", "value": ap.card.month, "kind": "select", "frame": payFrame},
		{"selector": "#exp-year", "value": ap.card.year + 1, "kind": "select", "frame": payFrame},
		{"selector": numberSel, "value": numberTok, "frame": payFrame},
		{"selector": cvcSel, "value": cvvTok, "frame": payFrame},
	}, "timeout": 5000})
	agent.must("click", map[string]any{"selector": "#place-order"})
	out := agent.must("get_session_outcome", map[string]any{
		"successSelector": successSel, "failureSelector": "#form-error:not([hidden])",
		"confirmsCheckout": true, "submitSelector": "#place-order", "timeout": 20000,
	}).json(t)
	if out["outcome"] != "failure" || out["corroborated"] == true {
		t.Fatalf("declined payment: outcome %v, corroborated %v", out["outcome"], out["corroborated"])
	}
	obs := agent.must("observe_page", map[string]any{}).json(t)
	if errs, _ := obs["errorText"].([]any); !strings.Contains(fmt.Sprint(errs), "expiration date") {
		t.Errorf("observe_page errorText = %v, want the processor's expiry message", leakcheck.Redact(fmt.Sprint(errs)))
	}
	rep := agent.must("get_run_report", map[string]any{}).json(t)
	if rep["confirmationDetected"] == true {
		t.Error("a declined checkout was recorded as confirmed")
	}
	if kinds, _ := rep["filledFieldKinds"].([]any); !strings.Contains(fmt.Sprint(kinds), "card") {
		t.Errorf("run report kinds %v: the card was entered and the report must say so", kinds)
	}
	agent.must("close_session", map[string]any{})
	if !ap.m.Pay.Saw(ap.card.number) {
		t.Error("the processor never received the real number (the decline must come from the issuer, not the proxy)")
	}
	if len(ap.m.Orders()) != 0 || len(ap.m.Charges()) != 0 {
		t.Error("a declined card produced an order or a charge")
	}
	agent.close()
	l := leakcheck.New(leakcheck.Value("card number", ap.card.number), leakcheck.Value("cvv", ap.card.cvv))
	agent.transcript.sweep(t, l, "MCP results")
	l.Logs(t, "mcpd log", agent.logs.Bytes())
	l.Logs(t, "proxyd logs", ap.logs.Bytes())
}
