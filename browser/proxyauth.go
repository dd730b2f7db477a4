package browser

import (
	"net/url"
	"sync"
	"sync/atomic"

	"github.com/agentvault/agentvault/hostname"
	"github.com/mxschmitt/playwright-go"
)

// proxyAuth gives the session's proxy credential to the session's proxy
// and to nothing else.
//
// Playwright, handed a proxy username and password, keeps them as the
// context's HTTP credentials: it then pauses every request of the context
// in its driver for as long as the context lives (CDP Fetch interception:
// a round trip through the driver per request, see
// BenchmarkNavigateThroughProxy), and it answers any challenge with them,
// a site's 401 included, so a page that asked for Basic authentication
// was sent the session's proxy credential.
//
// So the context gets the proxy server alone, and its first page a CDP
// session of ours that intercepts requests only until the proxy has let
// one through: a challenge from the session's proxy gets the credential
// once per request, any other challenge (a site's, another proxy's) is
// cancelled (the page sees the 401; nothing is sent; after the
// interception nobody answers a site's challenge and the navigation fails
// with net::ERR_INVALID_AUTH_CREDENTIALS, navError). Chromium keeps an
// accepted proxy credential for the context and sends it with every
// tunnel after that (other origins, frames, popups), so the first
// response through the proxy ends the interception.
type proxyAuth struct {
	proxy    hostname.Origin // the session's proxy; ok when it parsed
	ok       bool
	user, pw string

	mu       sync.Mutex
	cdp      playwright.CDPSession
	answered map[string]bool // request IDs given the credential
	ended    bool
}

func newProxyAuth(p *Proxy) *proxyAuth {
	a := &proxyAuth{user: p.Username, pw: p.Password, answered: map[string]bool{}}
	a.proxy, a.ok = proxyOrigin(p.Server)
	return a
}

// proxyOrigin is a proxy URL's host and port (the scheme's when it names
// none) as the one host-name normaliser has them.
func proxyOrigin(raw string) (hostname.Origin, bool) {
	u, err := url.Parse(raw)
	if err != nil {
		return hostname.Origin{}, false
	}
	port := 80
	if u.Scheme == "https" {
		port = 443
	}
	o, err := hostname.Parse(u.Host, port)
	return o, err == nil
}

// attach intercepts page p's requests until end, answering challenges.
func (a *proxyAuth) attach(bctx playwright.BrowserContext, p playwright.Page) error {
	cdp, err := bctx.NewCDPSession(p)
	if err != nil {
		return err
	}
	// Replies go out off the event's goroutine: a command's answer comes
	// through the same dispatcher.
	cdp.On("Fetch.requestPaused", func(ev map[string]any) {
		proxyAuthPauses.Add(1)
		id, _ := ev["requestId"].(string)
		go func() { _, _ = cdp.Send("Fetch.continueRequest", map[string]any{"requestId": id}) }()
	})
	cdp.On("Fetch.authRequired", func(ev map[string]any) {
		id, _ := ev["requestId"].(string)
		resp := a.answer(id, ev["authChallenge"])
		go func() {
			_, _ = cdp.Send("Fetch.continueWithAuth", map[string]any{"requestId": id, "authChallengeResponse": resp})
		}()
	})
	// Chromium hands challenges only to an interception with a pattern.
	if _, err := cdp.Send("Fetch.enable", map[string]any{"handleAuthRequests": true,
		"patterns": []any{map[string]any{"urlPattern": "*", "requestStage": "Request"}}}); err != nil {
		_ = cdp.Detach()
		return err
	}
	a.mu.Lock()
	a.cdp = cdp
	a.mu.Unlock()
	return nil
}

// end stops the interception: a response came through the proxy, so
// Chromium holds the accepted credential. Safe to call from an event
// callback and more than once.
func (a *proxyAuth) end() {
	a.mu.Lock()
	cdp := a.cdp
	if a.ended || cdp == nil {
		a.mu.Unlock()
		return
	}
	a.ended = true
	a.mu.Unlock()
	// The interception narrows to a URL no request has instead of ending:
	// a request paused just now is still this session's to continue
	// (Fetch.disable could leave it paused with nobody to answer it).
	go func() {
		_, _ = cdp.Send("Fetch.enable", map[string]any{"handleAuthRequests": true,
			"patterns": []any{map[string]any{"urlPattern": noRequestURL, "requestStage": "Request"}}})
	}()
}

// proxyAuthPauses counts the requests paused for the proxy's challenge.
var proxyAuthPauses atomic.Int64

// noRequestURL is a pattern no request of a page matches.
const noRequestURL = "about:agentvault-no-request"

// answer decides one challenge: the credential for the session's proxy,
// once per request (a second challenge means it was refused), else cancel.
func (a *proxyAuth) answer(id string, challenge any) map[string]any {
	cancel := map[string]any{"response": "CancelAuth"}
	ch, _ := challenge.(map[string]any)
	src, _ := ch["source"].(string)
	origin, _ := ch["origin"].(string)
	if o, ok := proxyOrigin(origin); src != "Proxy" || !ok || !a.ok || o != a.proxy || id == "" {
		return cancel
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.answered[id] {
		delete(a.answered, id)
		return cancel
	}
	a.answered[id] = true
	return map[string]any{"response": "ProvideCredentials", "username": a.user, "password": a.pw}
}
