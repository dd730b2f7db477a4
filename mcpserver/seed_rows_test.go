package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
)

// Seed 004 rows of docs/seed-rules.md held here (issue 25).

// TestSeed004_SnapshotDepthClamped: a depth over 30 is walked at 30, and the
// truncation note of the cut answer (at most 24,000 characters) names the
// cursor and the clamped depth to page on with.
func TestSeed004_SnapshotDepthClamped(t *testing.T) {
	if snapshotPageSize != 24000 {
		t.Fatalf("a snapshot page holds %d characters, the seed says 24,000", snapshotPageSize)
	}
	h, c := newCorpusHarness(t)
	url, _ := corpusURL(t, c, "listing")
	h.ok("open_page", map[string]any{"url": url})
	txt := h.ok("snapshot_page", map[string]any{"depth": 1000})
	if len(txt) > snapshotPageSize {
		t.Fatalf("the answer has %d characters", len(txt))
	}
	m := truncNote.FindStringSubmatch(txt)
	if m == nil {
		t.Fatalf("the listing was not cut, or its note names no cursor and depth: %q", txt[max(0, len(txt)-300):])
	}
	if m[2] != "30" {
		t.Fatalf("depth 1000 was walked at %s, want 30", m[2])
	}
	if atoi(t, m[1]) <= 0 {
		t.Fatalf("cursor %s", m[1])
	}
}

// TestSeed004_WaitForPopupClampedTo60s: a wait_for_popup timeout over
// 60000 waits 60000 ms, no longer, and then fails timeout.
func TestSeed004_WaitForPopupClampedTo60s(t *testing.T) {
	h := newHarness(t)
	h.ok("open_page", map[string]any{"url": h.site.CheckoutURL()})
	got := h.refused("wait_for_popup", map[string]any{"timeout": 3_600_000}, agentvault.CodeTimeout)
	if !strings.Contains(got, "within 60000 ms") {
		t.Fatalf("an hour's timeout was not clamped to 60000 ms: %q", got)
	}
}

// popupSite is an HTTPS site of pages that open tabs: every page copies the
// keys in its origin's localStorage onto its body as data-KEY attributes, so
// a test waits on a tab's event with wait_for_selector on another tab.
func popupSite(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	srv, spki, _ := gatedPopupSite(t)
	return srv, spki
}

// popupGate lets a test time a page's script without a tool call: a fetch
// of /hold answers once release is closed, and one of /note/NAME puts NAME
// on notes.
type popupGate struct {
	release chan struct{}
	notes   chan string
}

// gatedPopupSite is popupSite and its gate.
func gatedPopupSite(t *testing.T) (*httptest.Server, string, *popupGate) {
	t.Helper()
	gate := &popupGate{release: make(chan struct{}), notes: make(chan string, 8)}
	const marks = `<script>setInterval(()=>{for(const k of Object.keys(localStorage))document.body.setAttribute('data-'+k,'1')},50)</script>`
	pages := map[string]string{
		"opener": `<button id="two" onclick="window.open('/p/a');window.open('/p/b')">two</button>
<button id="selfclose" onclick="const w=window.open('/p/selfclose');const iv=setInterval(()=>{if(w.closed){localStorage.setItem('scclosed','1');clearInterval(iv)}},50)">selfclose</button>
<button id="parent" onclick="window.open('/p/parent')">parent</button>
<button id="held" onclick="const w=window.open('/p/held');const iv=setInterval(()=>{if(w.closed){fetch('/note/heldclosed');clearInterval(iv)}},50)">held</button>
<button id="samescript" onclick="const w=window.open('/p/openclose');const iv=setInterval(()=>{if(w.closed){localStorage.setItem('ssclosed','1');clearInterval(iv)}},50)">samescript</button>`,
		"a":         ``,
		"b":         `<script>localStorage.setItem('b','1')</script>`,
		"selfclose": `<script>window.open('/p/child');setInterval(()=>{if(localStorage.getItem('child'))window.close()},50)</script>`,
		"child":     `<script>localStorage.setItem('child','1')</script>`,
		"parent":    `<script>window.open('/p/kid')</script>`,
		"openclose": `<script>window.open('/p/orphan');window.close()</script>`,
		"orphan":    `<script>localStorage.setItem('orphan','1')</script>`,
		"held":      `<script>fetch('/hold').then(()=>window.close())</script>`,
		"kid":       `<script>localStorage.setItem('kid','1')</script>`,
		"total":     `<p>Total <span id="bare" data-total="42.00">$42.00</span> <span id="priced" data-total="$42.00">$42.00</span></p>`,
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /p/{name}", func(w http.ResponseWriter, r *http.Request) {
		body, ok := pages[r.PathValue("name")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, "<!doctype html><html><head><title>%s</title></head><body><h1>%s</h1>%s%s</body></html>", r.PathValue("name"), r.PathValue("name"), body, marks)
	})
	mux.HandleFunc("GET /hold", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-gate.release:
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("GET /note/{name}", func(w http.ResponseWriter, r *http.Request) {
		select {
		case gate.notes <- r.PathValue("name"):
		default:
		}
	})
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	sum := sha256.Sum256(srv.Certificate().RawSubjectPublicKeyInfo)
	return srv, base64.StdEncoding.EncodeToString(sum[:]), gate
}

// TestSeed004_PopupLandings: close_popup lands on a sibling tab queued under
// the opener before the opener, and on a tab the popup opened; wait_for_popup
// on a popup that closed itself after opening a tab lands on that child tab
// and says so. Each answer names where it landed. (The blank page, when
// every page that opened the popup is gone, is not reached here: Chromium
// lets no script close the page open_page opened.)
func TestSeed004_PopupLandings(t *testing.T) {
	site, spki := popupSite(t)
	ctl := &standInControl{}
	h := newControlHarness(t, ctl, ctl, spki)
	h.ok("open_page", map[string]any{"url": site.URL + "/p/opener"})
	popup := map[string]any{"timeout": 30000}
	onto := func(step, got, want, path string) {
		t.Helper()
		if !strings.Contains(got, want) || !strings.Contains(got, path) {
			t.Fatalf("%s: got %q, want %q and %s", step, got, want, path)
		}
	}
	const (
		opener  = "back on the page that opened it"
		sibling = "landed on another tab queued under the opener"
		child   = "landed on a tab it had opened"
	)

	// A sibling: the opener opened two tabs; closing the first lands on
	// the second, closing that one on the opener.
	h.ok("click", map[string]any{"selector": "#two"})
	onto("wait_for_popup", h.ok("wait_for_popup", popup), "Switched to the popup", "/p/a")
	h.ok("wait_for_selector", map[string]any{"selector": "body[data-b]", "state": "attached"})
	onto("close_popup (sibling)", h.ok("close_popup", nil), sibling, "/p/b")
	onto("close_popup (opener)", h.ok("close_popup", nil), opener, "/p/opener")

	// A popup that opened a tab and closed itself: wait_for_popup lands on
	// the child tab and says so.
	h.ok("click", map[string]any{"selector": "#selfclose"})
	h.ok("wait_for_selector", map[string]any{"selector": "body[data-child][data-scclosed]", "state": "attached"})
	onto("wait_for_popup (self-closed)", h.ok("wait_for_popup", popup), "switched to that child tab", "/p/child")
	onto("close_popup (after the child)", h.ok("close_popup", nil), opener, "/p/opener")

	// The same, the popup closing in the script that opened the tab: the
	// browser reports the tab with no opener (it is gone by then), and
	// wait_for_popup still lands on it and says so.
	h.ok("click", map[string]any{"selector": "#samescript"})
	h.ok("wait_for_selector", map[string]any{"selector": "body[data-orphan][data-ssclosed]", "state": "attached"})
	onto("wait_for_popup (closed in the same script)", h.ok("wait_for_popup", popup), "switched to that child tab", "/p/orphan")
	onto("close_popup (after the orphan)", h.ok("close_popup", nil), opener, "/p/opener")

	// A popup that opened a tab of its own: closing it lands on that tab.
	h.ok("click", map[string]any{"selector": "#parent"})
	onto("wait_for_popup (parent)", h.ok("wait_for_popup", popup), "Switched to the popup", "/p/parent")
	h.ok("wait_for_selector", map[string]any{"selector": "body[data-kid]", "state": "attached"})
	onto("close_popup (child)", h.ok("close_popup", nil), child, "/p/kid")
	onto("close_popup (after the kid)", h.ok("close_popup", nil), opener, "/p/opener")
}

// stallingControl is the stand-in control whose report and close never
// answer: each call waits for its context to end, and records how long the
// caller gave it.
type stallingControl struct {
	*standInControl
	mu    sync.Mutex
	given map[string]time.Duration // per call: the time left on its context; -1 without a deadline
}

func (c *stallingControl) Report(ctx context.Context, id string) (control.Report, error) {
	return control.Report{}, c.stall(ctx, "report")
}

func (c *stallingControl) CloseSession(ctx context.Context, id string) (control.CloseResponse, error) {
	return control.CloseResponse{}, c.stall(ctx, "close")
}

func (c *stallingControl) stall(ctx context.Context, call string) error {
	left := time.Duration(-1)
	dl, ok := ctx.Deadline()
	if ok {
		left = time.Until(dl)
	}
	c.mu.Lock()
	c.given[call] = left
	c.mu.Unlock()
	if !ok || left > reportTimeout {
		// Unbounded: answer at once rather than hang the test; the test
		// fails on what was recorded.
		return agentvault.Errorf(agentvault.CodeUpstream, "control API unreachable")
	}
	select {
	case <-ctx.Done():
	case <-time.After(2 * time.Minute):
	}
	return agentvault.Wrap(agentvault.CodeUpstream, ctx.Err(), "control API unreachable")
}

// TestSeed004_ReportStallRefuses: when the proxy does not answer the report
// read, get_run_report and close_session give it at most 5 s and then
// refuse, saying not to read it as nothing filled, instead of answering a
// report of zeros.
func TestSeed004_ReportStallRefuses(t *testing.T) {
	ctl := &stallingControl{standInControl: &standInControl{}, given: map[string]time.Duration{}}
	h := newControlHarness(t, ctl, ctl.standInControl)
	h.ok("open_page", map[string]any{"url": h.site.CheckoutURL()})
	for _, tool := range []string{"get_run_report", "close_session"} {
		txt, isErr := h.call(tool, nil)
		if !isErr || !strings.HasPrefix(txt, "status=error code=upstream_error") {
			t.Fatalf("%s with the proxy stalled: %q, want a refusal", tool, txt)
		}
		if !strings.Contains(txt, "Do NOT read this as nothing having been filled") || strings.Contains(txt, "filledFieldKinds") {
			t.Fatalf("%s: %q", tool, txt)
		}
	}
	ctl.mu.Lock()
	defer ctl.mu.Unlock()
	for _, call := range []string{"report", "close"} {
		left, ok := ctl.given[call]
		if !ok {
			t.Fatalf("the %s read never reached the proxy", call)
		}
		if left < 0 || left > reportTimeout {
			t.Errorf("the %s read was given %v, want at most %v", call, left, reportTimeout)
		}
	}
}

// TestSeed004_CloseSessionWithoutSession: close_session before any session
// was opened answers that there is none and carries no report, and says not
// to read that as nothing filled; get_run_report refuses.
func TestSeed004_CloseSessionWithoutSession(t *testing.T) {
	h := newHarness(t)
	m := jsonOf(t, h.ok("close_session", nil))
	if r, ok := m["report"]; !ok || r != nil {
		t.Fatalf("close_session without a session: report %v, want null", r)
	}
	if st, _ := m["status"].(string); st != "No session was open" {
		t.Fatalf("status %q", st)
	}
	if note, _ := m["note"].(string); !strings.Contains(note, "no session was opened") || !strings.Contains(note, "Do NOT read this as nothing having been filled") {
		t.Fatalf("note %q", note)
	}
	h.refused("get_run_report", nil, agentvault.CodeNoPage)
}

// TestSeed004_AttributeTotalNamesACurrency: declare_page_hint with read
// attribute reads the listed attribute; a value that names a currency is
// the total, a bare figure is refused hint_uncertain, though the element's
// text names one.
func TestSeed004_AttributeTotalNamesACurrency(t *testing.T) {
	site, spki := popupSite(t)
	ctl := &standInControl{}
	h := newControlHarness(t, ctl, ctl, spki)
	h.ok("open_page", map[string]any{"url": site.URL + "/p/total"})
	txt := h.ok("declare_page_hint", map[string]any{"kind": "order.total", "selector": "#priced", "read": "attribute", "attribute": "data-total"})
	if !strings.Contains(txt, `"accepted":true`) || !strings.Contains(txt, `"amount":"42.00"`) || !strings.Contains(txt, `"currency":"USD"`) {
		t.Fatalf("an attribute naming its currency: %s", txt)
	}
	h.refused("declare_page_hint", map[string]any{"kind": "order.total", "selector": "#bare", "read": "attribute", "attribute": "data-total"}, agentvault.CodeHintUncertain)
}

// TestSeed004_CloseSessionTeardownError: when the browser cannot be closed
// cleanly (here the Playwright driver this test process started has been
// killed under it), close_session still closes the session and returns the
// report, its status says so and teardownError is set.
func TestSeed004_CloseSessionTeardownError(t *testing.T) {
	h := newHarness(t)
	h.ok("open_page", map[string]any{"url": h.site.CheckoutURL()})
	killDriver(t)
	m := jsonOf(t, h.ok("close_session", nil))
	if m["status"] != "Session closed; the browser did not close cleanly" || m["teardownError"] == nil || m["teardownError"] == "" {
		t.Fatalf("close_session after the driver died: %v", m)
	}
	if _, ok := m["report"].(map[string]any); !ok {
		t.Fatalf("no report: %v", m)
	}
}

// killDriver kills the Playwright driver this test process started (a
// child of this process), as a driver crash would.
func killDriver(t *testing.T) {
	t.Helper()
	killed := 0
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err1 := os.ReadFile("/proc/" + e.Name() + "/stat")
		cmd, err2 := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err1 != nil || err2 != nil {
			continue
		}
		// stat: pid (comm) state ppid ...
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(os.Getpid()) || !strings.Contains(string(cmd), "run-driver") {
			continue
		}
		if p, err := os.FindProcess(pid); err == nil && p.Kill() == nil {
			killed++
		}
	}
	if killed != 1 {
		t.Fatalf("killed %d driver processes of this test, want 1", killed)
	}
}
