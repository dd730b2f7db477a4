package dashboard_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/vault"
)

// TestScreenshotsForREADME renders the pages the README shows (Approvals,
// Cards, Activity) with sample data in Debian's Chromium, into the
// directory AV_DASHBOARD_SCREENSHOTS names (make screenshots writes docs/),
// so the pictures follow the templates. Skipped otherwise.
func TestScreenshotsForREADME(t *testing.T) {
	dir := os.Getenv("AV_DASHBOARD_SCREENSHOTS")
	if dir == "" {
		t.Skip("set AV_DASHBOARD_SCREENSHOTS=dir to take the README screenshots")
	}
	chromium := os.Getenv("CHROMIUM_PATH")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	e := newEnv(t)
	ctx := context.Background()
	e.signIn(ownerPW)
	// A second card, added on the dashboard so its number is fingerprinted.
	if code, _ := e.post("/cards/new", "/cards", cardForm(newSpaced, newCVV)); code != 200 {
		t.Fatalf("add card: %d", code)
	}
	amt := policy.MustAmount("84.90 EUR")
	for _, r := range []owner.ApprovalRequest{
		{Kind: owner.KindPurchase, Reason: string(policy.ReasonOverThreshold), Site: "checkout.shop.example", CardID: e.card.ID, ItemID: e.card.ID, Page: "https://checkout.shop.example/cart/pay", Amount: &amt, APIKeyID: "avk_5f1c9e2a7b3d4e60", Session: "s_8c21f0a9"},
		{Kind: owner.KindNewDestination, Reason: string(policy.ReasonNewDestination), Site: "tickets.example.org", ItemID: e.card.ID, Page: "https://tickets.example.org/order/summary", APIKeyID: "avk_5f1c9e2a7b3d4e60", Session: "s_8c21f0a9"},
	} {
		if _, err := e.svc.RequestApproval(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	old, _ := e.svc.RequestApproval(ctx, owner.ApprovalRequest{Kind: owner.KindNewDestination, Reason: "new_destination", Site: "books.example"})
	if _, err := e.svc.Decide(ctx, old.ID, true, "owner:"+ownerEmail); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"authorize", "substitute", "authorize"} {
		if _, err := e.vault.Release(ctx, vault.ReleaseArgs{Org: org, ItemID: e.card.ID, Field: vault.FieldNumber,
			Destination: "books.example", Actor: "avk_5f1c9e2a7b3d4e60", Session: "s_8c21f0a9", Purpose: p}); err != nil {
			t.Fatal(err)
		}
	}
	u, _ := url.Parse(e.srv.URL)
	var token string
	for _, c := range e.client.Jar.Cookies(u) {
		if c.Name == "__Host-av_session" {
			token = c.Value
		}
	}
	if token == "" {
		t.Fatal("no session")
	}
	// Chromium's --screenshot cannot sign in: this test-only front adds
	// the session cookie the Go client got.
	shot := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.AddCookie(&http.Cookie{Name: "__Host-av_session", Value: token})
		e.h.ServeHTTP(w, r)
	}))
	defer shot.Close()
	for _, p := range []struct{ path, file string }{
		{"/", "dashboard.png"}, {"/cards", "dashboard-cards.png"}, {"/activity", "dashboard-activity.png"},
	} {
		out := filepath.Join(dir, p.file)
		_ = os.Remove(out)
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		cmd := exec.CommandContext(cctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
			"--user-data-dir="+t.TempDir(), "--ignore-certificate-errors", "--window-size=1280,900",
			"--screenshot="+out, shot.URL+p.path)
		b, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("chromium %s: %v\n%s", p.path, err, b)
		}
		if st, err := os.Stat(out); err != nil || st.Size() < 10_000 {
			t.Fatalf("%s: no screenshot (%v)", out, err)
		}
	}
}
