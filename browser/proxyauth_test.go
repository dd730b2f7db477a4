package browser_test

import (
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/browser"
	"github.com/agentvault/agentvault/browser/browsertest"
)

// authProxy is a CONNECT proxy that wants Basic credentials, like
// proxyd's: it answers 407 without them and counts what each tunnel
// request carried.
type authProxy struct {
	*httptest.Server
	want string

	mu                     sync.Mutex
	challenged, authorized int
}

func startAuthProxy(t testing.TB, user, pw string) *authProxy {
	p := &authProxy{want: "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pw))}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		p.mu.Lock()
		ok := r.Header.Get("Proxy-Authorization") == p.want
		if ok {
			p.authorized++
		} else {
			p.challenged++
		}
		p.mu.Unlock()
		if !ok {
			w.Header().Set("Proxy-Authenticate", `Basic realm="test proxy"`)
			w.WriteHeader(http.StatusProxyAuthRequired)
			return
		}
		up, err := net.Dial("tcp", r.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusOK)
		c, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			up.Close()
			return
		}
		go func() {
			_, _ = buf.Reader.WriteTo(up)
			_, _ = io.Copy(up, c)
			up.Close()
		}()
		_, _ = io.Copy(c, up)
		c.Close()
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *authProxy) counts() (challenged, authorized int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.challenged, p.authorized
}

// TestProxyCredentialGoesOnlyToTheProxy: the session's proxy credential
// answers its proxy's challenge and nothing else. Playwright, holding the
// credential itself, answered a site's Basic challenge with it. Here a
// site that asks for Basic authentication gets no Authorization header,
// whether it is the session's first page (the challenge is cancelled and
// its 401 page shows) or a later one (nobody answers: the navigation fails
// with a clear error); the tunnels after the first carry the credential
// Chromium kept (other origins, a cross-origin frame).
func TestProxyCredentialGoesOnlyToTheProxy(t *testing.T) {
	site := browsertest.Start(t)
	var mu sync.Mutex
	var sent []string
	basic := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if a := r.Header.Get("Authorization"); a != "" {
			sent = append(sent, a)
		}
		mu.Unlock()
		w.Header().Set("WWW-Authenticate", `Basic realm="members"`)
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `<!doctype html><title>Members</title><h1>Members only</h1>`)
	}))
	t.Cleanup(basic.Close)
	const user, pw = "s_proxyauth", "Zebrapass-Canary-7731"
	px := startAuthProxy(t, user, pw)
	b := browsertest.Launch(t, site)
	session := func() *browser.Session {
		s, err := b.NewSession(browser.SessionOptions{Proxy: &browser.Proxy{Server: px.URL, Username: user, Password: pw}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	noneSent := func() {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		if len(sent) != 0 {
			t.Fatalf("the site was sent %d Authorization headers (the proxy credential: %v)", len(sent),
				strings.Contains(strings.Join(sent, " "), base64.StdEncoding.EncodeToString([]byte(user+":"+pw))))
		}
	}

	// The first page asks: the proxy's challenge is answered, the site's
	// cancelled.
	first := session()
	if err := first.Goto(basic.URL+"/members", 30*time.Second); err != nil {
		t.Fatalf("a site's 401 page as the first: %v", err)
	}
	snap, err := first.Snapshot(0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(snap.YAML, "Members only") {
		t.Fatalf("the 401 page did not show:\n%s", snap.YAML)
	}
	noneSent()

	// A page, its frame from another origin, then a site that asks.
	s := session()
	if err := s.Goto(site.CheckoutURL(), 30*time.Second); err != nil {
		t.Fatalf("checkout through the proxy: %v", err)
	}
	if err := s.WaitFor(browser.Target{Selector: "#number", Frame: "iframe"}, "visible", 30*time.Second); err != nil {
		t.Fatalf("the card frame (another origin, another tunnel): %v", err)
	}
	challenged, authorized := px.counts()
	t.Logf("so far: %d tunnel requests challenged, %d with the credential", challenged, authorized)
	// The interception ended with the first response: the next page's
	// requests are not paused.
	paused := browser.ProxyAuthPauses()
	if err := s.Goto(site.CheckoutURL(), 30*time.Second); err != nil {
		t.Fatalf("checkout again: %v", err)
	}
	if n := browser.ProxyAuthPauses() - paused; n != 0 {
		t.Fatalf("%d requests paused after the interception ended", n)
	}
	if paused == 0 {
		t.Fatal("no request was paused before the first response")
	}
	err = s.Goto(basic.URL+"/members", 30*time.Second)
	noneSent()
	if err == nil || agentvault.ErrorCode(err) != agentvault.CodeUpstream || !strings.Contains(err.Error(), "HTTP authentication") {
		t.Fatalf("a later page asking for HTTP authentication: %v", err)
	}
	c, a := px.counts()
	t.Logf("after: %d challenged, %d with the credential", c, a)
	if a <= authorized {
		t.Fatal("the asking site's origin was not reached through an authorized tunnel")
	}
	if strings.Contains(err.Error(), pw) {
		t.Fatal("the error carries the credential")
	}
}

// BenchmarkNavigateThroughProxy is a navigation of a one-document page,
// directly and through a CONNECT proxy that wants credentials (no MITM:
// what the browser side of proxying costs). With Playwright holding the
// credential, every request paused for a round trip through its driver:
// 2.5 to 8 ms more than direct on each navigation here (one document and
// its favicon); answered over CDP, no request pauses after the first
// response.
func BenchmarkNavigateThroughProxy(b *testing.B) {
	site := browsertest.Start(b)
	page := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/favicon.ico" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Cache-Control", "no-store")
		io.WriteString(w, `<!doctype html><title>One</title><main><h1>One document</h1><p>Nothing else to load.</p><a href="/">again</a></main>`)
	}))
	b.Cleanup(page.Close)
	px := startAuthProxy(b, "s_bench", "bench-pass")
	br := browsertest.Launch(b, site)
	for _, mode := range []string{"direct", "proxied"} {
		b.Run(mode, func(b *testing.B) {
			opts := browser.SessionOptions{}
			if mode == "proxied" {
				opts.Proxy = &browser.Proxy{Server: px.URL, Username: "s_bench", Password: "bench-pass"}
			}
			s, err := br.NewSession(opts)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			s.SetReadings(false) // the navigation alone
			if err := s.Goto(page.URL+"/", 30*time.Second); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				if err := s.Goto(page.URL+"/", 30*time.Second); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
