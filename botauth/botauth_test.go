package botauth_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault/internal/leakcheck"

	"github.com/agentvault/agentvault/botauth"
	"github.com/agentvault/agentvault/internal/httpsigtest"
)

// clock is a settable test clock.
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

// agentSite serves the signer's directory the way proxyd does, so the
// independent verifier can fetch and check it.
type agentSite struct {
	srv    *httptest.Server
	signer *botauth.Signer
	clk    *clock
}

func newAgentSite(t *testing.T, window time.Duration, sites ...botauth.Site) *agentSite {
	t.Helper()
	clk := &clock{t: time.Now().Truncate(time.Second)}
	a := &agentSite{clk: clk}
	a.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != botauth.DirectoryPath {
			http.NotFound(w, r)
			return
		}
		u, _ := url.Parse(a.signer.AgentOrigin())
		body, fields, err := botauth.Directory(a.signer.Keys().Published(clk.now()), r.Host, u.Host, clk.now())
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		for _, f := range fields {
			w.Header().Set(f.Name, f.Value)
		}
		_, _ = w.Write(body)
	}))
	a.srv.StartTLS()
	t.Cleanup(a.srv.Close)
	kr, err := botauth.NewKeyring(clk.now(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := botauth.NewRules(sites)
	if err != nil {
		t.Fatal(err)
	}
	a.signer, err = botauth.NewSigner(botauth.SignerConfig{AgentOrigin: a.srv.URL, Window: window, Now: clk.now}, kr, rules)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (a *agentSite) verifier() *httpsigtest.Verifier {
	return &httpsigtest.Verifier{Client: a.srv.Client(), Now: a.clk.now}
}

// message is what a site receives for a signed request.
func message(t *testing.T, a *agentSite, method, authority, target string, payment bool) (httpsigtest.Message, botauth.Signed) {
	t.Helper()
	host := strings.Split(authority, ":")[0]
	path, _, _ := strings.Cut(target, "?")
	s, ok, err := a.signer.Sign(botauth.Request{Host: host, Authority: authority, Path: path, Payment: payment})
	if err != nil || !ok {
		t.Fatalf("sign %s%s: ok %v, %v", authority, target, ok, err)
	}
	h := http.Header{}
	h.Set("Signature-Agent", s.Agent)
	h.Set("Signature-Input", s.Input)
	h.Set("Signature", s.Signature)
	h.Set("Accept", "text/html")
	return httpsigtest.Message{Method: method, Authority: authority, RequestURI: target, Header: h}, s
}

// TestSignedRequestsVerifyIndependently: what the signer makes, a site's
// verifier written from the RFCs accepts (the directory fetched and its
// possession proofs checked), with the tags the owner's rules give; and
// the same verifier refuses a replay, a tampered path or authority, and a
// signature past its window.
func TestSignedRequestsVerifyIndependently(t *testing.T) {
	a := newAgentSite(t, 2*time.Minute,
		botauth.Site{Host: "shop.example"},
		botauth.Site{Host: "pay.example", TAP: []string{"browse", "pay"}})
	ctx := context.Background()
	cases := []struct {
		name, authority, target string
		payment                 bool
		tags                    []string
	}{
		{"identity only", "shop.example", "/products/1?color=red", false, []string{"web-bot-auth"}},
		{"subdomain, port", "www.shop.example:8443", "/", false, []string{"web-bot-auth"}},
		{"TAP browsing", "pay.example", "/elements/card", false, []string{"web-bot-auth", "agent-browser-auth"}},
		{"TAP payment", "pay.example", "/v1/payment_intents/pi_1/confirm", true, []string{"web-bot-auth", "agent-payer-auth"}},
		{"payment on an identity-only site", "shop.example", "/checkout", true, []string{"web-bot-auth"}},
	}
	v := a.verifier()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, s := message(t, a, http.MethodPost, c.authority, c.target, c.payment)
			if fmt.Sprint(s.Tags) != fmt.Sprint(c.tags) {
				t.Errorf("tags %v, want %v", s.Tags, c.tags)
			}
			got, err := v.Verify(ctx, m)
			if err != nil {
				t.Fatalf("the site refused a signed request: %v", err)
			}
			for i, sig := range got {
				if !sig.Covers(`"@authority"`) || !sig.Covers(`"@path"`) {
					t.Errorf("signature %s covers %v", sig.Label, sig.Components)
				}
				window := time.Duration(sig.Expires-sig.Created) * time.Second
				switch sig.Tag {
				case "web-bot-auth":
					if window != 2*time.Minute || !sig.Covers(`"signature-agent";key="`+sig.Label+`"`) {
						t.Errorf("web-bot-auth window %v, components %v", window, sig.Components)
					}
				default:
					if window > 8*time.Minute {
						t.Errorf("TAP window %v", window)
					}
				}
				if i > 0 && sig.Nonce == got[0].Nonce {
					t.Error("two signatures share a nonce")
				}
			}
			if _, err := v.Verify(ctx, m); err == nil || !strings.Contains(err.Error(), "replay") {
				t.Errorf("a replayed signature was accepted (err %v)", err)
			}
			tampered := m
			tampered.RequestURI = "/admin" + c.target
			if _, err := a.verifier().Verify(ctx, tampered); err == nil {
				t.Error("a tampered path verified")
			}
			other := m
			other.Authority = "evil.example"
			if _, err := a.verifier().Verify(ctx, other); err == nil {
				t.Error("a signature verified for another authority")
			}
		})
	}
	// Past its window a signature is refused by a site that never saw it.
	m, _ := message(t, a, http.MethodGet, "shop.example", "/", false)
	late := a.verifier()
	late.Now = func() time.Time { return a.clk.now().Add(2*time.Minute + time.Second) }
	if _, err := late.Verify(ctx, m); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("a signature past its window was accepted (err %v)", err)
	}
	if v.Fetches() != 1 {
		t.Errorf("the site fetched the directory %d times, want once (cached)", v.Fetches())
	}
}

// TestOnlyChosenSites: a host no chosen site covers is not signed (the
// signer says so and makes nothing); a parent domain covers its
// subdomains, and the most specific site's TAP uses apply.
func TestOnlyChosenSites(t *testing.T) {
	a := newAgentSite(t, 0, botauth.Site{Host: "Shop.Example"}, botauth.Site{Host: "pay.shop.example", TAP: []string{"pay"}})
	for _, h := range []string{"example", "shop.example.evil", "evilshop.example", "other.test"} {
		if s, ok, err := a.signer.Sign(botauth.Request{Host: h, Authority: h, Path: "/"}); ok || err != nil || s.Input != "" {
			t.Errorf("%s was signed: %v %v", h, ok, err)
		}
	}
	s, ok, _ := a.signer.Sign(botauth.Request{Host: "pay.shop.example", Authority: "pay.shop.example", Path: "/", Payment: true})
	if !ok || fmt.Sprint(s.Tags) != "[web-bot-auth agent-payer-auth]" || s.Class != botauth.ClassTAP || s.Site != "pay.shop.example" {
		t.Errorf("most specific site: ok %v tags %v class %s site %s", ok, s.Tags, s.Class, s.Site)
	}
	s, ok, _ = a.signer.Sign(botauth.Request{Host: "a.shop.example", Authority: "a.shop.example", Path: "/", Payment: true})
	if !ok || fmt.Sprint(s.Tags) != "[web-bot-auth]" || s.Class != botauth.ClassIdentity {
		t.Errorf("parent site: ok %v tags %v class %s", ok, s.Tags, s.Class)
	}
	a.signer.SetRules(botauth.Rules{})
	if _, ok, _ := a.signer.Sign(botauth.Request{Host: "shop.example", Authority: "shop.example", Path: "/"}); ok {
		t.Error("signed after the owner removed every site")
	}
}

func TestRulesValidate(t *testing.T) {
	if _, err := botauth.NewRules([]botauth.Site{{Host: "shop.example", TAP: []string{"checkout"}}}); err == nil {
		t.Error("an unknown TAP use was accepted")
	}
	if _, err := botauth.NewRules([]botauth.Site{{Host: "https://a.com@evil.com/"}}); err == nil {
		t.Error("a URL with userinfo was accepted as a site")
	}
	r, err := botauth.NewRules([]botauth.Site{{Host: "https://SHOP.example/cart", TAP: []string{"browse"}}}, []botauth.Site{{Host: "shop.example", TAP: []string{"Pay", "browse"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(r.Sites()); got != "[{shop.example [browse pay]}]" {
		t.Errorf("merged rules %s", got)
	}
	for _, o := range []string{"http://agent.example", "https://agent.example/keys", "https://u@agent.example", "agent.example", "https://agent.example?x=1"} {
		if botauth.CheckAgentOrigin(o) == nil {
			t.Errorf("agent origin %q accepted", o)
		}
	}
	if botauth.CheckWindow(10*time.Second) == nil || botauth.CheckWindow(2*time.Hour) == nil || botauth.CheckWindow(5*time.Minute) != nil {
		t.Error("window bounds")
	}
}

// TestRotationKeepsOldKeyUntilItsSignaturesExpire: after a rotation the
// new key signs, the directory lists both, a signature the old key made
// just before still verifies, and the old key leaves the directory once
// every signature it made has expired (and the next rotation drops it).
func TestRotationKeepsOldKeyUntilItsSignaturesExpire(t *testing.T) {
	window := 5 * time.Minute
	a := newAgentSite(t, window, botauth.Site{Host: "shop.example", TAP: []string{"browse"}})
	ctx := context.Background()
	old := a.signer.Keys().Active()
	before, _ := message(t, a, http.MethodGet, "shop.example", "/before", false)

	next, err := a.signer.Keys().Rotate(a.clk.now(), botauth.RetireAfter(window), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	a.signer.SetKeys(next)
	if next.Active().ID() == old.ID() {
		t.Fatal("rotation kept the key")
	}
	pub := next.Published(a.clk.now())
	if len(pub) != 2 || pub[0].ID() != old.ID() || pub[0].Retire().IsZero() {
		t.Fatalf("published after rotation: %v", pub)
	}
	after, s := message(t, a, http.MethodGet, "shop.example", "/after", false)
	if s.KeyID != next.Active().ID() {
		t.Error("the new key does not sign")
	}
	v := a.verifier()
	if _, err := v.Verify(ctx, after); err != nil {
		t.Fatalf("new key's signature: %v", err)
	}
	a.clk.add(window - time.Second)
	if _, err := v.Verify(ctx, before); err != nil {
		t.Fatalf("the old key's last signature, within its window, after the rotation: %v", err)
	}
	// Past the old signatures' expiry (and the reload margin), the old key
	// is out of the directory.
	a.clk.add(botauth.RetireAfter(window))
	pub = next.Published(a.clk.now())
	if len(pub) != 1 || pub[0].ID() != next.Active().ID() {
		t.Fatalf("published after the old key retired: %v", pub)
	}
	d, err := a.verifier().FetchDirectory(ctx, a.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, listed := d.Keys[old.ID()]; listed || len(d.Keys) != 1 {
		t.Errorf("the directory still lists the retired key: %v", d.Keys)
	}
	third, _ := next.Rotate(a.clk.now(), botauth.RetireAfter(window), rand.Reader)
	if n := len(third.Keys()); n != 2 {
		t.Errorf("a retired key survived the next rotation (%d keys)", n)
	}
	// Sealed and opened again, the keyring is the same.
	back, err := botauth.ParseKeyring(third.InsecureEncode())
	if err != nil {
		t.Fatal(err)
	}
	if back.Active().ID() != third.Active().ID() || len(back.Keys()) != 2 || !back.Keys()[0].Retire().Equal(third.Keys()[0].Retire()) {
		t.Error("the keyring does not survive sealing")
	}
}

// TestP11_KeyNeverPrints: a key or keyring put in a log line, an error, a
// %v or JSON shows the key id, never the private key in any encoding.
func TestP11_KeyNeverPrints(t *testing.T) {
	kr, _ := botauth.NewKeyring(time.Now(), rand.Reader)
	var stored struct {
		Keys []struct {
			Seed []byte `json:"seed"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(kr.InsecureEncode(), &stored); err != nil || len(stored.Keys) != 1 {
		t.Fatal("keyring encoding")
	}
	seed := stored.Keys[0].Seed
	k := kr.Active()
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	log.Info("key", "k", k, "ring", kr)
	js, _ := json.Marshal(map[string]any{"k": k})
	out := fmt.Sprintf("%v %+v %#v %s %q", k, k, k, k, k) + logs.String() + string(js) + fmt.Sprintf("%v %+v", kr, kr)
	priv := append(append([]byte(nil), seed...), k.Public()...)
	var cs []leakcheck.Canary
	for i, enc := range []string{
		string(seed), string(priv), hex.EncodeToString(seed), hex.EncodeToString(priv), fmt.Sprint(seed), fmt.Sprint([]byte(priv)),
	} {
		cs = append(cs, leakcheck.Value(fmt.Sprintf("private key form %d", i), enc))
	}
	leakcheck.New(cs...).Text(t, "printed key and keyring", []byte(out))
	if printed := fmt.Sprint(k); !strings.Contains(printed, k.ID()) {
		t.Error("the key does not print as its id")
	}
}

// TestDirectorySignedForTheAgentOnly: the directory signs its response for
// the agent origin's authority (with or without the default port) and
// serves the keys unsigned under any other name.
func TestDirectorySignedForTheAgentOnly(t *testing.T) {
	kr, _ := botauth.NewKeyring(time.Now(), rand.Reader)
	now := time.Now()
	for authority, signed := range map[string]bool{"agent.example": true, "Agent.Example:443": true, "copy.example": false, "agent.example:8443": false, "": false} {
		body, fields, err := botauth.Directory(kr.Published(now), authority, "agent.example", now)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		for _, f := range fields {
			h.Set(f.Name, f.Value)
		}
		if got := h.Get("Signature") != ""; got != signed {
			t.Errorf("%q: signed %v, want %v", authority, got, signed)
		}
		if signed {
			if _, err := httpsigtest.VerifyDirectory("https://agent.example", authority, h, body, now, 0); err != nil {
				t.Errorf("%q: %v", authority, err)
			}
		}
	}
}
