package dashboard_test

import (
	"cmp"
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/policy"
)

// TestScreenshot renders the approvals page with sample data in Debian's
// chromium for the README. It runs only when AV_DASHBOARD_SCREENSHOT names
// the output file (make screenshot), never in the normal test run.
func TestScreenshot(t *testing.T) {
	out := os.Getenv("AV_DASHBOARD_SCREENSHOT")
	if out == "" {
		t.Skip("set AV_DASHBOARD_SCREENSHOT=path.png to take the README screenshot")
	}
	e := newEnv(t)
	ctx := context.Background()
	amt := policy.MustAmount("84.90 EUR")
	reqs := []owner.ApprovalRequest{
		{Kind: owner.KindPurchase, Reason: string(policy.ReasonOverThreshold), Site: "checkout.shop.example", CardID: e.card.ID, Amount: &amt, APIKeyID: "avk_5f1c9e2a7b3d4e60", Session: "s_8c21f0a9"},
		{Kind: owner.KindNewDestination, Reason: string(policy.ReasonNewDestination), Site: "tickets.example.org", APIKeyID: "avk_5f1c9e2a7b3d4e60", Session: "s_8c21f0a9"},
	}
	for _, r := range reqs {
		if _, err := e.svc.RequestApproval(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	old, _ := e.svc.RequestApproval(ctx, owner.ApprovalRequest{Kind: owner.KindNewDestination, Reason: "new_destination", Site: "books.example"})
	if _, err := e.svc.Decide(ctx, old.ID, true, "owner:"+ownerEmail); err != nil {
		t.Fatal(err)
	}
	e.signIn(ownerPW)
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
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--user-data-dir="+t.TempDir(), "--ignore-certificate-errors", "--window-size=1280,900",
		"--screenshot="+out, shot.URL+cmp.Or(os.Getenv("AV_DASHBOARD_PAGE"), "/"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, b)
	}
}
