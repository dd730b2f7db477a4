package intercept_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base32"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/broker"
	"github.com/agentvault/agentvault/intercept/rewrite"
	"github.com/agentvault/agentvault/store/sqlite"
	"github.com/agentvault/agentvault/vault"
)

// realVault adapts a *vault.Vault over a temp SQLite file to the proxy's
// Vault interface (what proxyd does in production).
type realVault struct{ v *vault.Vault }

func (r realVault) List(ctx context.Context, org string) ([]vault.Item, error) {
	return r.v.List(ctx, org)
}

func (r realVault) GetByLabel(ctx context.Context, org string, k vault.Kind, label string) (vault.Item, error) {
	return r.v.GetByLabel(ctx, org, k, label)
}

func (r realVault) Release(ctx context.Context, a broker.ReleaseArgs) (vault.Secret, error) {
	return r.v.Release(ctx, vault.ReleaseArgs{Org: a.Org, ItemID: a.ItemID, Field: a.Field,
		Destination: a.Destination, Session: a.Session, Actor: a.Actor, Purpose: a.Purpose})
}

// siteTOTP is the site's own RFC 6238 check (HMAC-SHA1, 30 s, 6 digits),
// written from the RFC, not shared with the vault: it accepts the code of
// the step before, of and after now, as sites do for clock skew.
func siteTOTP(key []byte, now time.Time, code string) bool {
	step := now.Unix() / 30
	for _, c := range []int64{step - 1, step, step + 1} {
		var msg [8]byte
		binary.BigEndian.PutUint64(msg[:], uint64(c))
		m := hmac.New(sha1.New, key)
		m.Write(msg[:])
		h := m.Sum(nil)
		off := h[19] & 0xf
		v := (uint32(h[off])&0x7f)<<24 | uint32(h[off+1])<<16 | uint32(h[off+2])<<8 | uint32(h[off+3])
		if fmt.Sprintf("%06d", v%1000000) == code {
			return true
		}
	}
	return false
}

// TestP23_TOTPLoginAgainstSiteThatChecksTheCode: a login with a TOTP seed
// in a real vault; the agent authorizes the totp token and posts the
// stand-in; the proxy puts the code of the moment on the wire, the site
// verifies it against the seed and lets the user in, and nothing the site
// received holds the seed in any form. The release is audited with the
// HMAC of the code the site got.
func TestP23_TOTPLoginAgainstSiteThatChecksTheCode(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "vault.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	mk := make([]byte, 32)
	rand.Read(mk)
	v, err := vault.Open(ctx, vault.Config{Store: st, MasterKey: mk})
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 20)
	rand.Read(key)
	seed := base32.StdEncoding.EncodeToString(key) // 32 characters, no padding for 20 bytes
	// The owner pasted the seed the way set-up screens show it.
	shown := strings.ToLower(strings.Join([]string{seed[:8], seed[8:16], seed[16:24], seed[24:]}, " "))
	it, err := v.AddLogin(ctx, "org1", "owner", vault.LoginInput{Site: "example.com", Username: "grace",
		Password: vault.NewSecret([]byte("Cobol-1959!")), TOTP: vault.NewSecret([]byte(shown))})
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var accepted []string
	e := startProxyWith(t, func(c *broker.Config) { c.Vault = realVault{v} }, nil)
	sessions := e.sessions
	up := startUpstream(t, e.upCA, func(w http.ResponseWriter, r *http.Request) {
		code := r.PostFormValue("otp")
		if r.PostFormValue("user") != "grace" || !siteTOTP(key, time.Now(), code) {
			http.Error(w, "wrong code", http.StatusUnauthorized)
			return
		}
		mu.Lock()
		accepted = append(accepted, code)
		mu.Unlock()
		_, _ = w.Write([]byte("welcome, grace"))
	})
	s, pw, err := sessions.Create(ctx, "avk_test")
	if err != nil {
		t.Fatal(err)
	}
	page := hostURL(up, "login.example.com", "/login")
	a, err := sessions.Authorize(ctx, s, broker.AuthorizeRequest{Token: tok("login", it.Label, "totp"), PageURL: page})
	if err != nil {
		t.Fatal(err)
	}
	if !a.StandIn || len(a.Value) != 6 {
		t.Fatalf("authorize gave no 6-digit stand-in: standIn=%v len=%d", a.StandIn, len(a.Value))
	}
	client := e.client(s, pw, false)
	resp, err := client.PostForm(page, url.Values{"user": {"grace"}, "otp": {a.Value}})
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || body != "welcome, grace" {
		t.Fatalf("the site refused the login: %d %q (code %q)", resp.StatusCode, body, codeOf(resp))
	}
	mu.Lock()
	if len(accepted) != 1 || accepted[0] == a.Value {
		mu.Unlock()
		t.Fatalf("the site accepted %d codes; the stand-in reached it: %v", len(accepted), len(accepted) > 0 && accepted[0] == a.Value)
	}
	code := accepted[0]
	mu.Unlock()

	// The seed never went on the wire, in any spelling.
	needles := [][]byte{[]byte(seed), []byte(strings.ToLower(seed)), []byte(seed[:16]), []byte(shown[:9]), key}
	up.mu.Lock()
	defer up.mu.Unlock()
	for i, rec := range up.got {
		wire := []byte(rec.Method + " " + rec.RequestURI + "\n")
		for k, vs := range rec.Header {
			wire = append(wire, k+": "+strings.Join(vs, ", ")+"\n"...)
		}
		wire = append(wire, rec.Body...)
		for j, n := range needles {
			if bytes.Contains(wire, n) {
				t.Fatalf("request %d to the site holds the seed (needle #%d)", i, j)
			}
		}
	}

	// Audited as a release, with the HMAC of the code the site received.
	recs, err := v.Audit(ctx, vault.AuditFilter{ItemID: it.ID, Action: vault.AuditRelease})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, r := range recs {
		if r.Field == vault.FieldTOTP && r.Purpose == broker.PurposeSubstitute && r.Destination == "login.example.com" &&
			bytes.Equal(r.ValueHMAC, v.AuditHMAC(vault.NewSecret([]byte(code)))) {
			found = true
		}
		if bytes.Equal(r.ValueHMAC, v.AuditHMAC(vault.NewSecret([]byte(seed)))) {
			t.Fatal("an audit record holds the seed's HMAC: the seed was released")
		}
	}
	if !found {
		t.Fatalf("no substitute release of the TOTP code audited (%d release records)", len(recs))
	}
}

// TestP24_TOTPCaptureThroughTheProxy: a session signed in as a login arms
// a capture the way declare_page_hint does, over a real proxy listener and
// a TLS site. A page of the same site that echoes its query (a search
// page) is not read while the capture waits for the enrolment page: it
// reaches the client as the site sent it and the capture stays armed; the
// enrolment page is read and masked. A capture declared on the echoing page
// itself, or on a page that echoes the request's Referer or a cookie a
// page script set, refuses the echoed text (totp_seed_untrusted) and sends
// the page on unmasked.
func TestP24_TOTPCaptureThroughTheProxy(t *testing.T) {
	ctx := context.Background()
	const (
		siteSeed  = "MFRGGZDFMZTWQ2LKNNWG23TPOBYXE43U"
		agentSeed = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"
	)
	e := startProxy(t, nil)
	e.addLogin("trail", "example.com", "Cobol-1959!")
	page := func(w http.ResponseWriter, shown string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = fmt.Fprintf(w, "<!doctype html><html><body><p>Your key:</p><code>%s</code></body></html>", shown)
	}
	up := startUpstream(t, e.upCA, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/session":
			_, _ = io.WriteString(w, "signed in")
		case "/account/2fa":
			page(w, siteSeed)
		case "/search":
			page(w, r.URL.Query().Get("q"))
		case "/welcome":
			page(w, r.Referer())
		case "/notes":
			c, _ := r.Cookie("note")
			if c != nil {
				v, _ := url.QueryUnescape(c.Value)
				page(w, v)
			}
		}
	})
	s, pw := e.session()
	client := e.client(s, pw, false)
	signIn := hostURL(up, "login.example.com", "/session")
	a, err := e.authorize(s, tok("login", "trail", "password"), signIn)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.PostForm(signIn, url.Values{"password": {a.Value}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	get := func(raw string, hdr http.Header) string {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, raw, nil)
		for k, vs := range hdr {
			req.Header[k] = vs
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", raw, resp.StatusCode, codeOf(resp))
		}
		return readAll(t, resp.Body)
	}
	loc := broker.TOTPLocator{Tag: "code", Index: 0}
	enrol := hostURL(up, "login.example.com", "/account/2fa")
	search := hostURL(up, "login.example.com", "/search?q="+agentSeed)

	// Armed on the enrolment page: the search page is not read.
	id, err := e.sessions.ArmTOTPCapture(ctx, s, "trail", enrol, loc)
	if err != nil {
		t.Fatal(err)
	}
	if body := get(search, nil); !strings.Contains(body, agentSeed) || strings.Contains(body, rewrite.TOTPMask) {
		t.Fatal("the search page was read by a capture armed on the enrolment page")
	}
	if body := get(enrol, nil); strings.Contains(body, siteSeed) || !strings.Contains(body, rewrite.TOTPMask) {
		t.Fatal("the enrolment page was not read after the search page")
	}
	got, err := e.sessions.TakeTOTPCapture(ctx, s, id, 5*time.Second)
	if err != nil || string(got.Seed.InsecureRawBytes()) != siteSeed {
		t.Fatalf("take: %v (the site's seed: %v)", err, err == nil && string(got.Seed.InsecureRawBytes()) == siteSeed)
	}

	// Echoed text, wherever the capture was declared, is refused.
	for _, tc := range []struct {
		name, page string
		hdr        http.Header
	}{
		{"declared on the search page", search, nil},
		{"the Referer echoed", hostURL(up, "login.example.com", "/welcome"), http.Header{"Referer": {hostURL(up, "login.example.com", "/x?k=") + agentSeed}}},
		{"a cookie a page script set", hostURL(up, "login.example.com", "/notes"), http.Header{"Cookie": {"note=" + url.QueryEscape(strings.ToLower(agentSeed[:16]+" "+agentSeed[16:]))}}},
	} {
		id, err := e.sessions.ArmTOTPCapture(ctx, s, "trail", tc.page, loc)
		if err != nil {
			t.Fatal(err)
		}
		if body := get(tc.page, tc.hdr); strings.Contains(body, rewrite.TOTPMask) {
			t.Errorf("%s: the echoed text was masked as a seed", tc.name)
		}
		if _, err := e.sessions.TakeTOTPCapture(ctx, s, id, 5*time.Second); agentvault.ErrorCode(err) != agentvault.CodeTOTPSeedUntrusted {
			t.Errorf("%s: take answered %v, want totp_seed_untrusted", tc.name, err)
		}
	}
}
