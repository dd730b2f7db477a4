package dashboard_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/owner/dashboard"
	"github.com/agentvault/agentvault/recipes"
	"github.com/agentvault/agentvault/store/sqlite"
)

func recipeEnv(t *testing.T) (*env, *recipes.Registry) {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "recipes.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reg, err := recipes.New(recipes.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	e := newEnv(t, func(c *dashboard.Config) { c.Recipes = reg })
	return e, reg
}

func submitRecipe(t *testing.T, reg *recipes.Registry, host, note string, verify bool) recipes.Submission {
	t.Helper()
	raw := `{"id":"` + host + `","kind":"merchant","platform":"stripe-payment-element","status":"partial",
	 "overrides":{"email":{"selector":"#email"}},"gotchas":["The cookie banner covers the pay button."]}`
	s, err := reg.Submit(context.Background(), recipes.SubmitArgs{Recipe: []byte(raw), Note: note, VerificationRequested: verify, Submitter: "key_default"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRecipes_DashboardReview: the owner sees each submission under review
// (its recipe, note and screening verdict) on /recipes and accepts (as
// verified, publishing the note), rejects (naming the rule) or edits it;
// every decision is a CSRF-checked form, and only accepted recipes are
// served to agents.
func TestRecipes_DashboardReview(t *testing.T) {
	e, reg := recipeEnv(t)
	ctx := context.Background()
	note := "Completed a test order; the confirmation page showed."
	a := submitRecipe(t, reg, "shop.example.com", note, true)
	b := submitRecipe(t, reg, "spam.example.net", "", false)
	c := submitRecipe(t, reg, "edit.example.org", "", false)
	e.signIn(ownerPW)

	code, body := e.get("/recipes")
	page := html.UnescapeString(body)
	if code != 200 || !strings.Contains(page, note) || !strings.Contains(page, `"selector": "#email"`) ||
		!strings.Contains(page, "Passed screening") || !strings.Contains(page, `name="verified"`) {
		t.Fatalf("/recipes (%d) does not show the submission, its recipe, verdict and the verify box", code)
	}
	if n := strings.Count(body, `class="card submission"`); n != 3 {
		t.Errorf("%d submissions under review shown, want 3", n)
	}

	// A decision without the page's CSRF token changes nothing.
	if code, _ := e.do(http.MethodPost, "/recipes/"+a.ID+"/accept", url.Values{"csrf": {"forged"}}); code != http.StatusForbidden {
		t.Errorf("accept without CSRF: %d", code)
	}
	if l, _ := reg.Lookup(ctx, "https://shop.example.com/"); l.Merchant != nil {
		t.Fatal("served before the owner accepted")
	}

	if code, body := e.post("/recipes", "/recipes/"+a.ID+"/accept", url.Values{"verified": {"on"}}); code != 200 || !strings.Contains(body, "approved") {
		t.Errorf("accept: %d", code)
	}
	l, _ := reg.Lookup(ctx, "https://shop.example.com/")
	if l.Merchant == nil || l.Merchant.Status != recipes.StatusVerified || l.Merchant.Evidence != note {
		t.Errorf("accepted as verified, served %+v", l.Merchant)
	}

	if code, _ := e.post("/recipes", "/recipes/"+b.ID+"/reject", url.Values{"rule": {"the host is not a store"}}); code != 200 {
		t.Errorf("reject: %d", code)
	}
	if got, _ := reg.Submission(ctx, b.ID, 0); got.Status != recipes.SubmissionRejected || !strings.Contains(got.Verdict, "the host is not a store") {
		t.Errorf("rejected submission = %s %q", got.Status, got.Verdict)
	}

	// An edit that breaks a rule is refused with the rule; a good one is
	// what gets published.
	_, body = e.post("/recipes", "/recipes/"+c.ID+"/edit", url.Values{"recipe": {`{"id":"edit.example.org","kind":"merchant","platform":"custom","status":"partial","preconditions":["captcha"]}`}})
	if !strings.Contains(html.UnescapeString(body), "precondition") {
		t.Errorf("a bad edit does not say which rule it broke")
	}
	good := `{"id":"edit.example.org","kind":"merchant","platform":"custom","status":"partial","overrides":{"submit":{"selector":"#buy-now"}}}`
	if code, _ := e.post("/recipes", "/recipes/"+c.ID+"/edit", url.Values{"recipe": {good}}); code != 200 {
		t.Errorf("edit: %d", code)
	}
	if code, _ := e.post("/recipes", "/recipes/"+c.ID+"/accept", url.Values{}); code != 200 {
		t.Errorf("accept after edit: %d", code)
	}
	if l, _ := reg.Lookup(ctx, "https://edit.example.org/"); l.Merchant == nil || l.Merchant.Overrides["submit"].Selector != "#buy-now" {
		t.Errorf("served after edit: %+v", l.Merchant)
	}
	_, body = e.get("/recipes")
	if strings.Contains(body, `class="card submission"`) || strings.Count(body, `class="published"`) != 2 {
		t.Errorf("after the review the page still shows submissions under review, or not the 2 published recipes")
	}
	// Deciding twice is refused, not applied again.
	_, body = e.post("/recipes", "/recipes/"+b.ID+"/accept", url.Values{})
	if !strings.Contains(body, "not waiting for a review") {
		t.Errorf("accepting a rejected submission was not refused")
	}
}
