package e2e

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/internal/leakcheck"
)

// TestHostedOwnerEndsSessionOnDashboard: through mcpd's and proxyd's own
// Mains, the owner's connected apps page lists the agent's hosted session
// (handle prefix, page host); End closes it, and the agent's next call is
// refused with the ended-session message naming the owner, with what the
// close found. A new open_page starts again.
func TestHostedOwnerEndsSessionOnDashboard(t *testing.T) {
	requireE2E(t, true)
	oa := startOwnerAppliance(t, "50.00")
	hm := startHostedMCP(t, oa)
	a := hm.agent(t, oa.apiKey)
	a.must("open_page", map[string]any{"url": oa.m.Shop.URL + "/products/trail-shoes"})
	a.must("count", map[string]any{"selector": "#add-to-cart"}) // reports the page's host
	shop, _ := url.Parse(oa.m.Shop.URL)

	owner := oa.signInOwner(t)
	owner.open(t, "/apps")
	owner.keep(t)
	html, _ := owner.page.Content()
	if !strings.Contains(html, a.session[:8]+"…") || !strings.Contains(html, shop.Hostname()) || strings.Contains(html, a.session) {
		for _, l := range strings.Split(string(hm.logs.Bytes()), "\n") {
			if strings.Contains(l, "connected apps") || strings.Contains(l, "apps/sessions") {
				t.Log(l)
			}
		}
		for _, l := range strings.Split(string(oa.logs.Bytes()), "\n") {
			if strings.Contains(l, "apps/sessions") {
				t.Log(l)
			}
		}
		main, _ := owner.page.Locator("main").InnerText()
		t.Fatalf("the connected apps page does not list the session by its prefix (%s) and host (%s): %q", a.session[:8], shop.Hostname(), main)
	}
	must(t, "End", owner.page.Locator("form[action^='/apps/sessions/'] button").First().Click())
	must(t, "after End", owner.page.WaitForLoadState())
	owner.keep(t)

	r := a.call("count", map[string]any{"selector": "#add-to-cart"})
	if !r.isErr || !strings.Contains(r.status(), "code=session_ended") ||
		!strings.Contains(r.text, "This session has ended: the gateway closed it because the account holder ended it on the dashboard. What its close found: {\"reports\":[") {
		t.Fatalf("the call after the owner's End: %q", leakcheck.Redact(r.text))
	}
	a.session = ""
	a.must("open_page", map[string]any{"url": oa.m.Shop.URL + "/products/headlamp"})
	if a.session == "" {
		t.Fatal("open_page after the End named no session")
	}
	a.must("close_session", nil)
	l := leakcheck.New(leakcheck.Value("card number", oa.card.number), leakcheck.Value("cvv", oa.card.cvv))
	l.Text(t, "the owner's pages", owner.seen.Bytes())
	l.Logs(t, "mcpd logs", hm.logs.Bytes())
}

// TestSeed004_HostedConnectedAppsChoice: through mcpd's and proxyd's own
// Mains, a connection whose holder has chosen nothing yet gets recipes but
// every other tool is refused, naming the Connected apps page; the holder
// ticks what it may use there and saves, and the same connection's
// open_page then starts a session.
func TestSeed004_HostedConnectedAppsChoice(t *testing.T) {
	requireE2E(t, true)
	oa := startOwnerAppliance(t, "50.00")
	hm := startHostedMCP(t, oa)
	a := hm.agentAsIs(t, oa.apiKey)
	a.must("get_checkout_recipes", map[string]any{"url": oa.m.Shop.URL + "/checkout"})
	r := a.call("open_page", map[string]any{"url": oa.m.Shop.URL + "/products/trail-shoes"})
	if !r.isErr || !strings.Contains(r.status(), "code=forbidden") || !strings.Contains(r.text, "Connected apps") || a.session != "" {
		t.Fatalf("open_page before the holder chose: %q", r.text)
	}

	owner := oa.signInOwner(t)
	owner.open(t, "/apps")
	owner.keep(t)
	form := owner.page.Locator("form[action$='/uses']").First()
	for _, use := range control.AppUses {
		must(t, "tick "+use, form.Locator("input[value='"+use+"']").Check())
	}
	must(t, "Save", owner.page.Locator("button[form^='uses-']").First().Click())
	must(t, "after Save", owner.page.WaitForLoadState())
	owner.keep(t)
	if main, _ := owner.page.Locator("main").InnerText(); !strings.Contains(main, "Saved.") {
		t.Fatalf("the page after Save: %q", main)
	}

	// mcpd trusts a key check for up to a second: the choice reaches the
	// next check.
	deadline := time.Now().Add(20 * time.Second)
	for {
		r = a.call("open_page", map[string]any{"url": oa.m.Shop.URL + "/products/trail-shoes"})
		if !strings.Contains(r.status(), "code=forbidden") || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	r = a.follow(r)
	if r.isErr || a.session == "" {
		t.Fatalf("open_page after the holder chose: %q", leakcheck.Redact(r.text))
	}
	a.must("close_session", nil)
}
