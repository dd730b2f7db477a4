package recipes_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/recipes"
	"github.com/agentvault/agentvault/store/sqlite"
)

// clock is a settable clock for the per-day budget.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newRegistry(t *testing.T, mod func(*recipes.Config)) (*recipes.Registry, *clock) {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "vault.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c := &clock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	cfg := recipes.Config{Store: st, Now: c.now}
	if mod != nil {
		mod(&cfg)
	}
	g, err := recipes.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g, c
}

const shopRecipe = `{"id":"shop.example.com","kind":"merchant","hosts":["shop.example.com"],"platform":"stripe-payment-element","status":"partial",
 "overrides":{"email":{"selector":"#email"},"cardNumber":{"selector":"input[name='number']","frame":"iframe[title='Secure payment input frame']"}},
 "gotchas":["The cookie banner intercepts the first click."]}`

func submit(t *testing.T, g *recipes.Registry, recipe, note string, verify bool) (recipes.Submission, error) {
	t.Helper()
	return g.Submit(context.Background(), recipes.SubmitArgs{Recipe: []byte(recipe), Note: note, VerificationRequested: verify, Submitter: "key_a"})
}

func mustSubmit(t *testing.T, g *recipes.Registry, recipe string) recipes.Submission {
	t.Helper()
	s, err := submit(t, g, recipe, "Reached a filled card form.", false)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return s
}

func wantCode(t *testing.T, err error, code agentvault.Code, what string) {
	t.Helper()
	if agentvault.ErrorCode(err) != code {
		t.Errorf("%s: got %v, want %s", what, err, code)
	}
}

// TestRecipes_LookupAnswersFourSlots: a lookup answers merchant, platform,
// signup and signupPlatform, each null when nothing covers the host, and the
// platform slot is the platform the merchant recipe names.
func TestRecipes_LookupAnswersFourSlots(t *testing.T) {
	g, _ := newRegistry(t, nil)
	ctx := context.Background()
	l, err := g.Lookup(ctx, "https://shop.example.com/product/thing")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(l)
	if string(b) != `{"merchant":null,"platform":null,"signup":null,"signupPlatform":null}` {
		t.Errorf("empty lookup = %s", b)
	}
	s := mustSubmit(t, g, shopRecipe)
	if _, err := g.Accept(ctx, recipes.AcceptArgs{ID: s.ID, By: "owner:o"}); err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{
		`{"id":"shop.example.com","kind":"signup","status":"partial","ownerSteps":["email_code"],"identityProvider":"auth0","preconditions":["consent_gate"]}`,
		`{"id":"auth0","kind":"signup-platform","status":"unverified","notes":"Universal login: email first, then password."}`,
	} {
		s := mustSubmit(t, g, raw)
		if _, err := g.Accept(ctx, recipes.AcceptArgs{ID: s.ID, By: "owner:o"}); err != nil {
			t.Fatal(err)
		}
	}
	l, err = g.Lookup(ctx, "https://shop.example.com/checkout")
	if err != nil {
		t.Fatal(err)
	}
	if l.Merchant == nil || l.Merchant.ID != "shop.example.com" || l.Merchant.Overrides["email"].Selector != "#email" {
		t.Errorf("merchant slot = %+v", l.Merchant)
	}
	if l.Platform == nil || l.Platform.ID != "stripe-payment-element" || l.Platform.Selectors["frame"].Selector != recipes.StripePaymentFrame {
		t.Errorf("platform slot = %+v", l.Platform)
	}
	if l.Signup == nil || l.Signup.OwnerSteps[0] != "email_code" || l.SignupPlatform == nil || l.SignupPlatform.ID != "auth0" {
		t.Errorf("signup slots = %+v / %+v", l.Signup, l.SignupPlatform)
	}
	other, _ := g.Lookup(ctx, "https://elsewhere.example.org/")
	if other.Merchant != nil || other.Platform != nil || other.Signup != nil || other.SignupPlatform != nil {
		t.Errorf("a host nobody covered got %+v", other)
	}
}

// TestRecipes_StripsURLBeforeLookup: the query, the fragment, user info and
// a hosted-checkout token never survive StripURL, and a lookup uses only
// what is left.
func TestRecipes_StripsURLBeforeLookup(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"https://shop.example.com/product/thing?utm=1&email=a%40b.c#reviews", "https://shop.example.com/product/thing"},
		{"https://user:pw@shop.example.com/cart", "https://shop.example.com/cart"},
		{"https://checkout.stripe.com/c/pay/cs_live_a1B2c3D4e5F6g7H8i9J0kLmN#fidkdWxOYHwnPyd1blpxYHZxWjA0", "https://checkout.stripe.com/c/pay"},
		{"https://shop.example.com/checkouts/cn/Z2NwLXVzLWVhc3QxOjAxSjlYN0RGNUQ4/information", "https://shop.example.com/checkouts/cn"},
		{"https://shop.example.com/12345678/checkouts/0f1e2d3c4b5a69788796a5b4c3d2e1f0?key=abc", "https://shop.example.com/12345678/checkouts"},
		{"https://shop.example.com/checkouts/thank-you", "https://shop.example.com/checkouts/thank-you"},
		{"https://shop.example.com/products/trail-shoes", "https://shop.example.com/products/trail-shoes"},
	} {
		if got := recipes.StripURL(c.in); got != c.want {
			t.Errorf("StripURL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	g, _ := newRegistry(t, nil)
	s := mustSubmit(t, g, shopRecipe)
	if _, err := g.Accept(context.Background(), recipes.AcceptArgs{ID: s.ID, By: "owner:o"}); err != nil {
		t.Fatal(err)
	}
	l, err := g.Lookup(context.Background(), "https://shop.example.com/checkouts/cn/Z2NwLXVzLWVhc3QxOjAxSjlYN0RGNUQ4?token=x#y")
	if err != nil || l.Merchant == nil {
		t.Errorf("lookup of a hosted-checkout URL found %+v, %v", l.Merchant, err)
	}
}

// TestRecipes_UnparsableURLSentAsIs: a string that is not an absolute URL
// comes back from StripURL unchanged; a bare host still finds its recipe,
// anything else finds nothing (and is no error).
func TestRecipes_UnparsableURLSentAsIs(t *testing.T) {
	for _, in := range []string{"shop.example.com", "not a url at all", "%zz"} {
		if got := recipes.StripURL(in); got != in {
			t.Errorf("StripURL(%q) = %q, want it unchanged", in, got)
		}
	}
	g, _ := newRegistry(t, nil)
	s := mustSubmit(t, g, shopRecipe)
	if _, err := g.Accept(context.Background(), recipes.AcceptArgs{ID: s.ID, By: "owner:o"}); err != nil {
		t.Fatal(err)
	}
	if l, err := g.Lookup(context.Background(), "shop.example.com"); err != nil || l.Merchant == nil {
		t.Errorf("bare host lookup: %+v, %v", l.Merchant, err)
	}
	if l, err := g.Lookup(context.Background(), "not a url at all"); err != nil || l.Merchant != nil {
		t.Errorf("garbage lookup: %+v, %v", l.Merchant, err)
	}
}

// TestRecipes_PreconditionsClosedVocabulary: a merchant recipe takes
// exactly delivery_location, region_select and account_required, a signup
// recipe exactly region_select, consent_gate and mode_toggle; no repeats,
// and an empty array is refused (omit the field).
func TestRecipes_PreconditionsClosedVocabulary(t *testing.T) {
	g, _ := newRegistry(t, nil)
	m := func(p string) string {
		return `{"id":"shop.example.com","kind":"merchant","platform":"custom","status":"partial","preconditions":` + p + `}`
	}
	sg := func(p string) string {
		return `{"id":"shop.example.com","kind":"signup","status":"partial","preconditions":` + p + `}`
	}
	for _, ok := range []string{m(`["delivery_location","region_select","account_required"]`), sg(`["region_select","consent_gate","mode_toggle"]`)} {
		if _, err := submit(t, g, ok, "", false); err != nil {
			t.Errorf("valid preconditions refused: %v", err)
		}
	}
	for name, bad := range map[string]string{
		"captcha on merchant":     m(`["captcha"]`),
		"signup word on merchant": m(`["consent_gate"]`),
		"merchant word on signup": sg(`["delivery_location"]`),
		"repeat":                  m(`["region_select","region_select"]`),
		"empty array":             m(`[]`),
		"free text":               m(`["login first"]`),
		"case variant":            m(`["Region_Select"]`),
	} {
		_, err := submit(t, g, bad, "", false)
		wantCode(t, err, agentvault.CodeInvalidRecipe, name)
	}
}

// TestRecipes_RefusesVerifiedFromAgent: status verified is the owner's to
// give; an agent's verified, or its own evidence, is invalid_recipe, and
// nothing is stored (the budget is not spent).
func TestRecipes_RefusesVerifiedFromAgent(t *testing.T) {
	g, _ := newRegistry(t, nil)
	verified := strings.Replace(shopRecipe, `"status":"partial"`, `"status":"verified"`, 1)
	_, err := submit(t, g, verified, "Bought it.", true)
	wantCode(t, err, agentvault.CodeInvalidRecipe, "verified from an agent")
	if err != nil && !strings.Contains(agentvault.ErrorMessage(err), "verificationRequested") {
		t.Errorf("the refusal does not say how to ask for verification: %q", agentvault.ErrorMessage(err))
	}
	withEvidence := strings.Replace(shopRecipe, `"status":"partial"`, `"status":"partial","evidence":"trust me"`, 1)
	_, err = submit(t, g, withEvidence, "", false)
	wantCode(t, err, agentvault.CodeInvalidRecipe, "evidence from an agent")
	if list, _ := g.Submissions(context.Background(), recipes.SubmissionFilter{}); len(list) != 0 {
		t.Errorf("refused submissions were stored: %d", len(list))
	}
}

// TestRecipes_InvalidRecipeRules: the other rules of the recipe format,
// each refused with invalid_recipe.
func TestRecipes_InvalidRecipeRules(t *testing.T) {
	g, _ := newRegistry(t, nil)
	for name, bad := range map[string]string{
		"unknown field":            `{"id":"shop.example.com","kind":"merchant","platform":"custom","status":"partial","price":"9"}`,
		"not an object":            `["shop.example.com"]`,
		"platform kind from agent": `{"id":"shopify","kind":"platform","status":"partial"}`,
		"missing platform":         `{"id":"shop.example.com","kind":"merchant","status":"partial"}`,
		"id not among hosts":       `{"id":"shop.example.com","kind":"merchant","hosts":["other.example.com"],"platform":"custom","status":"partial"}`,
		"id is a URL path":         `{"id":"shop.example.com/cart","kind":"merchant","platform":"custom","status":"partial"}`,
		"dead-end without class":   `{"id":"shop.example.com","kind":"merchant","platform":"custom","status":"dead-end"}`,
		"dead-end unknown reason":  `{"id":"shop.example.com","kind":"merchant","platform":"custom","status":"dead-end","deadEnd":{"reason":"meh"}}`,
		"ref as selector":          `{"id":"shop.example.com","kind":"merchant","platform":"custom","status":"partial","overrides":{"email":{"selector":"aria-ref=e5"}}}`,
		"email in gotchas":         `{"id":"shop.example.com","kind":"merchant","platform":"custom","status":"partial","gotchas":["Log in as jane.doe@example.com"]}`,
		"card number in notes":     `{"id":"shop.example.com","kind":"merchant","platform":"custom","status":"partial","notes":"4242 4242 4242 4242 works"}`,
		"token in gotchas":         `{"id":"shop.example.com","kind":"merchant","platform":"custom","status":"partial","gotchas":["fill av_card_1_number_u7x2k"]}`,
		"example URL off host":     `{"id":"shop.example.com","kind":"merchant","platform":"custom","status":"partial","exampleProductUrl":"https://evil.example.net/p"}`,
		"selectors on merchant":    `{"id":"shop.example.com","kind":"merchant","platform":"custom","status":"partial","selectors":{"frame":{"selector":"iframe"}}}`,
		"unknown owner step":       `{"id":"shop.example.com","kind":"signup","status":"partial","ownerSteps":["call_mum"]}`,
	} {
		_, err := submit(t, g, bad, "", false)
		wantCode(t, err, agentvault.CodeInvalidRecipe, name)
	}
	_, err := submit(t, g, shopRecipe, "", true)
	wantCode(t, err, agentvault.CodeInvalidRecipe, "verificationRequested without a note")
	_, err = submit(t, g, shopRecipe, "Paid with 4111 1111 1111 1111, phone +49 30 1234567", true)
	wantCode(t, err, agentvault.CodeInvalidRecipe, "personal data in the note")
	s, err := submit(t, g, strings.Replace(shopRecipe, `"gotchas"`, `"exampleProductUrl":"https://shop.example.com/p/1?ref=abc#top","gotchas"`, 1), "", false)
	if err != nil || s.Recipe.ExampleProductURL != "https://shop.example.com/p/1" {
		t.Errorf("example URL is not stored stripped: %q, %v", s.Recipe.ExampleProductURL, err)
	}
}

// TestRecipes_TwentyPerDayBudget: 20 submissions in any 24 hours per key;
// the 21st is rate_limited with a Retry-After that ends when the oldest of
// the 20 turns 24 hours old; then one slot is free again. Another key has
// its own budget.
func TestRecipes_TwentyPerDayBudget(t *testing.T) {
	g, c := newRegistry(t, nil)
	ctx := context.Background()
	for i := range 20 {
		if _, err := submit(t, g, shopRecipe, "", false); err != nil {
			t.Fatalf("submission %d: %v", i+1, err)
		}
		c.add(10 * time.Minute)
	}
	_, err := submit(t, g, shopRecipe, "", false)
	wantCode(t, err, agentvault.CodeRateLimited, "21st submission")
	var rl *policy.RateLimitError
	if !errors.As(err, &rl) {
		t.Fatalf("the refusal carries no Retry-After: %v", err)
	}
	// The oldest was made 200 minutes ago: it turns 24 h old in 24h-200m.
	if want := 24*time.Hour - 200*time.Minute; rl.RetryAfterDuration() != want {
		t.Errorf("Retry-After %v, want %v", rl.RetryAfterDuration(), want)
	}
	if _, err := g.Submit(ctx, recipes.SubmitArgs{Recipe: []byte(shopRecipe), Submitter: "key_b"}); err != nil {
		t.Errorf("another key's submission: %v", err)
	}
	c.add(rl.RetryAfterDuration())
	if _, err := submit(t, g, shopRecipe, "", false); err != nil {
		t.Errorf("after the oldest turned 24 h old: %v", err)
	}
	_, err = submit(t, g, shopRecipe, "", false)
	wantCode(t, err, agentvault.CodeRateLimited, "right after the freed slot was used")
}

// TestRecipes_MergesSameStoreUnderAnotherHost: a submission for a store the
// registry knows under another host is screened as a merge, and accepting
// it combines it into the published recipe (hosts, gotchas, overrides)
// rather than publishing a second one.
func TestRecipes_MergesSameStoreUnderAnotherHost(t *testing.T) {
	g, _ := newRegistry(t, nil)
	ctx := context.Background()
	first := mustSubmit(t, g, shopRecipe)
	if _, err := g.Accept(ctx, recipes.AcceptArgs{ID: first.ID, By: "owner:o"}); err != nil {
		t.Fatal(err)
	}
	other := `{"id":"www.example.com","kind":"merchant","platform":"stripe-payment-element","status":"partial","preconditions":["delivery_location"],
	 "overrides":{"submit":{"selector":"#pay"}},"gotchas":["Choose a delivery slot before the card form shows."]}`
	s := mustSubmit(t, g, other)
	if s.Status != recipes.SubmissionNeedsHuman || s.MergeInto != "shop.example.com" || !strings.Contains(s.Verdict, "combined") {
		t.Fatalf("screening of a same-store submission = %s %q (merge into %q)", s.Status, s.Verdict, s.MergeInto)
	}
	done, err := g.Accept(ctx, recipes.AcceptArgs{ID: s.ID, By: "owner:o"})
	if err != nil {
		t.Fatal(err)
	}
	if done.Status != recipes.SubmissionMerged {
		t.Errorf("accepted same-store submission is %s, want merged", done.Status)
	}
	pub, _ := g.Published(ctx)
	if len(pub) != 1 {
		t.Fatalf("%d published recipes, want the one combined recipe", len(pub))
	}
	r := pub[0].Recipe
	if r.ID != "shop.example.com" || strings.Join(r.Hosts, ",") != "shop.example.com,www.example.com" ||
		len(r.Gotchas) != 2 || r.Overrides["submit"].Selector != "#pay" || r.Overrides["email"].Selector != "#email" ||
		len(r.Preconditions) != 1 {
		t.Errorf("combined recipe = %+v", r)
	}
	if l, _ := g.Lookup(ctx, "https://www.example.com/checkout"); l.Merchant == nil || l.Merchant.ID != "shop.example.com" {
		t.Errorf("the new host does not find the combined recipe")
	}
	// The same thing again adds nothing: screening rejects it as a duplicate.
	dup := mustSubmit(t, g, other)
	if dup.Status != recipes.SubmissionRejected || !strings.Contains(dup.Verdict, "duplicate") {
		t.Errorf("duplicate submission = %s %q", dup.Status, dup.Verdict)
	}
}

// TestRecipes_SubmitWaitsForScreening: submit answers with the screening's
// verdict when it finishes within the wait, and pending with an empty
// verdict when it does not; polling the id then gives the verdict.
func TestRecipes_SubmitWaitsForScreening(t *testing.T) {
	release := make(chan struct{})
	g, _ := newRegistry(t, func(c *recipes.Config) {
		c.ScreenWait = 50 * time.Millisecond
		c.Screen = func(ctx context.Context, s recipes.Submission) error {
			if strings.Contains(s.Note, "slow") {
				<-release
			}
			return nil
		}
	})
	ctx := context.Background()
	fast, err := submit(t, g, shopRecipe, "fast", false)
	if err != nil || fast.Status != recipes.SubmissionNeedsHuman || fast.Verdict == "" {
		t.Fatalf("fast screening: %s %q %v", fast.Status, fast.Verdict, err)
	}
	slow, err := submit(t, g, shopRecipe, "slow", false)
	if err != nil || slow.Status != recipes.SubmissionPending || slow.Verdict != "" {
		t.Fatalf("slow screening answered %s %q %v, want pending with no verdict", slow.Status, slow.Verdict, err)
	}
	if again, _ := g.Submission(ctx, slow.ID, 0); again.Status != recipes.SubmissionPending {
		t.Errorf("poll before screening ended: %s", again.Status)
	}
	close(release)
	got, err := g.Submission(ctx, slow.ID, 10*time.Second)
	if err != nil || got.Status != recipes.SubmissionNeedsHuman {
		t.Errorf("poll after screening: %s %v", got.Status, err)
	}
}

// TestRecipes_PollSubmission: get_recipe_submission's states through a
// review: needs_human after screening, approved or rejected (the verdict
// naming the rule) after the owner; an unknown id is not_found.
func TestRecipes_PollSubmission(t *testing.T) {
	g, _ := newRegistry(t, nil)
	ctx := context.Background()
	a := mustSubmit(t, g, shopRecipe)
	b := mustSubmit(t, g, strings.Replace(shopRecipe, "shop.example.com", "shop.example.net", 2))
	if _, err := g.Accept(ctx, recipes.AcceptArgs{ID: a.ID, By: "owner:o"}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Reject(ctx, b.ID, "owner:o", "the selectors do not match the live page"); err != nil {
		t.Fatal(err)
	}
	if got, _ := g.Submission(ctx, a.ID, 0); got.Status != recipes.SubmissionApproved {
		t.Errorf("accepted submission polls as %s", got.Status)
	}
	if got, _ := g.Submission(ctx, b.ID, 0); got.Status != recipes.SubmissionRejected || !strings.Contains(got.Verdict, "selectors do not match") {
		t.Errorf("rejected submission polls as %s %q", got.Status, got.Verdict)
	}
	_, err := g.Submission(ctx, "rs_nope", 0)
	wantCode(t, err, agentvault.CodeNotFound, "unknown submission id")
	_, err = g.Accept(ctx, recipes.AcceptArgs{ID: b.ID, By: "owner:o"})
	wantCode(t, err, agentvault.CodeConflict, "accepting a rejected submission")
}

// TestRecipes_UnreviewedSubmissionNotServed: other agents see a submission
// only once the owner accepted it; an owner's edit is what gets published.
func TestRecipes_UnreviewedSubmissionNotServed(t *testing.T) {
	g, _ := newRegistry(t, nil)
	ctx := context.Background()
	s := mustSubmit(t, g, shopRecipe)
	if l, _ := g.Lookup(ctx, "https://shop.example.com/"); l.Merchant != nil {
		t.Fatal("a submission under review is served")
	}
	edited := strings.Replace(shopRecipe, `"#email"`, `"input#email"`, 1)
	if _, err := g.Edit(ctx, s.ID, "owner:o", []byte(edited)); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Edit(ctx, s.ID, "owner:o", []byte(`{"id":"x"}`)); agentvault.ErrorCode(err) != agentvault.CodeInvalidRecipe {
		t.Errorf("an invalid edit: %v", err)
	}
	if _, err := g.Accept(ctx, recipes.AcceptArgs{ID: s.ID, By: "owner:o"}); err != nil {
		t.Fatal(err)
	}
	l, _ := g.Lookup(ctx, "https://shop.example.com/")
	if l.Merchant == nil || l.Merchant.Overrides["email"].Selector != "input#email" {
		t.Errorf("served recipe = %+v, want the owner's edit", l.Merchant)
	}
}

// TestRecipes_VerificationPublishesNoteAsEvidence: with verificationRequested
// the owner may accept as verified, and the note is published word for word
// as the recipe's evidence.
func TestRecipes_VerificationPublishesNoteAsEvidence(t *testing.T) {
	g, _ := newRegistry(t, nil)
	ctx := context.Background()
	note := "Completed a test purchase of EUR 42.50; the order confirmation showed."
	s, err := submit(t, g, shopRecipe, note, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Accept(ctx, recipes.AcceptArgs{ID: s.ID, By: "owner:o", Verified: true}); err != nil {
		t.Fatal(err)
	}
	l, _ := g.Lookup(ctx, "https://shop.example.com/")
	if l.Merchant == nil || l.Merchant.Status != recipes.StatusVerified || l.Merchant.Evidence != note {
		t.Errorf("published = %+v", l.Merchant)
	}
}

// TestRecipes_ShippedPlatformRecipes: the Stripe Payment Element, the
// legacy Card Element and Shopify ship as platform recipes with the frame
// selectors of the tool reference and the origins of policy's integration
// list.
func TestRecipes_ShippedPlatformRecipes(t *testing.T) {
	want := map[string]string{
		"stripe-payment-element": `iframe[title="Secure payment input frame"]`,
		"stripe-card-element":    `iframe[title="Secure card number input frame"]`,
		"shopify":                `iframe[name*="card-fields-number"]`,
	}
	for _, r := range recipes.Shipped() {
		frame, ok := want[r.ID]
		if !ok {
			t.Errorf("unexpected shipped recipe %s", r.ID)
			continue
		}
		delete(want, r.ID)
		if r.Selectors["cardNumber"].Frame != frame {
			t.Errorf("%s card number frame = %q, want %q", r.ID, r.Selectors["cardNumber"].Frame, frame)
		}
		if r.Origins == nil || len(r.Origins.PostsTo) == 0 || len(r.Origins.Frames) == 0 {
			t.Errorf("%s has no origins from the integration list", r.ID)
		}
		if _, err := recipes.Check(r, recipes.CheckArgs{ByOwner: true}); err != nil {
			t.Errorf("shipped %s breaks the format: %v", r.ID, err)
		}
	}
	if len(want) != 0 {
		t.Errorf("missing shipped recipes: %v", want)
	}
	var card recipes.Recipe
	for _, r := range recipes.Shipped() {
		if r.ID == "stripe-card-element" {
			card = r
		}
	}
	if card.Selectors["expiry"].Frame != `iframe[title="Secure expiration date input frame"]` || card.Selectors["cvc"].Frame != `iframe[title="Secure CVC input frame"]` {
		t.Errorf("card element expiry/cvc frames = %+v", card.Selectors)
	}
	for _, r := range recipes.Shipped() {
		if r.ID == "shopify" && !strings.Contains(strings.Join(r.Origins.PostsTo, " "), "https://deposit.shopifycs.com") {
			t.Errorf("shopify origins %v do not come from the integration list", r.Origins.PostsTo)
		}
	}
}
