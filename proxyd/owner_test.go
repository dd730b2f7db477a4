package proxyd_test

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/proxyd"
	"github.com/agentvault/agentvault/vault"

	"github.com/agentvault/agentvault/internal/leakcheck"
)

// recorder is a TLS upstream handler keeping every body it received.
type recorder struct {
	mu     sync.Mutex
	bodies []string
}

func (r *recorder) handle(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.bodies = append(r.bodies, string(b))
	r.mu.Unlock()
	_, _ = w.Write([]byte("ok"))
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bodies...)
}

// tokenOf returns the first catalog token starting with prefix.
func tokenOf(t *testing.T, cat []byte, prefix string) string {
	t.Helper()
	i := strings.Index(string(cat), prefix)
	if i < 0 {
		t.Fatalf("no %s token in the catalog", prefix)
	}
	tok := string(cat)[i:]
	return tok[:strings.IndexByte(tok, '"')]
}

// dashClient signs the owner in to Main's dashboard over TLS.
type dashClient struct {
	t    *testing.T
	base string
	hc   *http.Client
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (d *dashClient) do(method, path string, form url.Values) string {
	d.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, d.base+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := d.hc.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// post submits a form with the CSRF token of the page it sits on.
func (d *dashClient) post(page, path string, form url.Values) string {
	d.t.Helper()
	m := csrfRe.FindStringSubmatch(d.do(http.MethodGet, page, nil))
	if m == nil {
		d.t.Fatalf("%s has no CSRF token", page)
	}
	form.Set("csrf", m[1])
	return d.do(http.MethodPost, path, form)
}

func signIn(t *testing.T, m *proxyd.Main) *dashClient {
	t.Helper()
	const email, pw = "owner@example.org", "a long owner passphrase 42"
	if err := m.Owner.SetOwnerPassword(context.Background(), email, pw); err != nil {
		t.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	// The dashboard's local certificate is trusted by nobody; this test
	// drives its forms, not its certificate.
	d := &dashClient{t: t, base: "https://" + m.DashboardAddr.String(),
		hc: &http.Client{Jar: jar, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, err := d.hc.Get(d.base + "/signin")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 30s for the dashboard's sign-in page: %v", err)
		}
	}
	d.post("/signin", "/signin", url.Values{"email": {email}, "password": {pw}})
	return d
}

// TestLiveCVVThroughTheDashboard: a card whose CVV is never stored. The
// agent's CVV authorize asks the owner (cvv_entry); the owner types the code
// on the dashboard; the agent gets a stand-in; the TLS upstream receives the
// typed code; both uses are audited with its HMAC; the report names cvv.
// When the owner does not give it, the fill ends cvv_entry_required.
func TestLiveCVVThroughTheDashboard(t *testing.T) {
	const number, typed = "4242424242424242", "4821"
	rec := &recorder{}
	up, roots := tlsUpstream(t, rec.handle)
	m, logs := startMain(t, roots, func(c *proxyd.Config) {
		c.Listen.Dashboard = "127.0.0.1:0"
		c.Policy.AuthorizedDestinations = []string{"127.0.0.1"}
	})
	ctx := context.Background()
	card, err := m.Vault.AddCard(ctx, proxyd.DefaultOrg, "owner", vault.CardInput{Number: vault.NewSecret([]byte(number)),
		ExpiryMonth: 12, ExpiryYear: 2031, AnySite: true, LiveCVV: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Owner.SetCardPolicy(ctx, owner.CardPolicy{CardID: card.ID, Rules: policy.CardPolicy{LiveCVV: true}}, "owner"); err != nil {
		t.Fatal(err)
	}
	c := control.NewClient("http://"+m.ControlAddr.String(), m.ControlToken, nil)
	s, err := c.CreateSession(ctx, m.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	cat, _ := c.Catalog(ctx, m.APIKey, "")
	cvvTok := tokenOf(t, cat, "av_card_1_cvv_")
	req := control.AuthorizeRequest{Token: cvvTok, PageURL: up.URL + "/pay"}
	_, err = c.Authorize(ctx, s.ID, req)
	p, ok := control.PendingOf(err)
	if !ok || p.Reason != "cvv_entry" {
		t.Fatalf("CVV authorize on a live-CVV card: %v", err)
	}
	d := signIn(t, m)
	d.post("/", "/approvals/"+p.WaitID, url.Values{"decision": {"approve"}, "cvv": {typed}})
	if w, err := c.Wait(ctx, p.WaitID, 5*time.Second); err != nil || w.Status != "approved" {
		t.Fatalf("wait: %+v %v", w, err)
	}
	a, err := c.Authorize(ctx, s.ID, req)
	if err != nil || !a.StandIn || a.Value == typed || len(a.Value) != len(typed) {
		t.Fatalf("after the owner typed it: %v", err)
	}
	resp, err := proxyClient(m, s).Post(up.URL+"/pay", "application/x-www-form-urlencoded", strings.NewReader("cvc="+a.Value))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got := rec.all(); len(got) != 1 || got[0] != "cvc="+typed {
		t.Fatal("the upstream did not receive the typed code")
	}
	if strings.Contains(string(body), typed) {
		t.Fatal("the typed code came back to the browser")
	}
	recs, err := m.Vault.Audit(ctx, vault.AuditFilter{Org: proxyd.DefaultOrg, Session: s.ID, Action: vault.AuditUsed})
	if err != nil || len(recs) != 2 {
		t.Fatalf("audit of the typed code: %d records, %v", len(recs), err)
	}
	want := m.Vault.AuditHMAC(vault.NewSecret([]byte(typed)))
	for _, r := range recs {
		if string(r.ValueHMAC) != string(want) || r.ItemID != card.ID || r.Field != vault.FieldCVV || r.Destination != "127.0.0.1" {
			t.Fatalf("audit record %s/%s for %s does not hold the code's HMAC", r.ItemID, r.Field, r.Destination)
		}
	}
	rep, _ := c.Report(ctx, s.ID)
	if !strings.Contains(strings.Join(rep.FilledFieldKinds, ","), "cvv") {
		t.Fatalf("filledFieldKinds %v lacks cvv", rep.FilledFieldKinds)
	}
	leakcheck.New(leakcheck.Value("cvv the owner typed", typed)).Logs(t, "proxyd's log", []byte(logs.String()))

	// Another session: the owner does not give the code.
	s2, err := c.CreateSession(ctx, m.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Authorize(ctx, s2.ID, req)
	p2, ok := control.PendingOf(err)
	if !ok {
		t.Fatalf("second session: %v", err)
	}
	if _, err := m.Owner.Decide(ctx, p2.WaitID, false, "owner@example.org"); err != nil {
		t.Fatal(err)
	}
	if w, _ := c.Wait(ctx, p2.WaitID, time.Second); w.Code != string(agentvault.CodeCVVEntryRequired) {
		t.Fatalf("no code from the owner: %+v", w)
	}
	if _, err := c.Authorize(ctx, s2.ID, control.AuthorizeRequest{Token: cvvTok, PageURL: up.URL + "/pay"}); agentvault.ErrorCode(err) != agentvault.CodeApprovalPending {
		t.Fatalf("authorize without the code: %v", err)
	}
}

// TestP18_WireAmountAfterOwnerApproval: the owner approves a purchase over
// the card's threshold for 60.00 EUR; the number is released for that
// total; the processor request carrying the number and a raised amount is
// refused amount_mismatch (counted, nothing forwarded); the approved amount
// goes through.
func TestP18_WireAmountAfterOwnerApproval(t *testing.T) {
	const number = "4242424242424242"
	rec := &recorder{}
	up, roots := tlsUpstream(t, rec.handle)
	m, logs := startMain(t, roots, func(c *proxyd.Config) { c.Policy.AuthorizedDestinations = []string{"127.0.0.1"} })
	ctx := context.Background()
	card, err := m.Vault.AddCard(ctx, proxyd.DefaultOrg, "owner", vault.CardInput{Number: vault.NewSecret([]byte(number)),
		CVV: vault.NewSecret([]byte("737")), ExpiryMonth: 12, ExpiryYear: 2031, AnySite: true})
	if err != nil {
		t.Fatal(err)
	}
	threshold := policy.MustAmount("50.00 EUR")
	if err := m.Owner.SetCardPolicy(ctx, owner.CardPolicy{CardID: card.ID, Currency: "EUR", Rules: policy.CardPolicy{ApprovalThreshold: &threshold}}, "owner"); err != nil {
		t.Fatal(err)
	}
	c := control.NewClient("http://"+m.ControlAddr.String(), m.ControlToken, nil)
	s, err := c.CreateSession(ctx, m.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	cat, _ := c.Catalog(ctx, m.APIKey, "")
	req := control.AuthorizeRequest{Token: tokenOf(t, cat, "av_card_1_number_"), PageURL: up.URL + "/checkout?email=ada%40example.com#step2",
		OrderTotal: &control.OrderTotal{Amount: "60.00", Currency: "EUR"}}
	_, err = c.Authorize(ctx, s.ID, req)
	p, ok := control.PendingOf(err)
	if !ok || p.Reason != string(policy.ReasonOverThreshold) {
		t.Fatalf("over the threshold: %v", err)
	}
	// The approval names the card and the page, without its query.
	if ap, err := m.Owner.Approval(ctx, p.WaitID); err != nil || ap.ItemID != card.ID || ap.Page != up.URL+"/checkout" {
		t.Fatalf("approval item %q page %q (%v); want %s and %s", ap.ItemID, ap.Page, err, card.ID, up.URL+"/checkout")
	}
	if _, err := m.Owner.Decide(ctx, p.WaitID, true, "owner@example.org"); err != nil {
		t.Fatal(err)
	}
	a, err := c.Authorize(ctx, s.ID, req)
	if err != nil {
		t.Fatalf("after approval: %v", err)
	}
	pc := proxyClient(m, s)
	post := func(body string) string {
		resp, err := pc.Post(up.URL+"/charge", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header.Get("X-Agentvault-Code")
	}
	if code := post(`{"number":"` + a.Value + `","amount":6500,"currency":"eur"}`); code != string(agentvault.CodeAmountMismatch) {
		t.Fatalf("raised amount: code %q", code)
	}
	if len(rec.all()) != 0 {
		t.Fatal("the raised charge reached the processor")
	}
	if code := post(`{"number":"` + a.Value + `","amount":6000,"currency":"eur"}`); code != "" {
		t.Fatalf("approved amount: code %q", code)
	}
	if got := rec.all(); len(got) != 1 || !strings.Contains(got[0], number) {
		t.Fatal("the approved charge did not reach the processor with the number")
	}
	if rep, _ := c.Report(ctx, s.ID); rep.DeniedCount != 1 {
		t.Fatalf("deniedCount %d, want 1", rep.DeniedCount)
	}
	mt, err := http.Get("http://" + m.AdminAddr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mtext, _ := io.ReadAll(mt.Body)
	mt.Body.Close()
	if !strings.Contains(string(mtext), `agentvault_proxy_refusals_total{code="amount_mismatch"} 1`) {
		t.Fatal("the refusal is not counted under its code")
	}
	leakcheck.New(leakcheck.Value("card number", number)).Logs(t, "proxyd's log", []byte(logs.String()))
}

// TestUnsafeTestHostsReachNamedSites: with unsafe_test_hosts (and
// unsafe_allow_private_ranges) Main dials shop.test on loopback, so a card
// scoped to that name works end to end; without a mapping the name does
// not resolve.
func TestUnsafeTestHostsReachNamedSites(t *testing.T) {
	const number = "4242424242424242"
	rec := &recorder{}
	up, roots := tlsUpstream(t, rec.handle)
	m, _ := startMain(t, roots, func(c *proxyd.Config) {
		c.UnsafeTestHosts = map[string]string{"shop.test": "127.0.0.1"}
		c.Policy.AuthorizedDestinations = []string{"shop.test"}
	})
	ctx := context.Background()
	if _, err := m.Vault.AddCard(ctx, proxyd.DefaultOrg, "owner", vault.CardInput{Number: vault.NewSecret([]byte(number)),
		CVV: vault.NewSecret([]byte("737")), ExpiryMonth: 12, ExpiryYear: 2031, Sites: []string{"shop.test"}}); err != nil {
		t.Fatal(err)
	}
	c := control.NewClient("http://"+m.ControlAddr.String(), m.ControlToken, nil)
	s, err := c.CreateSession(ctx, m.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	cat, _ := c.Catalog(ctx, m.APIKey, "")
	port := up.URL[strings.LastIndexByte(up.URL, ':'):]
	a, err := c.Authorize(ctx, s.ID, control.AuthorizeRequest{Token: tokenOf(t, cat, "av_card_1_number_"), PageURL: "https://shop.test" + port + "/pay"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := proxyClient(m, s).Post("https://shop.test"+port+"/pay", "application/x-www-form-urlencoded", strings.NewReader("cc="+a.Value))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := rec.all(); len(got) != 1 || got[0] != "cc="+number {
		t.Fatal("the named test host did not receive the number")
	}
	if _, err := proxyClient(m, s).Get("https://pay.test" + port + "/"); err == nil {
		t.Fatal("an unmapped .test name was reached")
	}
}
