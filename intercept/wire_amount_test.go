package intercept_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentvault/agentvault/broker"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/vault"

	"github.com/agentvault/agentvault/internal/leakcheck"
)

// AuditUse records the use of a value the vault does not hold (a live CVV),
// with the same fail-closed switch as Release.
func (v *memVault) AuditUse(ctx context.Context, a broker.ReleaseArgs, value vault.Secret) error {
	if v.failAudit.Load() {
		return agentvault.Errorf(agentvault.CodeAuditUnavailable, "audit log unavailable")
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	a.Purpose = "use:" + a.Purpose
	v.audit = append(v.audit, a)
	return nil
}

// TestP18_WireAmountAboveApprovedTotalRefused: the request that carries the
// card number also carries the amount the site will charge; more than the
// total the number was authorized for is refused before anything goes
// upstream, in every body shape and unit convention.
func TestP18_WireAmountAboveApprovedTotalRefused(t *testing.T) {
	e := startProxy(t, nil)
	up := startUpstream(t, e.upCA, nil)
	const number = "4242424242424242"
	e.addCard("1", number, "737")
	s, pw := e.session()
	page := hostURL(up, "shop.test", "/pay")
	// Each case is its own purchase: a card grant covers one (P21).
	authorize := func(t *testing.T) string {
		a, err := e.sessions.Authorize(context.Background(), s, broker.AuthorizeRequest{Token: tok("card", "1", "number"), PageURL: page,
			Total: amount(t, "12.34", "EUR")})
		if err != nil {
			t.Fatal(err)
		}
		return a.Value
	}
	si := authorize(t)
	form := "application/x-www-form-urlencoded"
	cases := []struct {
		name, ctype, body string
		want              agentvault.Code // "" forwarded
	}{
		{"stripe minor units equal", form, "amount=1234&currency=eur&card[number]=" + si, ""},
		{"stripe minor units grown", form, "amount=1235&currency=eur&card[number]=" + si, agentvault.CodeAmountMismatch},
		{"whole units in amount grown", form, "amount=80&currency=eur&card[number]=" + si, agentvault.CodeAmountMismatch},
		{"whole units in amount lower", form, "amount=12&currency=eur&card[number]=" + si, ""},
		{"decimal total equal", "application/json", `{"card":"` + si + `","order":{"total":"12.34","currency":"EUR"}}`, ""},
		{"decimal total grown", "application/json", `{"card":"` + si + `","order":{"grand_total":12.35}}`, agentvault.CodeAmountMismatch},
		{"camelCase total grown", "application/json", `{"card":"` + si + `","orderTotal":"13"}`, agentvault.CodeAmountMismatch},
		{"whole units total", form, "total=12&cc=" + si, ""},
		{"whole units total grown", form, "total=13&cc=" + si, agentvault.CodeAmountMismatch},
		{"price without currency ignored", "application/json", `{"card":"` + si + `","items":[{"price":99}]}`, ""},
		{"price with currency grown", "application/json", `{"card":"` + si + `","items":[{"price":"99.00","currency":"EUR"}]}`, agentvault.CodeAmountMismatch},
		{"formatted amount grown", form, "total=" + "%E2%82%AC1.234%2C56" + "&currency=EUR&cc=" + si, agentvault.CodeAmountMismatch},
		{"other currency unconvertible", form, "total=10.00&currency=USD&cc=" + si, agentvault.CodeAmountUnconvertible},
		{"garbled digits refused", form, "total=12..3&cc=" + si, agentvault.CodeAmountUnknown},
		{"negative discount line ignored", "application/json", `{"card":"` + si + `","discount":{"amount":-500}}`, ""},
		{"no amount", form, "cc=" + si, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			authorize(t)
			before, audited := up.count(), e.vault.audits(broker.PurposeSubstitute)
			resp, err := e.client(s, pw, false).Post(page, c.ctype, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := agentvault.Code(codeOf(resp)); got != c.want {
				t.Fatalf("code %q (status %d), want %q", got, resp.StatusCode, c.want)
			}
			// The broker compares before the vault audits: a refused
			// request released nothing, so no release is on record.
			if n := e.vault.audits(broker.PurposeSubstitute) - audited; n != map[bool]int{true: 1, false: 0}[c.want == ""] {
				t.Fatalf("%d releases audited", n)
			}
			reached := up.count() > before
			if reached != (c.want == "") {
				t.Fatalf("upstream reached: %v", reached)
			}
			if reached && !strings.Contains(string(up.last().Body), number) {
				t.Fatal("forwarded without the real number")
			}
		})
	}
	// A request without the card number is not checked: the amount alone
	// is not a charge the proxy releases anything for.
	resp, err := e.client(s, pw, false).Post(page, form, strings.NewReader("amount=999999&currency=eur"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if codeOf(resp) != "" {
		t.Fatalf("amount without a card refused: %s", codeOf(resp))
	}
	if s.Report().DeniedCount != 9 {
		t.Fatalf("deniedCount %d, want 9", s.Report().DeniedCount)
	}
	leakcheck.New(leakcheck.Value("card number", number)).Logs(t, "the proxy's log", []byte(e.logs.String()))
}

// TestP18_WireAmountConfiguredFields: names added by config, minor units
// included, are read like the common ones.
func TestP18_WireAmountConfiguredFields(t *testing.T) {
	e := startProxyWith(t, func(c *broker.Config) {
		c.WireAmount = policy.WireAmountConfig{DecimalFields: []string{"checkout_sum"}, MinorUnitFields: []string{"cents"}}
	}, nil)
	up := startUpstream(t, e.upCA, nil)
	e.addCard("1", "4242424242424242", "737")
	s, pw := e.session()
	page := hostURL(up, "shop.test", "/pay")
	a, err := e.sessions.Authorize(context.Background(), s, broker.AuthorizeRequest{Token: tok("card", "1", "number"), PageURL: page,
		Total: amount(t, "20", "USD")})
	if err != nil {
		t.Fatal(err)
	}
	for body, want := range map[string]string{
		"checkout_sum=20.00&cc=" + a.Value: "",
		"checkout_sum=20.01&cc=" + a.Value: "amount_mismatch",
		"cents=2000&cc=" + a.Value:         "",
		"cents=2001&cc=" + a.Value:         "amount_mismatch",
	} {
		if _, err := e.sessions.Authorize(context.Background(), s, broker.AuthorizeRequest{Token: tok("card", "1", "number"), PageURL: page,
			Total: amount(t, "20", "USD")}); err != nil {
			t.Fatal(err)
		}
		resp, err := e.client(s, pw, false).Post(page, "application/x-www-form-urlencoded", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if codeOf(resp) != want {
			t.Errorf("%d-byte body: code %q, want %q", len(body), codeOf(resp), want)
		}
	}
}

// TestLiveCVVUseIsAudited: a code the owner typed is audited when it is
// bound and each time it goes on the wire; without the audit it is not sent
// (P12).
func TestLiveCVVUseIsAudited(t *testing.T) {
	e := startProxy(t, nil)
	up := startUpstream(t, e.upCA, nil)
	e.vault.add(vault.Item{Kind: vault.KindCard, Label: "1", Card: &vault.CardMeta{AnySite: true}},
		map[vault.Field]string{vault.FieldNumber: "4242424242424242"})
	s, pw := e.session()
	page := hostURL(up, "shop.test", "/pay")
	if err := e.sessions.SetLiveValue(s.ID, e.vault.items[0].ID, vault.FieldCVV, vault.NewSecret([]byte("5813"))); err != nil {
		t.Fatal(err)
	}
	a, err := e.authorize(s, tok("card", "1", "cvv"), page)
	if err != nil {
		t.Fatal(err)
	}
	if e.vault.audits("use:authorize") != 1 {
		t.Fatal("binding the typed code was not audited")
	}
	post := func() string {
		resp, err := e.client(s, pw, false).Post(page, "application/x-www-form-urlencoded", strings.NewReader("cvc="+a.Value))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return codeOf(resp)
	}
	if c := post(); c != "" || string(up.last().Body) != "cvc=5813" {
		t.Fatalf("live code not substituted: %q", c)
	}
	if e.vault.audits("use:substitute") != 1 {
		t.Fatal("the use on the wire was not audited")
	}
	e.vault.failAudit.Store(true)
	n := up.count()
	if c := post(); c != string(agentvault.CodeAuditUnavailable) || up.count() != n {
		t.Fatalf("unaudited use: code %q, upstream reached %v", c, up.count() != n)
	}
	if k := s.Report().FilledFieldKinds; strings.Join(k, ",") != "card,cvv" {
		t.Fatalf("filledFieldKinds %v", k)
	}
}

// TestReportCountsRefusals: refused authorizes count in deniedCount, a call
// parked for the owner does not, a burst of rate_limited refusals counts
// once a minute, and an approval the owner denied counts once.
func TestReportCountsRefusals(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	e := startProxyWith(t, func(c *broker.Config) {
		c.Now = func() time.Time { return now }
		c.Limiter = policy.NewRateLimiter(2, time.Hour, func() time.Time { return now })
	}, nil)
	e.addCard("1", "4242424242424242", "737")
	var decide error
	e.auth.set(func(policy.Fill) error { return decide }, nil)
	s, _ := e.session()
	page := "https://shop.test/pay"
	decide = agentvault.Errorf(agentvault.CodeApprovalPending, "waiting")
	if _, err := e.authorize(s, tok("card", "1", "number"), page); agentvault.ErrorCode(err) != agentvault.CodeApprovalPending {
		t.Fatal(err)
	}
	decide = agentvault.Errorf(agentvault.CodeCardPaused, "paused")
	if _, err := e.authorize(s, tok("card", "1", "number"), page); agentvault.ErrorCode(err) != agentvault.CodeCardPaused {
		t.Fatal(err)
	}
	if n := s.Report().DeniedCount; n != 1 {
		t.Fatalf("after pending + paused: %d, want 1", n)
	}
	for range 5 {
		_, err := e.authorize(s, tok("card", "1", "number"), page)
		var rl *policy.RateLimitError
		if !errors.As(err, &rl) || rl.RetryAfter <= 0 {
			t.Fatalf("burst: %v", err)
		}
	}
	if n := s.Report().DeniedCount; n != 2 {
		t.Fatalf("after a rate_limited burst: %d, want 2", n)
	}
	now = now.Add(61 * time.Second)
	if _, err := e.authorize(s, tok("card", "1", "number"), page); agentvault.ErrorCode(err) != agentvault.CodeRateLimited {
		t.Fatal(err)
	}
	if n := s.Report().DeniedCount; n != 3 {
		t.Fatalf("a minute later: %d, want 3", n)
	}
	e.sessions.DeniedOnce(s.ID, "apr_1")
	e.sessions.DeniedOnce(s.ID, "apr_1")
	if n := s.Report().DeniedCount; n != 4 {
		t.Fatalf("a denied approval seen twice: %d, want 4", n)
	}
}

// wireCase is one request for the wire amount tests: its body, and the code
// it must be refused with ("" forwarded with the real number).
type wireCase struct {
	name, ctype, body string
	want              agentvault.Code
}

// runWireCases authorizes the card number for a total of 12.34 EUR and
// posts each case's body (with {si} replaced by the stand-in), checking the
// answer code and that a refused request never reaches the site.
func runWireCases(t *testing.T, path string, cases []wireCase) {
	t.Helper()
	e := startProxy(t, nil)
	up := startUpstream(t, e.upCA, nil)
	const number = "4242424242424242"
	e.addCard("1", number, "737")
	s, pw := e.session()
	page := hostURL(up, "shop.test", "/pay")
	a, err := e.sessions.Authorize(context.Background(), s, broker.AuthorizeRequest{Token: tok("card", "1", "number"), PageURL: page,
		Total: amount(t, "12.34", "EUR")})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Each case is its own purchase: a card grant covers one (P21).
			if _, err := e.sessions.Authorize(context.Background(), s, broker.AuthorizeRequest{Token: tok("card", "1", "number"), PageURL: page,
				Total: amount(t, "12.34", "EUR")}); err != nil {
				t.Fatal(err)
			}
			before, audited := up.count(), e.vault.audits(broker.PurposeSubstitute)
			target := hostURL(up, "shop.test", strings.ReplaceAll(path, "{si}", a.Value))
			resp, err := e.client(s, pw, false).Post(target, c.ctype, strings.NewReader(strings.ReplaceAll(c.body, "{si}", a.Value)))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := agentvault.Code(codeOf(resp)); got != c.want {
				t.Fatalf("code %q (status %d), want %q", got, resp.StatusCode, c.want)
			}
			if c.want != "" && e.vault.audits(broker.PurposeSubstitute) != audited {
				t.Fatal("a refused request's number was released (audited)")
			}
			reached := up.count() > before
			if reached != (c.want == "") {
				t.Fatalf("upstream reached: %v", reached)
			}
			if reached && !strings.Contains(string(up.last().Body)+up.last().RequestURI, number) {
				t.Fatal("forwarded without the real number")
			}
		})
	}
	leakcheck.New(leakcheck.Value("card number", number)).Logs(t, "the proxy's log", []byte(e.logs.String()))
}

// TestP18_WireAmountPercentZZBodyFailsClosed: a form with a bad escape
// ("%zz", which url.ParseQuery rejects whole) still has its amounts read by
// the parse that substitutes the number, so a grown amount is refused and
// nothing goes upstream; a body the proxy can only treat as free text
// while it carries the number is refused too.
func TestP18_WireAmountPercentZZBodyFailsClosed(t *testing.T) {
	form := "application/x-www-form-urlencoded"
	runWireCases(t, "/pay", []wireCase{
		{"bad escape first, amount grown", form, "x=%zz&amount=99999&currency=eur&card[number]={si}", agentvault.CodeAmountMismatch},
		{"bad escape last, total grown", form, "total=99.00&card[number]={si}&x=%zz", agentvault.CodeAmountMismatch},
		{"bad escape in the amount", form, "amount=12%zz34&card[number]={si}", agentvault.CodeAmountUnknown},
		{"bad escape, amount equal", form, "x=%zz&amount=1234&currency=eur&card[number]={si}", ""},
		{"json with a bad escape", "application/json", `{"x":"\zz","card":"{si}","total":99}`, agentvault.CodeAmountMismatch},
		{"truncated json", "application/json", `{"card":"{si}","total":99`, agentvault.CodeAmountMismatch},
		{"form as text/plain", "text/plain", "amount=99999&currency=eur&card={si}", agentvault.CodeAmountUnknown},
		{"form as xml", "application/xml", "<pay><card>{si}</card><total>99</total></pay>", agentvault.CodeAmountUnknown},
		{"array of totals", "application/json", `{"card":"{si}","total":[12, 99]}`, agentvault.CodeAmountMismatch},
	})
}

// TestP18_WireAmountSemicolonBody: some servers split a form at ';' as well
// as '&'; a pair holding ';' is read both ways, so an amount hidden behind
// one is checked.
func TestP18_WireAmountSemicolonBody(t *testing.T) {
	form := "application/x-www-form-urlencoded"
	runWireCases(t, "/pay", []wireCase{
		{"amount after a semicolon", form, "x=1;amount=99999&currency=eur&card[number]={si}", agentvault.CodeAmountMismatch},
		{"total after a semicolon", form, "card[number]={si};total=99.00", agentvault.CodeAmountMismatch},
		{"semicolon inside the amount", form, "amount=1234;x=1&currency=eur&card[number]={si}", agentvault.CodeAmountUnknown},
		{"semicolon, amount equal", form, "x=1;total=12.34&card[number]={si}", ""},
		{"two currencies behind a semicolon", form, "amount=1234&currency=eur;currency=usd&card[number]={si}", agentvault.CodeAmountUnknown},
	})
	runWireCases(t, "/pay?x=1;total=99.00", []wireCase{
		{"query with a semicolon", form, "card[number]={si}", agentvault.CodeAmountMismatch},
	})
}

// TestP18_AmountCents: amount_cents and any *_cents field count minor
// units, with no whole-unit reading to fall back on.
func TestP18_AmountCents(t *testing.T) {
	form := "application/x-www-form-urlencoded"
	runWireCases(t, "/pay", []wireCase{
		{"amount_cents equal", form, "amount_cents=1234&currency=eur&card[number]={si}", ""},
		{"amount_cents grown", form, "amount_cents=40000&card[number]={si}", agentvault.CodeAmountMismatch},
		{"amount_cents one over", form, "amount_cents=1235&card[number]={si}", agentvault.CodeAmountMismatch},
		{"totalCents grown", "application/json", `{"card":"{si}","order":{"totalCents":1300}}`, agentvault.CodeAmountMismatch},
		{"total_cents small is no unit puzzle", form, "total_cents=80&card[number]={si}", ""},
		{"percents is not an amount", form, "discount_percents=50&card[number]={si}", ""},
	})
}
