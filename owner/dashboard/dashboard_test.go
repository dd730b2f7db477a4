package dashboard_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/hostname"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/owner/dashboard"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/store/sqlite"
	"github.com/agentvault/agentvault/vault"

	"github.com/agentvault/agentvault/internal/leakcheck"
)

const (
	ownerEmail = "owner@example.com"
	ownerPW    = "correct horse battery staple"
	org        = "default"
	cardNumber = "4242424242424242"
	cardCVV    = "737"
	loginPW    = "hunter2-very-secret-Pw!"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

type env struct {
	t      testing.TB
	srv    *httptest.Server
	h      http.Handler
	svc    *owner.Service
	vault  *vault.Vault
	dbPath string
	client *http.Client
	card   vault.Item
	login  vault.Item
	logs   *syncBuffer
}

// syncBuffer collects log output from concurrent handlers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func newEnv(t testing.TB, opts ...func(*dashboard.Config)) *env {
	t.Helper()
	ctx := context.Background()
	dbPath := filepath.Join(t.TempDir(), "vault.db")
	st, err := sqlite.Open(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c := &clock{t: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	v, err := vault.Open(ctx, vault.Config{Store: st, MasterKey: key, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	card, err := v.AddCard(ctx, org, "owner", vault.CardInput{Number: vault.NewSecret([]byte(cardNumber)), CVV: vault.NewSecret([]byte(cardCVV)),
		ExpiryMonth: 4, ExpiryYear: 2030, Holder: "Ada Lovelace", AnySite: true})
	if err != nil {
		t.Fatal(err)
	}
	login, err := v.AddLogin(ctx, org, "owner", vault.LoginInput{Site: "github.com", Website: "https://github.com/login",
		Email: "ada@example.com", Password: vault.NewSecret([]byte(loginPW))})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	// JSON: a string attribute is told from a measured number (leakcheck).
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	svc, err := owner.New(owner.Config{Store: st, Org: org, Now: c.Now, Logger: logger, Password: owner.PasswordParams{Memory: 1024, Time: 1, Threads: 1},
		Engine: policy.NewEngine(policy.Rates{}, hostname.Registrable)})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.SetOwnerPassword(ctx, ownerEmail, ownerPW); err != nil {
		t.Fatal(err)
	}
	cfg := dashboard.Config{Service: svc, Vault: v, Now: c.Now, Logger: logger}
	for _, o := range opts {
		o(&cfg)
	}
	h, err := dashboard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	client := srv.Client()
	client.Jar, _ = cookiejar.New(nil)
	return &env{t: t, srv: srv, h: h, svc: svc, vault: v, dbPath: dbPath, client: client, card: card, login: login, logs: logs}
}

func (e *env) do(method, path string, form url.Values) (int, string) {
	e.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, e.srv.URL+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (e *env) get(path string) (int, string) { return e.do(http.MethodGet, path, nil) }

var csrfRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t testing.TB, body string) string {
	t.Helper()
	m := csrfRe.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("page has no CSRF token")
	}
	return m[1]
}

func (e *env) signIn(pw string) (int, string) {
	_, body := e.get("/signin")
	return e.do(http.MethodPost, "/signin", url.Values{"csrf": {csrfOf(e.t, body)}, "email": {ownerEmail}, "password": {pw}})
}

// post submits a form the way the page does: with the CSRF token of the
// page it was on.
func (e *env) post(page, path string, form url.Values) (int, string) {
	e.t.Helper()
	_, body := e.get(page)
	form.Set("csrf", csrfOf(e.t, body))
	return e.do(http.MethodPost, path, form)
}

func TestSignInSessionAndBanner(t *testing.T) {
	e := newEnv(t)
	if code, body := e.get("/"); code != 200 || !strings.Contains(body, `action="/signin"`) {
		t.Fatalf("signed out: %d, not the sign-in page", code)
	}
	if code, body := e.signIn(ownerPW + "x"); code != http.StatusUnauthorized || !strings.Contains(body, "Wrong email or password") {
		t.Fatalf("wrong password: %d", code)
	}
	if code, body := e.signIn(ownerPW); code != 200 || !strings.Contains(body, "Nothing is waiting for you") {
		t.Fatalf("sign-in: %d", code)
	}
	if _, err := e.svc.RequestApproval(context.Background(), owner.ApprovalRequest{Kind: owner.KindNewDestination, Reason: "new_destination", Site: "shop.example"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/", "/cards", "/logins", "/keys", "/sites", "/signups", "/activity"} {
		code, body := e.get(p)
		if code != 200 || !strings.Contains(body, `class="banner"`) || !strings.Contains(body, "1 request waiting for you") {
			t.Errorf("%s: %d, no banner", p, code)
		}
	}
	if code, body := e.post("/", "/signout", url.Values{}); code != 200 || !strings.Contains(body, `action="/signin"`) {
		t.Fatalf("sign-out: %d", code)
	}
	if _, body := e.get("/keys"); !strings.Contains(body, `action="/signin"`) {
		t.Fatal("still signed in after sign-out")
	}
}

func TestSessionCookieFlags(t *testing.T) {
	e := newEnv(t)
	_, body := e.get("/signin")
	e.client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/signin", strings.NewReader(url.Values{"csrf": {csrfOf(t, body)}, "email": {ownerEmail}, "password": {ownerPW}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in answered %d", resp.StatusCode)
	}
	var found bool
	for _, c := range resp.Cookies() {
		if c.Name == "__Host-av_session" && c.MaxAge > 0 {
			found = true
			if !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Domain != "" {
				t.Fatalf("session cookie flags: secure %v httponly %v samesite %v path %q", c.Secure, c.HttpOnly, c.SameSite, c.Path)
			}
		}
	}
	if !found {
		t.Fatal("no session cookie")
	}
	for _, hd := range []string{"Content-Security-Policy", "X-Frame-Options", "Cache-Control"} {
		if resp.Header.Get(hd) == "" {
			t.Errorf("missing %s", hd)
		}
	}
}

func TestCSRFRefusedWithoutToken(t *testing.T) {
	e := newEnv(t)
	// The sign-in form itself needs its token.
	if code, _ := e.do(http.MethodPost, "/signin", url.Values{"email": {ownerEmail}, "password": {ownerPW}}); code != http.StatusForbidden {
		t.Fatalf("sign-in without token: %d", code)
	}
	e.signIn(ownerPW)
	for name, form := range map[string]url.Values{
		"no token":    {"host": {"evil.example"}},
		"wrong token": {"host": {"evil.example"}, "csrf": {"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}},
	} {
		if code, _ := e.do(http.MethodPost, "/sites", form); code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, code)
		}
	}
	// A cross-site Origin is refused even with a token.
	_, page := e.get("/sites")
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/sites", strings.NewReader(url.Values{"host": {"evil.example"}, "csrf": {csrfOf(t, page)}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-origin post: %d", resp.StatusCode)
	}
	if sites, _ := e.svc.Sites(context.Background()); len(sites) != 0 {
		t.Fatalf("a refused form changed state: %d sites", len(sites))
	}
	if code, body := e.post("/sites", "/sites", url.Values{"host": {"Shop.Example"}}); code != 200 || !strings.Contains(body, "shop.example") {
		t.Fatalf("with the token: %d", code)
	}
}

func TestApprovePendingRequest(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	amt := policy.MustAmount("80.00 EUR")
	a, err := e.svc.RequestApproval(ctx, owner.ApprovalRequest{Kind: owner.KindPurchase, Reason: string(policy.ReasonOverThreshold),
		Site: "shop.example", CardID: e.card.ID, Amount: &amt, APIKeyID: "avk_1", Session: "s_1"})
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan owner.Approval)
	go func() {
		got, err := e.svc.WaitApproval(ctx, a.ID, time.Minute)
		if err != nil {
			t.Errorf("wait: %v", err)
		}
		waited <- got
	}()
	e.signIn(ownerPW)
	_, body := e.get("/")
	if !strings.Contains(body, "shop.example") || !strings.Contains(body, "80.00 EUR") || !strings.Contains(body, "•••• 4242") {
		t.Fatal("the pending purchase is not shown with its site, amount and card")
	}
	code, body := e.post("/", "/approvals/"+a.ID, url.Values{"decision": {"approve"}})
	if code != 200 || !strings.Contains(body, "approved") || strings.Contains(body, `class="banner"`) {
		t.Fatalf("approve: %d", code)
	}
	got := <-waited
	if got.Status != owner.StatusApproved || got.DecidedBy != "owner:"+ownerEmail {
		t.Fatalf("waiter saw %s by %q", got.Status, got.DecidedBy)
	}
	grants, _ := e.svc.Grants(ctx, "avk_1", "s_1")
	if len(grants) != 1 || grants[0].Amount == nil || *grants[0].Amount != amt {
		t.Fatalf("grants: %+v", grants)
	}
	// Deciding again says it was already decided.
	if _, body := e.post("/", "/approvals/"+a.ID, url.Values{"decision": {"deny"}}); !strings.Contains(body, "already approved") {
		t.Fatal("second decision not refused")
	}
}

var keyRe = regexp.MustCompile(`avk_[0-9a-f]{16}_[0-9a-f]{64}`)

func TestAPIKeyShownOnceAndOnlyHashStored(t *testing.T) {
	e := newEnv(t)
	e.signIn(ownerPW)
	code, body := e.post("/keys", "/keys", url.Values{"name": {"shopping agent"}, "card": {e.card.ID}, "create_logins": {"on"}})
	if code != 200 {
		t.Fatalf("create: %d", code)
	}
	key := keyRe.FindString(body)
	if key == "" {
		t.Fatal("the new key is not shown")
	}
	info, err := e.svc.Authenticate(context.Background(), key)
	if err != nil || info.Scope.AllCards || len(info.Scope.CardIDs) != 1 || info.Scope.CardIDs[0] != e.card.ID || !info.CanCreateLogins {
		t.Fatalf("the shown key does not authenticate with its scope: %+v %v", info, err)
	}
	secret := key[len("avk_0123456789abcdef_"):]
	if _, body := e.get("/keys"); strings.Contains(body, secret) || !strings.Contains(body, key[:20]) {
		t.Fatal("the key list shows the secret again, or not the key id")
	}
	// The SQLite file (and its WAL) hold the hash, never the secret.
	sum := sha256.Sum256([]byte(secret))
	var all []byte
	for _, p := range []string{e.dbPath, e.dbPath + "-wal"} {
		b, err := os.ReadFile(p)
		if err == nil {
			all = append(all, b...)
		}
	}
	if bytes.Contains(all, []byte(secret)) || bytes.Contains(all, []byte(key)) {
		t.Fatal("the key secret is in the database file")
	}
	if !bytes.Contains(all, sum[:]) {
		t.Fatal("the key's hash is not in the database file")
	}
	// Revoke from the dashboard.
	id := key[:len("avk_0123456789abcdef")]
	if code, _ := e.post("/keys", "/keys/"+id+"/revoke", url.Values{}); code != 200 {
		t.Fatalf("revoke: %d", code)
	}
	if _, err := e.svc.Authenticate(context.Background(), key); err == nil {
		t.Fatal("a revoked key still authenticates")
	}
}

func TestSignInRateLimited(t *testing.T) {
	e := newEnv(t)
	for i := range 5 {
		if code, _ := e.signIn("wrong password " + string(rune('a'+i))); code != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d", i, code)
		}
	}
	// The clock does not move: the next attempt is refused even with the
	// right password.
	if code, body := e.signIn(ownerPW); code != http.StatusTooManyRequests || !strings.Contains(body, "too many failed sign-in attempts") {
		t.Fatalf("sixth attempt: %d", code)
	}
}

func TestPagesNeverShowSecrets(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	// A release writes an audit record the Activity page shows.
	s, err := e.vault.Release(ctx, vault.ReleaseArgs{Org: org, ItemID: e.card.ID, Field: vault.FieldNumber, Destination: "pay.shop.example", Session: "s_1", Actor: "avk_1", Purpose: "substitute"})
	if err != nil {
		t.Fatal(err)
	}
	s.Wipe()
	e.signIn(ownerPW)
	if code, body := e.post("/cards", "/cards/"+e.card.ID, url.Values{"currency": {"eur"}, "daily": {"100"}, "threshold": {"50.00"}, "blocked": {"bad.example\nworse.example"}, "live_cvv": {"on"}}); code != 200 || !strings.Contains(body, "Card rules saved") {
		t.Fatalf("save card rules: %d", code)
	}
	p, _ := e.svc.CardPolicy(ctx, e.card.ID)
	if p.Currency != "EUR" || p.Rules.DailyCap == nil || p.Rules.DailyCap.Minor != 10000 || p.Rules.ApprovalThreshold.Minor != 5000 || !p.Rules.LiveCVV || len(p.Rules.BlockedMerchants) != 2 {
		t.Fatalf("stored rules: %+v", p.Rules)
	}
	if _, body := e.post("/cards", "/cards/"+e.card.ID, url.Values{"currency": {"EUR"}, "daily": {"1.234,5"}}); !strings.Contains(body, "plain decimals") {
		t.Fatal("a malformed limit is not refused")
	}
	for _, path := range []string{"/", "/cards", "/logins", "/keys", "/sites", "/signups", "/activity"} {
		code, body := e.get(path)
		if code != 200 {
			t.Fatalf("%s: %d", path, code)
		}
		for _, secret := range []string{cardNumber, cardCVV + "<", loginPW, "424242424242"} {
			if strings.Contains(body, secret) {
				t.Errorf("%s shows a secret (length %d)", path, len(secret))
			}
		}
		// The Approvals page runs its one same-origin script (live
		// updates); no page carries inline script.
		if path == "/" {
			body = strings.Replace(body, `<script src="/approvals.js"></script>`, "", 1)
		}
		if strings.Contains(body, "<script") {
			t.Errorf("%s carries script", path)
		}
	}
	if err := e.svc.Store().AppendRefusal(ctx, owner.Refusal{Org: org, Time: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC), APIKeyID: "avk_1",
		Session: "s_2", ItemID: e.card.ID, Kind: "card", Field: "number", Site: "bad.example", Code: "merchant_blocked"}); err != nil {
		t.Fatal(err)
	}
	_, body := e.get("/activity")
	for _, want := range []string{"pay.shop.example", "Visa •••• 4242", "merchant_blocked", "bad.example", "Spent this month", "0.00 EUR"} {
		if !strings.Contains(body, want) {
			t.Errorf("activity lacks %q", want)
		}
	}
	if _, body := e.get("/logins"); !strings.Contains(body, "github.com") || !strings.Contains(body, "a•••@example.com") || strings.Contains(body, "ada@example.com") {
		t.Fatal("logins page: site missing or email not masked")
	}
}

// TestP11_DashboardLogsHoldNoSecrets runs sign-ins (wrong and right), key
// creation and revocation, then greps every log line for the password, the
// key secret and the session cookie.
func TestP11_DashboardLogsHoldNoSecrets(t *testing.T) {
	e := newEnv(t)
	e.signIn("a wrong password 123")
	e.signIn(ownerPW)
	_, body := e.post("/keys", "/keys", url.Values{"name": {"agent"}, "all_cards": {"on"}})
	key := keyRe.FindString(body)
	if key == "" {
		t.Fatal("no key shown")
	}
	e.post("/keys", "/keys/"+key[:20]+"/revoke", url.Values{})
	u, _ := url.Parse(e.srv.URL)
	var cookie string
	for _, c := range e.client.Jar.Cookies(u) {
		if c.Name == "__Host-av_session" {
			cookie = c.Value
		}
	}
	logs := e.logs.String()
	if !strings.Contains(logs, "dashboard sign-in") || !strings.Contains(logs, "API key created") {
		t.Fatal("the actions were not logged at all")
	}
	var cs []leakcheck.Canary
	for name, s := range map[string]string{"password": ownerPW, "wrong password": "a wrong password 123", "key secret": key[21:], "cookie": cookie} {
		if len(s) < leakcheck.MinLong {
			t.Fatalf("the %s has %d bytes: too short to be a canary", name, len(s))
		}
		cs = append(cs, leakcheck.Value(name, s))
	}
	leakcheck.New(cs...).Logs(t, "the dashboard's log", []byte(logs))
}

func TestCVVEntryCannotBeApprovedBlind(t *testing.T) {
	e := newEnv(t)
	a, err := e.svc.RequestApproval(context.Background(), owner.ApprovalRequest{Kind: owner.KindCVVEntry, Reason: "cvv_entry", Site: "shop.example", CardID: e.card.ID, Session: "s_1"})
	if err != nil {
		t.Fatal(err)
	}
	e.signIn(ownerPW)
	if _, body := e.get("/"); strings.Contains(body, `value="approve"`) {
		t.Fatal("an approve button is offered for a CVV entry")
	}
	_, body := e.post("/", "/approvals/"+a.ID, url.Values{"decision": {"approve"}})
	if !strings.Contains(body, "cannot be approved without the code") {
		t.Fatal("a forged approve was not refused")
	}
	if got, _ := e.svc.Approval(context.Background(), a.ID); got.Status != owner.StatusPending {
		t.Fatalf("status %s", got.Status)
	}
}

// TestLiveCVVHandedOver types a security code into the approval form: the
// hook gets exactly that value, the approval is approved, and neither the
// page nor the log shows the code.
func TestLiveCVVHandedOver(t *testing.T) {
	const typed = "9174"
	var got vault.Secret
	var gotFor string
	e := newEnv(t, func(c *dashboard.Config) {
		c.LiveCVV = func(_ context.Context, a owner.Approval, cvv vault.Secret) error {
			got, gotFor = vault.NewSecret(cvv.InsecureRawBytes()), a.ID
			return nil
		}
	})
	a, err := e.svc.RequestApproval(context.Background(), owner.ApprovalRequest{Kind: owner.KindCVVEntry, Reason: "cvv_entry", Site: "shop.example", CardID: e.card.ID, Session: "s_1"})
	if err != nil {
		t.Fatal(err)
	}
	e.signIn(ownerPW)
	if _, body := e.post("/", "/approvals/"+a.ID, url.Values{"decision": {"approve"}, "cvv": {"12a"}}); !strings.Contains(body, "3 or 4 digits") {
		t.Fatal("a malformed code was not refused")
	}
	_, body := e.post("/", "/approvals/"+a.ID, url.Values{"decision": {"approve"}, "cvv": {typed}})
	if gotFor != a.ID || !got.Equal(vault.NewSecret([]byte(typed))) {
		t.Fatalf("hook got length %d for %q", got.Len(), gotFor)
	}
	if st, _ := e.svc.Approval(context.Background(), a.ID); st.Status != owner.StatusApproved {
		t.Fatalf("status %s", st.Status)
	}
	// Random ids and durations hold digits by chance: leakcheck reads the
	// code only where a page field or a log attribute could carry it.
	code := leakcheck.New(leakcheck.Value("typed cvv", typed))
	code.Text(t, "the page after the approval", []byte(body))
	code.Logs(t, "the dashboard's log", []byte(e.logs.String()))
}

// TestDefaultKeyListedAndRevocable: proxyd's file key (key_default) shows
// on the API keys page once registered, and the page's revoke ends it.
func TestDefaultKeyListedAndRevocable(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	const fileKey = "avk_00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	if _, err := e.svc.RegisterFileKey(ctx, "key_default", "default (api-key file)", fileKey, owner.Scope{AllCards: true, AllLogins: true}); err != nil {
		t.Fatal(err)
	}
	e.signIn(ownerPW)
	_, body := e.get("/keys")
	if !strings.Contains(body, "key_default") || !strings.Contains(body, "/keys/key_default/revoke") || strings.Contains(body, fileKey[4:]) {
		t.Fatalf("the keys page does not list key_default with a revoke button (or shows its secret)")
	}
	if code, _ := e.post("/keys", "/keys/key_default/revoke", url.Values{}); code != 200 {
		t.Fatalf("revoke: %d", code)
	}
	if _, err := e.svc.AuthenticateFileKey(ctx, "key_default", fileKey); agentvault.ErrorCode(err) != agentvault.CodeKeyRevoked {
		t.Fatalf("after revoke: %v, want key_revoked", err)
	}
}
