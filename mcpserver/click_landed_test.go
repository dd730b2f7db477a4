package mcpserver

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// landedSite serves a place-order button under a scrim that goes once the
// test lifts it (the page polls /lifted), and whose click handler then
// holds the page in a synchronous request until the test releases /hold:
// the click lands after the scrim intercepted it, and the wait after it
// runs out the click's timeout.
func landedSite(t *testing.T) (url string, lift, release func()) {
	t.Helper()
	var lifted atomic.Bool
	hold := make(chan struct{})
	var once sync.Once
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/lifted":
			fmt.Fprint(w, lifted.Load())
		case "/hold":
			select {
			case <-hold:
			case <-r.Context().Done():
			}
			fmt.Fprint(w, "ok")
		default:
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, `<!doctype html><html><body>
<button id="buy" onclick="const x = new XMLHttpRequest(); x.open('GET', '/hold', false); x.send(); document.body.dataset.bought = 1">Place order</button>
<div id="scrim" style="position:fixed;inset:0;background:rgba(0,0,0,.3)"></div>
<script>
const poll = setInterval(async () => {
	if (await (await fetch('/lifted')).text() === 'true') { document.getElementById('scrim').remove(); clearInterval(poll); }
}, 50);
</script></body></html>`)
		}
	}))
	t.Cleanup(func() { once.Do(func() { close(hold) }); srv.Close() })
	return srv.URL, func() { lifted.Store(true) }, func() { once.Do(func() { close(hold) }) }
}

// TestSeed004_ClickLandedThenTimedOut: "intercepts pointer events" in
// Playwright's call log followed by "performing click action" is no
// covered target: the click landed and the timeout was the wait after it
// (seed 004, click), where the same click while the scrim stays is a
// covered one. The answer says so and tells the agent to read the
// page before clicking again, not to press or clear an overlay; and the
// click did land. Real Chromium, over the MCP transport.
func TestSeed004_ClickLandedThenTimedOut(t *testing.T) {
	h := newHarness(t)
	site, lift, release := landedSite(t)
	h.ok("open_page", map[string]any{"url": site + "/checkout"})
	// While the scrim stays, the same click is a covered one.
	if txt := h.refused("click", map[string]any{"selector": "#buy", "timeout": 1500}, "timeout"); !strings.Contains(txt, "because another element covers it: use press with Enter on #buy instead") {
		t.Fatalf("a covered click: %q", txt)
	}
	// The scrim intercepts the first attempts, then goes while the click
	// still retries.
	time.AfterFunc(2*time.Second, lift)
	txt := h.refused("click", map[string]any{"selector": "#buy", "timeout": 8000}, "timeout")
	release()
	if !strings.Contains(txt, "click on #buy landed, then timed out waiting after it: read the page before repeating it") ||
		strings.Contains(txt, "covers it") || strings.Contains(txt, "press with") {
		t.Fatalf("a click that landed: %q", txt)
	}
	if got := jsonOf(t, h.ok("count", map[string]any{"selector": "body[data-bought]"})); got["count"] != float64(1) {
		t.Fatalf("the click did not land: %v", got)
	}
}
