package proxyd_test

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentvault/agentvault/authz"
	"github.com/agentvault/agentvault/credentials"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/proxyd"
)

// TestP24_EveryRouteAndCommandHasOneRule: every route proxyd serves on the
// dashboard and the control API (the credential-use listener's included)
// and every CLI command has exactly its entry in authz's table, and the
// table names nothing that is not served. A new route or command without
// a rule fails here (and refuses to register at start-up).
func TestP24_EveryRouteAndCommandHasOneRule(t *testing.T) {
	m, _ := startMain(t, "", func(c *proxyd.Config) {
		c.Listen.Dashboard = "127.0.0.1:0"
		c.Listen.Credentials = "127.0.0.1:0"
	})
	dash, ctl := m.Routes()
	same := func(what string, served, table []string) {
		t.Helper()
		slices.Sort(served)
		for i := 1; i < len(served); i++ {
			if served[i] == served[i-1] {
				t.Errorf("%s: %q registered twice", what, served[i])
			}
		}
		for _, s := range served {
			if !slices.Contains(table, s) {
				t.Errorf("%s: %q is served but has no rule in authz", what, s)
			}
		}
		for _, e := range table {
			if !slices.Contains(served, e) {
				t.Errorf("%s: authz has a rule for %q, which nothing serves", what, e)
			}
		}
	}
	same("dashboard", dash, authz.Entries(authz.Dashboard))
	same("control", ctl, authz.Entries(authz.Control))
	same("cli", proxyd.CLICommands(), authz.Entries(authz.CLI))
	if len(dash) < 40 || len(ctl) < 25 {
		t.Fatalf("too few routes read (%d dashboard, %d control): the listing is broken", len(dash), len(ctl))
	}
}

// signInAs signs email in to Main's dashboard over TLS from the loopback
// address local ("" for the default).
func signInAs(t *testing.T, m *proxyd.Main, email, pw, local string) (*dashClient, int) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	if local != "" {
		dialer.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	d := &dashClient{t: t, base: "https://" + m.DashboardAddr.String(),
		hc: &http.Client{Jar: jar, Transport: &http.Transport{DialContext: dialer.DialContext, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}}
	m2 := csrfRe.FindStringSubmatch(d.do(http.MethodGet, "/signin", nil))
	if m2 == nil {
		t.Fatal("the sign-in page has no CSRF token")
	}
	req, _ := http.NewRequest(http.MethodPost, d.base+"/signin", strings.NewReader(url.Values{"email": {email}, "password": {pw}, "csrf": {m2[1]}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	d.hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := d.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	d.hc.CheckRedirect = nil
	return d, resp.StatusCode
}

// status sends a request without following redirects and returns the
// status, the Location and the body.
func (d *dashClient) status(method, path string, form url.Values) (int, string, string) {
	d.t.Helper()
	var req *http.Request
	if form != nil {
		req, _ = http.NewRequest(method, d.base+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		req, _ = http.NewRequest(method, d.base+path, nil)
	}
	c := *d.hc
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, resp.Header.Get("Location"), b.String()
}

type people struct {
	m                 *proxyd.Main
	owner, admin, mem string
}

const peoplePW = "a long shared test passphrase 42"

// newPeople starts proxyd with its dashboard and makes three accounts: the
// owner (no membership record: an owner), an admin and a member.
func newPeople(t *testing.T) *people {
	t.Helper()
	m, _ := startMain(t, "", func(c *proxyd.Config) { c.Listen.Dashboard = "127.0.0.1:0" })
	p := &people{m: m, owner: "owner@example.org", admin: "admin@example.org", mem: "member@example.org"}
	ctx := context.Background()
	for _, e := range []string{p.owner, p.admin, p.mem} {
		if err := m.Owner.SetOwnerPassword(ctx, e, peoplePW); err != nil {
			t.Fatal(err)
		}
	}
	by, err := m.Credentials.PrincipalFor(ctx, proxyd.DefaultOrg, p.owner)
	if err != nil {
		t.Fatal(err)
	}
	for _, mm := range []credentials.Member{{Org: proxyd.DefaultOrg, User: p.admin, Role: credentials.RoleAdmin}, {Org: proxyd.DefaultOrg, User: p.mem, Role: credentials.RoleMember}} {
		if err := m.Credentials.PutMember(ctx, by, mm); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// fill puts placeholder values into a route pattern's wildcards.
func fill(pattern string) (method, path string) {
	method, path, _ = strings.Cut(pattern, " ")
	path = strings.ReplaceAll(path, "{$}", "")
	for _, w := range []string{"{id}", "{token}"} {
		path = strings.ReplaceAll(path, w, "x1")
	}
	return method, path
}

// TestP24_DashboardMemberHasNoOwnerPowers: a member signed in over TLS
// gets 403, naming who can, on every page and form of the owner's side
// (the home page sends them to their credentials), and none of the
// attempts changes anything: no key, no site, no decided approval.
func TestP24_DashboardMemberHasNoOwnerPowers(t *testing.T) {
	p := newPeople(t)
	ctx := context.Background()
	d, code := signInAs(t, p.m, p.mem, peoplePW, "")
	if code != http.StatusSeeOther {
		t.Fatalf("member sign-in: %d", code)
	}
	keysBefore, _ := p.m.Owner.APIKeys(ctx)
	st, _, page := d.status(http.MethodGet, "/credentials", nil)
	if st != http.StatusOK {
		t.Fatalf("the member's credentials page: %d", st)
	}
	for _, link := range []string{`href="/cards"`, `href="/keys"`, `href="/sites"`, `href="/activity"`, `href="/apps"`, `href="/delegation"`} {
		if strings.Contains(page, link) {
			t.Errorf("the member's menu links %s", link)
		}
	}
	csrf := csrfRe.FindStringSubmatch(page)
	if csrf == nil {
		t.Fatal("no CSRF token on the member's page")
	}
	checked := 0
	for _, e := range authz.Entries(authz.Dashboard) {
		r, _ := authz.Lookup(authz.Dashboard, e)
		if r.Level != authz.OwnerOnly {
			continue
		}
		method, path := fill(e)
		var form url.Values
		if method == http.MethodPost {
			form = url.Values{"csrf": {csrf[1]}, "host": {"evil.test"}, "name": {"stolen"}, "cards": {"all"}, "logins": {"all"}}
		}
		st, loc, body := d.status(method, path, form)
		checked++
		if e == "GET /{$}" {
			if st != http.StatusSeeOther || loc != "/credentials" {
				t.Errorf("%s: %d to %q, want the member sent to /credentials", e, st, loc)
			}
			continue
		}
		if st != http.StatusForbidden || !strings.Contains(body, "only the owner may") {
			t.Errorf("%s: %d, want 403 saying who can", e, st)
		}
	}
	if checked < 40 {
		t.Fatalf("only %d owner routes checked", checked)
	}
	keysAfter, _ := p.m.Owner.APIKeys(ctx)
	if len(keysAfter) != len(keysBefore) {
		t.Error("the member created an API key")
	}
	sites, _ := p.m.Owner.Sites(ctx)
	for _, s := range sites {
		if strings.Contains(s.Host, "evil.test") {
			t.Error("the member authorized a site")
		}
	}
	if as, _ := p.m.Owner.Approvals(ctx, owner.ApprovalFilter{Limit: 10}); len(as) != 0 {
		t.Errorf("approvals appeared: %d", len(as))
	}
}

// TestP24_AdminHasOnlyWhatTheOwnerDelegated: an admin has none of the
// owner's powers until the owner delegates an area on /delegation, then
// exactly that area; only owners reach the delegation page.
func TestP24_AdminHasOnlyWhatTheOwnerDelegated(t *testing.T) {
	p := newPeople(t)
	admin, _ := signInAs(t, p.m, p.admin, peoplePW, "")
	if st, _, _ := admin.status(http.MethodGet, "/cards", nil); st != http.StatusForbidden {
		t.Fatalf("admin on /cards before any delegation: %d", st)
	}
	if st, _, _ := admin.status(http.MethodGet, "/delegation", nil); st != http.StatusForbidden {
		t.Fatalf("admin on /delegation: %d", st)
	}
	if st, _, _ := admin.status(http.MethodGet, "/credentials", nil); st != http.StatusOK {
		t.Fatalf("admin on /credentials: %d", st)
	}
	ownerC, _ := signInAs(t, p.m, p.owner, peoplePW, "")
	ownerC.post("/delegation", "/delegation", url.Values{"area": {string(authz.Cards)}})
	if st, _, _ := admin.status(http.MethodGet, "/cards", nil); st != http.StatusOK {
		t.Fatalf("admin on /cards after the owner delegated cards: %d", st)
	}
	for _, path := range []string{"/keys", "/sites", "/activity", "/"} {
		st, _, _ := admin.status(http.MethodGet, path, nil)
		if st == http.StatusOK {
			t.Errorf("admin on %s with only cards delegated: %d", path, st)
		}
	}
	// The owner takes it back.
	ownerC.post("/delegation", "/delegation", url.Values{})
	if st, _, _ := admin.status(http.MethodGet, "/cards", nil); st != http.StatusForbidden {
		t.Fatalf("admin on /cards after the owner withdrew it: %d", st)
	}
}

// TestP24_StrangerCannotLockTheOwnerOut: failed sign-ins with the owner's
// email from another address never block the owner's right password, and
// the owner's own successful sign-ins are never counted.
func TestP24_StrangerCannotLockTheOwnerOut(t *testing.T) {
	p := newPeople(t)
	for i := range 12 {
		if _, code := signInAs(t, p.m, p.owner, "wrong guess number "+string(rune('a'+i)), "127.0.0.2"); code != http.StatusUnauthorized && code != http.StatusTooManyRequests {
			t.Fatalf("stranger attempt %d: %d", i, code)
		}
	}
	if _, code := signInAs(t, p.m, p.owner, peoplePW, "127.0.0.2"); code != http.StatusTooManyRequests {
		t.Fatalf("the stranger's address is not slowed down: %d", code)
	}
	for i := range 8 {
		if _, code := signInAs(t, p.m, p.owner, peoplePW, "127.0.0.1"); code != http.StatusSeeOther {
			t.Fatalf("owner sign-in %d from their own address: %d", i, code)
		}
	}
}
