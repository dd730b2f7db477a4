package proxyd_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/broker"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/proxyd"
	"github.com/agentvault/agentvault/store/postgres"
	"github.com/agentvault/agentvault/store/postgres/pgtest"
	"github.com/agentvault/agentvault/vault"

	"github.com/agentvault/agentvault/internal/leakcheck"
)

// replicaSet is two proxyd replicas (two Mains in this process, each with
// its own listeners, data directory and pgx pool) on one Postgres schema,
// started at the same moment on an empty database, with the deployment's
// master.key and api-key copied to both (docs/replicas.md). A card usable
// on shop.test and an owner key are in the shared store.
type replicaSet struct {
	dsn      string
	a, b     *proxyd.Main
	logs     []*syncBuf
	ca, cb   *control.Client
	upPort   string
	key      string
	keyID    string
	token    string
	card     vault.Item
	number   string
	password string
}

func (r *replicaSet) page(host, path string) string { return "https://" + host + ":" + r.upPort + path }

// startReplica opens and runs a Main; errors are returned, not fatal, so
// replicas can start from several goroutines.
func startReplica(t *testing.T, c proxyd.Config) (*proxyd.Main, *syncBuf, error) {
	m := proxyd.NewMain()
	m.Config = c
	logs := &syncBuf{}
	m.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(context.Background())
	if err := m.Open(ctx); err != nil {
		cancel()
		return nil, nil, err
	}
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return m, logs, nil
}

func newReplicas(t *testing.T, h http.HandlerFunc, mods ...func(*proxyd.Config)) *replicaSet {
	t.Helper()
	r := &replicaSet{dsn: pgtest.DSN(t), number: strings.Repeat("4242", 4), password: "correct-horse-" + hex.EncodeToString(randBytes(4))}
	up, roots := tlsUpstream(t, h)
	r.upPort = up.URL[strings.LastIndexByte(up.URL, ':')+1:]
	dirs := []string{t.TempDir(), t.TempDir()}
	if _, _, _, err := vault.LoadOrCreateKeyFile(filepath.Join(dirs[0], "master.key")); err != nil {
		t.Fatal(err)
	}
	apiKey := "avk_" + hex.EncodeToString(randBytes(32)) + "\n"
	for _, d := range dirs {
		mk, err := os.ReadFile(filepath.Join(dirs[0], "master.key"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "master.key"), mk, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, proxyd.APIKeyFile), []byte(apiKey), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mains := make([]*proxyd.Main, 2)
	r.logs = make([]*syncBuf, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, d := range dirs {
		c := proxyd.DefaultConfig()
		c.DataDir = d
		c.Listen = proxyd.ListenConfig{Proxy: "127.0.0.1:0", Control: "127.0.0.1:0", Admin: "127.0.0.1:0"}
		c.UnsafeAllowPrivateRanges = true
		c.TLS.ExtraRoots = []string{roots}
		c.Store = proxyd.StoreConfig{Driver: "postgres", DSN: r.dsn}
		c.UnsafeTestHosts = map[string]string{"shop.test": "127.0.0.1", "pay.test": "127.0.0.1"}
		for _, mod := range mods {
			mod(&c)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			mains[i], r.logs[i], errs[i] = startReplica(t, c)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("replicas starting together: %v", err)
	}
	r.a, r.b = mains[0], mains[1]
	// Two replicas started at once on an empty Postgres: one MITM CA.
	if string(r.a.CA.CertPEM()) != string(r.b.CA.CertPEM()) {
		t.Fatal("the replicas started with two MITM CAs")
	}
	ctx := context.Background()
	var err error
	if r.card, err = r.a.Vault.AddCard(ctx, proxyd.DefaultOrg, "owner", vault.CardInput{Number: vault.NewSecret([]byte(r.number)),
		CVV: vault.NewSecret([]byte("737")), ExpiryMonth: 12, ExpiryYear: 2031, Sites: []string{"shop.test"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.b.Vault.AddLogin(ctx, proxyd.DefaultOrg, "owner", vault.LoginInput{Site: "shop.test", Username: "ann",
		Password: vault.NewSecret([]byte(r.password))}); err != nil {
		t.Fatal(err)
	}
	if err := r.a.Owner.AuthorizeSite(ctx, "shop.test", "test"); err != nil {
		t.Fatal(err)
	}
	k, key, err := r.b.Owner.CreateAPIKey(ctx, "agent", owner.Scope{AllCards: true, AllLogins: true})
	if err != nil {
		t.Fatal(err)
	}
	r.key, r.keyID = key, k.ID
	r.ca = control.NewClient("http://"+r.a.ControlAddr.String(), r.a.ControlToken, nil)
	r.cb = control.NewClient("http://"+r.b.ControlAddr.String(), r.b.ControlToken, nil)
	cat, err := r.ca.Catalog(ctx, key, "")
	if err != nil {
		t.Fatal(err)
	}
	r.token = tokenOf(t, cat, "av_card_1_number_")
	t.Cleanup(func() {
		real := leakcheck.New(leakcheck.Value("card number", r.number), leakcheck.Value("password", r.password))
		for i, l := range r.logs {
			real.Logs(t, fmt.Sprintf("replica %d's log", i), []byte(l.String()))
		}
	})
	return r
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// via returns a proxy client for session s through replica m's proxy
// listener (the session's own credentials, whichever replica made it).
func via(m *proxyd.Main, s control.CreateSessionResponse) *http.Client {
	s.ProxyURL = (&url.URL{Scheme: "http", Host: m.ProxyAddr.String()}).String()
	return proxyClient(m, s)
}

// post sends body and returns the refusal code ("" when forwarded).
func post(t *testing.T, hc *http.Client, u, body string) string {
	t.Helper()
	resp, err := hc.Post(u, "application/x-www-form-urlencoded", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.Header.Get("X-Agentvault-Code")
}

func (r *replicaSet) session(t *testing.T, c *control.Client) control.CreateSessionResponse {
	t.Helper()
	s, err := c.CreateSession(context.Background(), r.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (r *replicaSet) authorize(t *testing.T, c *control.Client, s control.CreateSessionResponse, token string, total *control.OrderTotal) (string, error) {
	t.Helper()
	a, err := c.Authorize(context.Background(), s.ID, control.AuthorizeRequest{Token: token, PageURL: r.page("shop.test", "/pay"), OrderTotal: total})
	return a.Value, err
}

// releases counts the audited releases on the wire of session id.
func (r *replicaSet) releases(t *testing.T, id string) int {
	t.Helper()
	st, err := postgres.Open(context.Background(), r.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, err := st.QueryAudit(context.Background(), vault.AuditFilter{Action: vault.AuditRelease, Session: id})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, rec := range recs {
		if rec.Purpose == broker.PurposeSubstitute {
			n++
		}
	}
	return n
}

// TestReplicas_SessionMovesBetweenReplicas: a session created and
// authorized on A carries its stand-in through B's proxy listener (CONNECT
// with the session's proxy credentials): released once, audited once.
func TestReplicas_SessionMovesBetweenReplicas(t *testing.T) {
	rec := &recorder{}
	r := newReplicas(t, rec.handle)
	s := r.session(t, r.ca)
	si, err := r.authorize(t, r.ca, s, r.token, nil)
	if err != nil {
		t.Fatal(err)
	}
	if code := post(t, via(r.b, s), r.page("shop.test", "/pay"), "cc="+si); code != "" {
		t.Fatalf("the moved session's purchase was refused on B: %s", code)
	}
	if got := rec.all(); len(got) != 1 || got[0] != "cc="+r.number {
		t.Fatalf("the site got %d requests, want the real number once", len(got))
	}
	if n := r.releases(t, s.ID); n != 1 {
		t.Fatalf("%d audited releases, want 1", n)
	}
	// Wrong credentials are refused on B as on A.
	bad := s
	bad.ProxyPassword = "not-the-password"
	if _, err := via(r.b, bad).Get(r.page("shop.test", "/x")); err == nil {
		t.Fatal("B accepted a wrong proxy password for a moved session")
	}
}

// TestReplicas_SessionCapPerKeyHoldsAcrossReplicas: a key's open sessions
// are counted in the store, so the cap holds for the deployment, not per
// replica; a session closed on either replica frees its place.
func TestReplicas_SessionCapPerKeyHoldsAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	r := newReplicas(t, (&recorder{}).handle, func(c *proxyd.Config) { c.Limits.MaxSessionsPerKey = 3 })
	first := r.session(t, r.ca)
	r.session(t, r.cb)
	r.session(t, r.ca)
	for name, c := range map[string]*control.Client{"A": r.ca, "B": r.cb} {
		if _, err := c.CreateSession(ctx, r.key); agentvault.ErrorCode(err) != agentvault.CodeTooManySessions {
			t.Fatalf("a fourth session on %s: %v, want too_many_sessions", name, err)
		}
	}
	if _, err := r.cb.CloseSession(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.cb.CreateSession(ctx, r.key); err != nil {
		t.Fatalf("a session after one was closed: %v", err)
	}
	if _, err := r.ca.CreateSession(ctx, r.key); agentvault.ErrorCode(err) != agentvault.CodeTooManySessions {
		t.Fatalf("past the cap again: %v, want too_many_sessions", err)
	}
}

// TestP21_RevokeOnOneReplicaStopsReleaseOnAnother: a grant made on B, an
// owner action or a session close on A; the next release through B's
// already open tunnel is refused within a second.
func TestP21_RevokeOnOneReplicaStopsReleaseOnAnother(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		login bool
		act   func(r *replicaSet, s control.CreateSessionResponse) error
		want  agentvault.Code
	}{
		{"revoke the key", false, func(r *replicaSet, _ control.CreateSessionResponse) error { return r.a.Owner.Revoke(ctx, r.keyID) }, agentvault.CodeKeyRevoked},
		{"pause the card", false, func(r *replicaSet, _ control.CreateSessionResponse) error {
			p, err := r.a.Owner.CardPolicy(ctx, r.card.ID)
			if err != nil {
				return err
			}
			p.Rules.Paused = true
			return r.a.Owner.SetCardPolicy(ctx, p, "test")
		}, agentvault.CodeCardPaused},
		{"close the session", false, func(r *replicaSet, s control.CreateSessionResponse) error {
			_, err := r.ca.CloseSession(ctx, s.ID)
			return err
		}, agentvault.CodeSessionEnded},
		// A login grant has no claim in the store: B learns the end from
		// the notification.
		{"close the session of a login grant", true, func(r *replicaSet, s control.CreateSessionResponse) error {
			_, err := r.ca.CloseSession(ctx, s.ID)
			return err
		}, agentvault.CodeSessionEnded},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := &recorder{}
			r := newReplicas(t, rec.handle)
			s := r.session(t, r.cb)
			token, field, value := r.token, "cc=", r.number
			if c.login {
				cat, _ := r.cb.Catalog(ctx, r.key, "")
				token = regexp.MustCompile(`av_login_[a-z0-9_]+_password_[a-z0-9]{5}`).FindString(string(cat))
				field, value = "pw=", r.password
			}
			si, err := r.authorize(t, r.cb, s, token, nil)
			if err != nil {
				t.Fatal(err)
			}
			hc := via(r.b, s)
			if code := post(t, hc, r.page("shop.test", "/warm"), "nothing"); code != "" {
				t.Fatalf("plain request refused: %s", code)
			}
			if c.login {
				// The login grant works through B before.
				if code := post(t, hc, r.page("shop.test", "/login"), field+si); code != "" {
					t.Fatalf("login before: %s", code)
				}
			}
			sent := len(rec.all())
			if err := c.act(r, s); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(time.Second)
			for {
				code := post(t, hc, r.page("shop.test", "/pay"), field+si)
				if code == string(c.want) {
					break
				}
				if code != "" && !c.login {
					t.Fatalf("after %s on A: code %q through B, want %q", c.name, code, c.want)
				}
				if time.Now().After(deadline) {
					t.Fatalf("a release through B still went out a second after %s on A", c.name)
				}
			}
			if !c.login {
				for _, b := range rec.all()[sent:] {
					if strings.Contains(b, value) {
						t.Fatal("the card reached the site through B after A ended the grant")
					}
				}
			}
		})
	}
}

// TestP18_TwoReplicasRaceForCap: sessions made on one replica, authorized
// on the other and paying through either race for one card's daily cap:
// exactly the cap is spent, counted once per purchase.
func TestP18_TwoReplicasRaceForCap(t *testing.T) {
	rec := &recorder{}
	r := newReplicas(t, rec.handle)
	ctx := context.Background()
	p, err := r.a.Owner.CardPolicy(ctx, r.card.ID)
	if err != nil {
		t.Fatal(err)
	}
	p.Currency = "EUR"
	daily := mustAmount(t, "100.00", "EUR")
	p.Rules.DailyCap = &daily
	if err := r.a.Owner.SetCardPolicy(ctx, p, "test"); err != nil {
		t.Fatal(err)
	}
	replicas := []*proxyd.Main{r.a, r.b}
	clients := []*control.Client{r.ca, r.cb}
	const workers = 12
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted := 0
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := clients[i%2].CreateSession(ctx, r.key)
			if err != nil {
				t.Error(err)
				return
			}
			hc := via(replicas[(i/2)%2], s)
			for {
				a, err := clients[(i+1)%2].Authorize(ctx, s.ID, control.AuthorizeRequest{Token: r.token,
					PageURL: r.page("shop.test", "/pay"), OrderTotal: &control.OrderTotal{Amount: "10.00", Currency: "EUR"}})
				if agentvault.ErrorCode(err) == agentvault.CodeDailyLimit {
					return
				}
				if err != nil {
					t.Errorf("authorize: %v", err)
					return
				}
				resp, err := hc.Post(r.page("shop.test", "/pay"), "application/x-www-form-urlencoded", strings.NewReader("cc="+a.Value))
				if err != nil {
					t.Errorf("pay: %v", err)
					return
				}
				resp.Body.Close()
				if code := resp.Header.Get("X-Agentvault-Code"); code != "" {
					t.Errorf("purchase refused: %s", code)
					return
				}
				mu.Lock()
				accepted++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	paid := 0
	for _, b := range rec.all() {
		if b == "cc="+r.number {
			paid++
		}
	}
	t.Logf("%d purchases went upstream with the card, %d requests forwarded", paid, accepted)
	if paid != 10 {
		t.Fatalf("the site got the card %d times (%d requests forwarded); the cap allows exactly 10", paid, accepted)
	}
	st, err := postgres.Open(ctx, r.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	today, _, err := st.Spent(ctx, r.card.ID, r.b.Owner.Day(now), r.b.Owner.Month(now), "EUR")
	if err != nil || today.Minor != 10000 {
		t.Fatalf("ledger: %+v, %v; want exactly 100.00 EUR", today, err)
	}
}

// TestP10_RecipientsShareAcrossReplicas: once A sent the card to shop.test,
// shop.test's echo through B comes back scrubbed, in a session that never
// authorized it; pay.test, never sent the card, gets its bytes unchanged
// (no oracle).
func TestP10_RecipientsShareAcrossReplicas(t *testing.T) {
	number := strings.Repeat("4242", 4)
	echo := "your card: " + number + " (on file)"
	r := newReplicas(t, func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.Copy(io.Discard, req.Body)
		_, _ = io.WriteString(w, echo)
	})
	get := func(hc *http.Client, u string) string {
		t.Helper()
		resp, err := hc.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	watcher := r.session(t, r.cb)
	hb := via(r.b, watcher)
	// B has read the recipients (none yet): the echo passes as it is.
	if got := get(hb, r.page("shop.test", "/echo")); got != echo {
		t.Fatalf("before any release B changed the echo: %q", got)
	}
	buyer := r.session(t, r.ca)
	si, err := r.authorize(t, r.ca, buyer, r.token, nil)
	if err != nil {
		t.Fatal(err)
	}
	if code := post(t, via(r.a, buyer), r.page("shop.test", "/pay"), "cc="+si); code != "" {
		t.Fatalf("purchase refused: %s", code)
	}
	deadline := time.Now().Add(time.Second)
	for {
		got := get(hb, r.page("shop.test", "/echo"))
		if !strings.Contains(got, number) {
			if !strings.HasPrefix(got, "your card: ") || len(got) != len(echo) {
				t.Fatalf("scrubbed echo %q is not the page with a stand-in", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("B still lets shop.test echo the card a second after A sent it there")
		}
	}
	if got := get(hb, r.page("pay.test", "/echo")); got != echo {
		t.Fatalf("a host never sent the card got a changed page: %q", got)
	}
}

// TestP21_OnePurchaseGrantAcrossReplicas: a card grant spent through A is
// refused through B; while a request holding it is in flight on A, B
// refuses it (grant_in_use): exactly one request goes upstream.
func TestP21_OnePurchaseGrantAcrossReplicas(t *testing.T) {
	var mu sync.Mutex
	var got []string
	arrived, release := make(chan struct{}, 4), make(chan struct{})
	r := newReplicas(t, func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		mu.Lock()
		got = append(got, string(b))
		mu.Unlock()
		if req.URL.Path == "/slowpay" {
			arrived <- struct{}{}
			<-release
		}
		_, _ = w.Write([]byte("ok"))
	})
	sent := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }

	s := r.session(t, r.ca)
	si, err := r.authorize(t, r.ca, s, r.token, nil)
	if err != nil {
		t.Fatal(err)
	}
	if code := post(t, via(r.a, s), r.page("shop.test", "/pay"), "cc="+si); code != "" {
		t.Fatalf("purchase through A refused: %s", code)
	}
	if code := post(t, via(r.b, s), r.page("shop.test", "/pay"), "cc="+si); code != string(agentvault.CodeGrantUsed) {
		t.Fatalf("the spent grant through B: code %q, want grant_used", code)
	}
	if n := sent(); n != 1 {
		t.Fatalf("the site got %d requests, want 1", n)
	}

	// Concurrent: A's request holds the grant while B tries it.
	s2 := r.session(t, r.cb)
	si2, err := r.authorize(t, r.cb, s2, r.token, nil)
	if err != nil {
		t.Fatal(err)
	}
	aCode := make(chan string, 1)
	go func() {
		resp, err := via(r.a, s2).Post(r.page("shop.test", "/slowpay"), "application/x-www-form-urlencoded", strings.NewReader("cc="+si2))
		if err != nil {
			aCode <- "error: " + err.Error()
			return
		}
		resp.Body.Close()
		aCode <- resp.Header.Get("X-Agentvault-Code")
	}()
	<-arrived
	if code := post(t, via(r.b, s2), r.page("shop.test", "/pay"), "cc="+si2); code != string(agentvault.CodeGrantInUse) {
		close(release)
		t.Fatalf("B during A's request: code %q, want grant_in_use", code)
	}
	close(release)
	if code := <-aCode; code != "" {
		t.Fatalf("A's request: %s", code)
	}
	if code := post(t, via(r.b, s2), r.page("shop.test", "/pay"), "cc="+si2); code != string(agentvault.CodeGrantUsed) {
		t.Fatalf("B after A's accepted request: code %q, want grant_used", code)
	}
	if n := sent(); n != 2 {
		t.Fatalf("the site got %d requests, want 2 (one per purchase)", n)
	}
}

// TestReplicas_SQLiteRestartKeepsSessions: on the embedded store a
// restarted proxyd keeps its sessions and grants: the browser's proxy
// credentials and the stand-in typed before the restart still work, once.
func TestReplicas_SQLiteRestartKeepsSessions(t *testing.T) {
	rec := &recorder{}
	up, roots := tlsUpstream(t, rec.handle)
	number := strings.Repeat("4242", 4)
	dir := t.TempDir()
	mod := func(c *proxyd.Config) {
		c.DataDir = dir
		c.UnsafeTestHosts = map[string]string{"shop.test": "127.0.0.1"}
		c.Policy.AuthorizedDestinations = []string{"shop.test"}
	}
	page := "https://shop.test" + up.URL[strings.LastIndexByte(up.URL, ':'):] + "/pay"
	ctx := context.Background()
	m, _ := startMain(t, roots, mod)
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
	a, err := c.Authorize(ctx, s.ID, control.AuthorizeRequest{Token: tokenOf(t, cat, "av_card_1_number_"), PageURL: page})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m2, _ := startMain(t, roots, mod)
	if code := post(t, via(m2, s), page, "cc="+a.Value); code != "" {
		t.Fatalf("the stand-in typed before the restart was refused: %s", code)
	}
	if code := post(t, via(m2, s), page, "cc="+a.Value); code != string(agentvault.CodeGrantUsed) {
		t.Fatalf("second use after the restart: code %q, want grant_used", code)
	}
	if got := rec.all(); len(got) != 1 || got[0] != "cc="+number {
		t.Fatalf("the site got %d requests, want the card once", len(got))
	}
	// Closed after the restart: the credentials stop working.
	c2 := control.NewClient("http://"+m2.ControlAddr.String(), m2.ControlToken, nil)
	if _, err := c2.CloseSession(ctx, s.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := via(m2, s).Get(page); err == nil {
		t.Fatal("a closed session's credentials still open tunnels")
	}
}

// TestP21_NewGrantUsableAtOnceOnOtherReplica: an authorize answers only
// once the other replica has marked the session to be read again, so the
// request carrying the stand-in, sent the moment the answer arrives, is
// released on the other replica: never a stand-in forwarded unrecognised,
// never a grant_used from a stale copy. Each round is a new purchase
// (authorize on A, pay through B), in a session B already holds.
func TestP21_NewGrantUsableAtOnceOnOtherReplica(t *testing.T) {
	rec := &recorder{}
	r := newReplicas(t, rec.handle)
	s := r.session(t, r.ca)
	const rounds = 100
	for i := range rounds {
		// Authorize on A and pay through B, then the other way round.
		ctl, other := r.ca, r.b
		if i%2 == 1 {
			ctl, other = r.cb, r.a
		}
		si, err := r.authorize(t, ctl, s, r.token, nil)
		if err != nil {
			t.Fatalf("round %d: authorize: %v", i, err)
		}
		if code := post(t, via(other, s), r.page("shop.test", "/pay"), "cc="+si); code != "" {
			t.Fatalf("round %d: the purchase was refused on the other replica: %s", i, code)
		}
	}
	got := rec.all()
	if len(got) != rounds {
		t.Fatalf("the site got %d requests for %d purchases", len(got), rounds)
	}
	for i, g := range got {
		if g != "cc="+r.number {
			t.Fatalf("request %d reached the site without the real number (a stand-in forwarded unrecognised)", i)
		}
	}
}
