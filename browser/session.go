package browser

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/redact"
	"github.com/mxschmitt/playwright-go"
)

// Target names an element: a Playwright selector (CSS, text=, aria-ref=eN,
// ...) and, when the element lives in an iframe, the CSS selector of that
// iframe.
type Target struct {
	Selector string
	Frame    string
}

func (t Target) String() string {
	if t.Frame == "" {
		return t.Selector
	}
	return t.Selector + " in " + t.Frame
}

// Session is one browser context: its page stack (the current page is the
// top) and the queue of popups no tool has picked up yet.
type Session struct {
	b   *Browser
	ctx playwright.BrowserContext

	mu           sync.Mutex
	stack        []playwright.Page // openers below, current on top
	queue        []popup           // tabs opened and not yet taken
	popupArrived chan struct{}
	// opened counts every tab a page of the session opened; announced is
	// how many of them a tool answer has reported (or wait_for_popup took).
	opened, announced int
	// blanking is set while ClosePopup opens a blank page, so that adopt
	// does not take that page for a tab a page opened.
	blanking bool
	// gone are the pages whose close event came (goneMu, not mu: it is
	// asked under mu). playwright-go's IsClosed reads a flag its event
	// goroutine sets with no synchronisation, so the session asks isClosed.
	goneMu   sync.Mutex
	gone     map[playwright.Page]bool
	refusals []Refusal
	closed   bool
	netlog   *netLog // get_network_log, when started (netlog.go)

	// epoch counts the actions taken on the session's pages (clicks, keys,
	// fills, navigations, the owner's input in a hand-off): a kept reading
	// is only reused within one epoch, since a pointer or focus move can
	// change what shows without any DOM change. navs counts main-frame
	// navigations, so a click can tell it navigated.
	epoch, navs atomic.Uint64
	// snapMu orders the page readings (snapshot.go): last is the kept
	// whole-page reading, partial the refs of a part snapshot taken since
	// (nil when Playwright can resolve every ref of the last reading), and
	// watchKey the name of the change watcher in each frame.
	snapMu   sync.Mutex
	last     *reading
	partial  map[string]bool
	watchKey string
	// noReadings stops the readings navigations take ahead of a snapshot
	// (SetReadings), once snapshots are refused for the session.
	noReadings atomic.Bool
	// pend are the change tokens noteChanges took last (pendMu), pendSeq
	// orders them.
	pendMu  sync.Mutex
	pend    *pending
	pendSeq atomic.Uint64
	// ahead is closed when the reading readAhead (after a wait or a
	// navigation) started last is done (aheadMu): a whole-page snapshot
	// waits for it first.
	aheadMu sync.Mutex
	ahead   chan struct{}
	// frameMemos are the iframes FrameOf found, by selector.
	frameMu    sync.Mutex
	frameMemos map[string]*frameMemo

	// release ends a managed provider's session (its browser goes with
	// it); nil for a context of a shared browser.
	release func() error
	// solver is the managed browser's captcha solver; nil when it has
	// none or it is off.
	solver *solverState
}

// SetReadings says whether navigations and waits should read the page
// ahead of a snapshot (warm, ReadAhead). Off, none is taken and the kept
// reading is dropped: once a session's snapshots are refused (P19) a
// reading would be work for nothing, and page data held for no one.
func (s *Session) SetReadings(on bool) {
	if wasOff := s.noReadings.Swap(!on); on || wasOff {
		return
	}
	s.pendMu.Lock()
	s.pend = nil
	s.pendMu.Unlock()
	// A reading in flight finishes first (it holds snapMu): the caller,
	// a fill about to type, does not wait for it. A reading that starts
	// later sees readings off and reads nothing.
	go func() {
		s.snapMu.Lock()
		s.last = nil
		s.snapMu.Unlock()
	}()
}

// acted records an action on the page: the kept reading is not reused
// after it.
func (s *Session) acted() { s.epoch.Add(1) }

// Refusal is a request of the session that proxyd refused inside the tunnel.
type Refusal struct {
	Code         string
	ResourceType string // document, fetch, xhr, ...
}

// RefusalCount is how many refusals the session has seen so far.
func (s *Session) RefusalCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.refusals)
}

// RefusalsSince returns the refusals seen after the first n.
func (s *Session) RefusalsSince(n int) []Refusal {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n >= len(s.refusals) {
		return nil
	}
	return append([]Refusal(nil), s.refusals[n:]...)
}

// popup is a queued tab and the page that opened it; opener is nil for a
// tab whose opener had closed by the time the browser reported it (adopt).
type popup struct {
	page   playwright.Page
	opener playwright.Page
}

// adopt queues a tab that a page of the session opened and that no popup
// event will bring: Playwright sends that event to the opener only while
// it is open, so a popup that opens a tab and closes itself in the same
// script leaves its tab with the context's page event alone, and no
// opener. A tab whose opener is open is left to that popup event; the
// blank page ClosePopup opens itself is not queued (blanking).
func (s *Session) adopt(p playwright.Page) {
	if op, _ := p.Opener(); op != nil {
		return
	}
	s.mu.Lock()
	if s.blanking || s.closed {
		s.mu.Unlock()
		return
	}
	s.queue = append(s.queue, popup{page: p})
	s.opened++
	s.mu.Unlock()
	s.watch(p, nil)
	select {
	case s.popupArrived <- struct{}{}:
	default:
	}
}

// isClosed reports whether p's close event has come.
func (s *Session) isClosed(p playwright.Page) bool {
	s.goneMu.Lock()
	defer s.goneMu.Unlock()
	return s.gone[p]
}

// watch registers the popup and close listeners of a page.
func (s *Session) watch(p playwright.Page, opener playwright.Page) {
	p.OnClose(func(playwright.Page) {
		s.goneMu.Lock()
		if s.gone == nil {
			s.gone = map[playwright.Page]bool{}
		}
		s.gone[p] = true
		s.goneMu.Unlock()
	})
	p.OnFrameNavigated(func(f playwright.Frame) {
		if f.ParentFrame() == nil {
			s.navs.Add(1)
		}
		if !s.noReadings.Load() {
			// The change watcher goes in as a document arrives, off the
			// event's path: the first evaluate in a document's world pays
			// for Playwright's helper script, and a snapshot's check,
			// which the walk waits for, should not (a frame that mounts
			// late meets its first snapshot with it in place). Likewise, in
			// a frame, Playwright's selector and snapshot engine, which it
			// compiles into a document's utility world on first use: a
			// query makes it compile while the frame loads, not in the
			// first walk or action that reaches a frame that mounted after
			// the page's reading (profiled: most of such a first
			// snapshot). The top document is read right after its load
			// anyway; compiling there first only delays that reading's
			// check (profiled: a page whose payment frame mounts 400 ms
			// after the load was read after the frame came, and waited for
			// it).
			go func() { _, _ = f.Evaluate(watchScript, s.watchKey) }()
			if f.ParentFrame() != nil {
				go func() { _, _ = f.Locator(":root").Count() }()
			}
		}
	})
	p.OnPopup(func(child playwright.Page) {
		s.mu.Lock()
		s.queue = append(s.queue, popup{page: child, opener: p})
		s.opened++
		s.mu.Unlock()
		s.watch(child, p)
		select {
		case s.popupArrived <- struct{}{}:
		default:
		}
	})
}

// Page returns the current page.
func (s *Session) page() (playwright.Page, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, agentvault.Errorf(agentvault.CodeSessionEnded, "the browser session is closed")
	}
	for len(s.stack) > 0 && s.isClosed(s.stack[len(s.stack)-1]) {
		s.stack = s.stack[:len(s.stack)-1]
	}
	if len(s.stack) == 0 {
		return nil, agentvault.Errorf(agentvault.CodeNoPage, "no page is open: call open_page")
	}
	return s.stack[len(s.stack)-1], nil
}

// HasPage says whether the session is on a live page (after a popup
// closed, the page it returns to).
func (s *Session) HasPage() bool {
	_, err := s.page()
	return err == nil
}

// URL is the current page's address ("" before any navigation).
func (s *Session) URL() string {
	p, err := s.page()
	if err != nil {
		return ""
	}
	return p.URL()
}

// PendingPopups is how many opened tabs wait for WaitForPopup.
func (s *Session) PendingPopups() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, q := range s.queue {
		if !s.isClosed(q.page) {
			n++
		}
	}
	return n
}

// Close closes the context and every page in it.
func (s *Session) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	if s.release != nil {
		return s.release()
	}
	return s.ctx.Close()
}

// CaptchaPending reports whether the managed browser's solver is working on
// a challenge now: Browserbase's from the solver's console messages,
// Steel's from its captcha status API (asked at most once a second). A
// session without a solver answers false and asks nothing.
func (s *Session) CaptchaPending(ctx context.Context) (bool, error) {
	if s.solver == nil {
		return false, nil
	}
	return s.solver.pending(ctx)
}

func ms(d time.Duration) *float64 {
	f := float64(d.Milliseconds())
	if f <= 0 {
		f = 1
	}
	return &f
}

// locator resolves a target on the current page.
func (s *Session) locator(t Target) (playwright.Locator, playwright.Page, error) {
	p, err := s.page()
	if err != nil {
		return nil, nil, err
	}
	if strings.TrimSpace(t.Selector) == "" {
		return nil, nil, agentvault.Errorf(agentvault.CodeInvalidInput, "selector is empty")
	}
	for _, sel := range []string{t.Selector, t.Frame} {
		if ref, ok := ariaRef(sel); ok {
			s.restoreRefs(p, ref)
		}
	}
	if t.Frame != "" {
		return p.FrameLocator(t.Frame).Locator(t.Selector), p, nil
	}
	return p.Locator(t.Selector), p, nil
}

// ariaRef returns the ref a selector names with aria-ref= (its first one).
func ariaRef(sel string) (string, bool) {
	i := strings.Index(sel, "aria-ref=")
	if i < 0 {
		return "", false
	}
	ref := sel[i+len("aria-ref="):]
	if j := strings.IndexAny(ref, " >]"); j >= 0 {
		ref = ref[:j]
	}
	return ref, ref != ""
}

// Goto navigates the current page and waits for its load event.
func (s *Session) Goto(url string, timeout time.Duration) error {
	p, err := s.page()
	if err != nil {
		return err
	}
	before := p.URL()
	s.acted()
	start := time.Now()
	resp, err := p.Goto(url, playwright.PageGotoOptions{Timeout: ms(timeout), WaitUntil: playwright.WaitUntilStateLoad})
	if err != nil {
		return navError(err)
	}
	if err := proxyRefusal(resp); err != nil {
		// The page did not change, as far as the agent is concerned: go
		// back to where the tab was.
		if before != "" && before != "about:blank" {
			_, _ = p.GoBack(playwright.PageGoBackOptions{Timeout: ms(5 * time.Second)})
		}
		return err
	}
	// The reading warm starts asks every frame for its change token
	// itself; noteChanges would ask a second time, in the same renderers,
	// while the walk runs.
	s.warm(p, start)
	return nil
}

// warm starts the freshly loaded page's first whole-page reading, the one
// a snapshot_page would take, in the background, and returns: the
// navigation answers at the load, and the page is walked while the agent
// reads that answer and decides what to do next. Playwright injects its
// selector and snapshot engine into each document on first use, the first
// walk of a tree pays for the renderer's cold style and accessibility
// caches, and the change watchers start in every frame; playwright-mcp's
// navigate does the same walk before it answers (with a snapshot). A
// snapshot that comes while the reading runs waits for it and answers from
// it when the page has not moved on; an action that comes first queues in
// the renderer behind the walk, as it would have queued behind a
// navigation that waited for it.
//
// It logs, at debug level, how long the navigation took up to its load
// (from start): timings only.
func (s *Session) warm(p playwright.Page, start time.Time) {
	if s.b != nil && s.b.log != nil {
		s.b.log.Debug("page navigated", "load_ms", msSince(start, time.Now()))
	}
	s.readAhead(p)
}

// msSince is the time from a to b in milliseconds, for a debug line.
func msSince(a, b time.Time) float64 { return float64(b.Sub(a).Microseconds()) / 1000 }

// ReadAhead takes, in the background, the whole-page reading (field
// selectors included) the next snapshot_page would take, for a caller that
// just waited for something to show: a page that renders after its load (a
// single-page app, a late payment form) is out of date in the navigation's
// reading, and the snapshot an agent asks for after the wait would walk it
// again. A snapshot that comes while the reading runs waits for it and
// answers from it when the page has not moved on since; an action that
// comes first makes it moot (the reading is not started after one, and
// one taken before an action is never reused after it). Nothing is read
// once readings are off (SetReadings).
//
// The change tokens noteChanges took before now are dropped first: taken
// before the page finished rendering, they would make the reading stand
// for an older page, and the next snapshot would walk again.
func (s *Session) ReadAhead() {
	p, err := s.page()
	if err != nil {
		return
	}
	s.readAhead(p)
}

// readAhead is ReadAhead for page p (a navigation's page: the reading is
// not taken when another page has come on top since).
func (s *Session) readAhead(p playwright.Page) {
	if s.noReadings.Load() {
		return
	}
	epoch := s.epoch.Load()
	seq := s.pendSeq.Add(1)
	s.pendMu.Lock()
	if s.pend == nil || s.pend.seq < seq {
		s.pend = &pending{seq: seq} // no tokens: outranks older ones, never used
	}
	s.pendMu.Unlock()
	readAheads.Add(1)
	done := make(chan struct{})
	s.aheadMu.Lock()
	s.ahead = done
	s.aheadMu.Unlock()
	go func() {
		defer close(done)
		s.snapMu.Lock()
		defer s.snapMu.Unlock()
		if s.noReadings.Load() || s.epoch.Load() != epoch {
			return
		}
		if cur, err := s.page(); err != nil || cur != p {
			return
		}
		_, _ = s.readPage(p, MaxSnapshotDepth, true)
	}()
}

// readAheads counts ReadAhead calls that started a reading, for tests.
var readAheads atomic.Int64

// settleNavigation waits, after a click or key, for the load of a document
// it navigated the main frame to (up to timeout; Playwright's click already
// waited for the navigation to commit), then warms it, or, after a click
// that did not navigate (at once), takes the frames' change tokens
// (noteChanges).
func (s *Session) settleNavigation(p playwright.Page, navsBefore uint64, timeout time.Duration) {
	if s.navs.Load() == navsBefore || s.isClosed(p) {
		s.noteChanges()
		return
	}
	start := time.Now()
	_ = p.WaitForLoadState(playwright.PageWaitForLoadStateOptions{State: playwright.LoadStateLoad, Timeout: ms(timeout)})
	s.warm(p, start)
}

// RefusalHeader is the header proxyd sets on a refusal it answers inside a
// tunnel; the body is {"code","message"} with a public message.
const RefusalHeader = "x-agentvault-code"

// proxyRefusal turns proxyd's in-tunnel refusal into its coded error.
func proxyRefusal(resp playwright.Response) error {
	if resp == nil {
		return nil
	}
	code, err := resp.HeaderValue(RefusalHeader)
	if err != nil || code == "" {
		return nil
	}
	var body struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if raw, err := resp.Body(); err == nil && len(raw) <= 4096 {
		_ = json.Unmarshal(raw, &body)
	}
	msg := body.Message
	if msg == "" || body.Code != code {
		msg = "the proxy refused the request"
	}
	return agentvault.Errorf(agentvault.Code(code), "%s", msg)
}

// navError classifies a navigation failure without echoing the page.
func navError(err error) error {
	msg := err.Error()
	switch {
	case errors.Is(err, playwright.ErrTimeout):
		return agentvault.Wrap(agentvault.CodeTimeout, err, "the page did not finish loading in time")
	case strings.Contains(msg, "ERR_CERT_AUTHORITY_INVALID"):
		// Only proxyd's leaves reach the browser (it verifies the real
		// site itself): an unknown authority is a browser that does not
		// trust proxyd's CA, which one mcpd did not launch must.
		return agentvault.Wrap(agentvault.CodeUpstream, err,
			"the browser does not trust proxyd's certificate authority (net::ERR_CERT_AUTHORITY_INVALID): a remote browser must be started trusting it, see docs/browsers.md")
	case strings.Contains(msg, "ERR_INVALID_AUTH_CREDENTIALS"):
		// A challenge nobody answered (proxyauth.go): a site's HTTP
		// authentication, never answered, or a proxy credential refused.
		return agentvault.Wrap(agentvault.CodeUpstream, err,
			"the site asked for HTTP authentication (the browser's own sign-in prompt, not a form), which is never answered: nothing was sent (net::ERR_INVALID_AUTH_CREDENTIALS)")
	case strings.Contains(msg, "ERR_TUNNEL_CONNECTION_FAILED"), strings.Contains(msg, "ERR_PROXY"):
		return agentvault.Wrap(agentvault.CodeUpstream, err, "the proxy refused or could not reach this site (%s)", netCode(msg))
	case strings.Contains(msg, "net::"):
		return agentvault.Wrap(agentvault.CodeUpstream, err, "navigation failed: %s", netCode(msg))
	}
	return agentvault.Wrap(agentvault.CodeUpstream, err, "navigation failed")
}

// netCode extracts Chromium's net::ERR_* name, which carries no page data.
func netCode(msg string) string {
	i := strings.Index(msg, "net::ERR_")
	if i < 0 {
		return "unknown error"
	}
	j := i + len("net::")
	for j < len(msg) && (msg[j] == '_' || (msg[j] >= 'A' && msg[j] <= 'Z') || (msg[j] >= '0' && msg[j] <= '9')) {
		j++
	}
	return msg[i:j]
}

// Action is what a click or press observed.
type Action struct {
	// NewTab is true when a tab opened that no answer has reported yet: by
	// the time the click or press returned, or earlier.
	NewTab bool
}

// TakeNewTabs reports whether a tab opened since the last report, and
// marks it reported. A click does not wait for a tab that may open later
// (no fixed window): the popup event queues it whenever it comes, and the
// next answer that calls this reports it.
func (s *Session) TakeNewTabs() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.opened > s.announced
	s.announced = s.opened
	return n
}

// Click clicks the target.
func (s *Session) Click(t Target, timeout time.Duration) (Action, error) {
	loc, p, err := s.locator(t)
	if err != nil {
		return Action{}, err
	}
	s.acted()
	navs := s.navs.Load()
	if err := loc.Click(playwright.LocatorClickOptions{Timeout: ms(timeout)}); err != nil {
		if covered(err) {
			return Action{}, coveredError(t, timeout, activationKey(loc), err)
		}
		return Action{}, actionError("click", t, timeout, err)
	}
	s.settleNavigation(p, navs, timeout)
	return Action{NewTab: s.TakeNewTabs()}, nil
}

// Press sends one key or chord to the target.
func (s *Session) Press(t Target, key string, timeout time.Duration) (Action, error) {
	loc, p, err := s.locator(t)
	if err != nil {
		return Action{}, err
	}
	s.acted()
	navs := s.navs.Load()
	if err := loc.Press(key, playwright.LocatorPressOptions{Timeout: ms(timeout)}); err != nil {
		return Action{}, actionError("press", t, timeout, err)
	}
	s.settleNavigation(p, navs, timeout)
	return Action{NewTab: s.TakeNewTabs()}, nil
}

// covered reports a click that timed out because another element covers
// the target and never reached it. Playwright's "intercepts pointer
// events" alone is not that: followed by "performing click action" or
// "click action done", the click landed and the timeout was the wait after
// it (actionError says so).
func covered(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "intercepts pointer events") &&
		!strings.Contains(msg, "performing click action") && !strings.Contains(msg, "click action done")
}

// activationScript names the key that activates an element the way a
// click does: Space for a checkbox, radio or switch, Enter for a button,
// a link or a submit input, "" when no key does (a plain element with a
// click handler).
const activationScript = `(e) => {
	const tag = e.tagName.toLowerCase();
	const type = (e.getAttribute('type') || '').toLowerCase();
	const role = (e.getAttribute('role') || '').toLowerCase();
	if ((tag === 'input' && (type === 'checkbox' || type === 'radio')) || ['checkbox', 'radio', 'switch'].includes(role)) return 'Space';
	if (tag === 'button' || tag === 'summary' || (tag === 'a' && e.hasAttribute('href')) ||
		(tag === 'input' && ['submit', 'button', 'reset', 'image'].includes(type)) ||
		['button', 'link', 'menuitem', 'tab', 'option'].includes(role)) return 'Enter';
	return '';
}`

// activationKey reads which key activates the click's target ("" when
// none, or when the element cannot be read any more).
func activationKey(loc playwright.Locator) string {
	v, err := loc.First().Evaluate(activationScript, nil, playwright.LocatorEvaluateOptions{Timeout: ms(2 * time.Second)})
	if err != nil {
		return ""
	}
	k, _ := v.(string)
	return k
}

// coveredError is a click that something covers (an expanded payment
// iframe, a cookie wall, a modal scrim): it says so and names the fix
// for this target (seed 004, click): press with the key that activates
// it, or, when no key does, clear the overlay first.
func coveredError(t Target, timeout time.Duration, key string, err error) error {
	if key == "" {
		return agentvault.Wrap(agentvault.CodeTimeout, err,
			"click on %s timed out after %d ms because another element covers it, and no key activates this target: clear the overlay first (close the cookie banner, dialog or expanded frame covering it), then click again", t, timeout.Milliseconds())
	}
	return agentvault.Wrap(agentvault.CodeTimeout, err,
		"click on %s timed out after %d ms because another element covers it: use press with %s on %s instead", t, timeout.Milliseconds(), key, t)
}

// actionError explains a failed click or press in our own words. Playwright's
// text can quote page markup, so only its shape is read here; the raw text
// stays in the cause for the debug log.
func actionError(verb string, t Target, timeout time.Duration, err error) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "intercepts pointer events") &&
		(strings.Contains(msg, "performing "+verb+" action") || strings.Contains(msg, verb+" action done")):
		return agentvault.Wrap(agentvault.CodeTimeout, err,
			"%s on %s landed, then timed out waiting after it: read the page before repeating it, the action may already have taken effect", verb, t)
	case strings.Contains(msg, "intercepts pointer events"):
		return agentvault.Wrap(agentvault.CodeTimeout, err,
			"%s on %s timed out after %d ms because another element covers it: use press with Enter (Space for a checkbox or radio), or clear the overlay", verb, t, timeout.Milliseconds())
	case strings.Contains(msg, "strict mode violation"):
		return agentvault.Wrap(agentvault.CodeInvalidInput, err, "%s: selector %s matches more than one element; narrow it", verb, t)
	case strings.Contains(msg, "not attached"), strings.Contains(msg, "Target page, context or browser has been closed"):
		return agentvault.Wrap(agentvault.CodeNoPage, err, "%s: the page or frame went away", verb)
	case strings.Contains(msg, "net::ERR_"):
		return agentvault.Wrap(agentvault.CodeUpstream, err, "%s led to a navigation that failed: %s", verb, netCode(msg))
	case errors.Is(err, playwright.ErrTimeout):
		return agentvault.Wrap(agentvault.CodeTimeout, err, "%s: %s did not become actionable within %d ms", verb, t, timeout.Milliseconds())
	case strings.Contains(msg, "Unknown key"):
		return agentvault.Wrap(agentvault.CodeInvalidInput, err, "%s: unknown key name", verb)
	}
	return agentvault.Wrap(agentvault.CodeInternal, err, "%s on %s failed", verb, t)
}

// Fill types value into the target. The value never appears in the error:
// Playwright's error text is dropped and replaced by a classification.
func (s *Session) Fill(t Target, value string, timeout time.Duration) error {
	loc, _, err := s.locator(t)
	if err != nil {
		return err
	}
	if t.Frame == "" {
		// An unframed fill takes the first match; a framed one stays
		// strict, because a second match inside a card frame is ambiguous
		// about which field gets a card value.
		loc = loc.First()
	}
	s.acted()
	if err := loc.Fill(value, playwright.LocatorFillOptions{Timeout: ms(timeout)}); err != nil {
		return fillError(t, timeout, err)
	}
	s.noteChanges()
	return nil
}

// FillIn is Fill of a field in the frame h, the frame FrameOf found for
// t.Frame: the value goes into the document whose URL the caller checked
// (a card's authorization names that frame's origin), and the iframe is not
// looked up a second time. The field's selector stays strict inside it.
func (s *Session) FillIn(h *FrameHandle, t Target, value string, timeout time.Duration) error {
	if strings.TrimSpace(t.Selector) == "" {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "selector is empty")
	}
	if h.Gone() {
		return agentvault.Errorf(agentvault.CodeFieldNotFound, "the frame %s left the page before anything was typed in %s; look it up again", t.Frame, t.Selector)
	}
	s.acted()
	if err := h.f.Locator(t.Selector).Fill(value, playwright.LocatorFillOptions{Timeout: ms(timeout)}); err != nil {
		return fillError(t, timeout, err)
	}
	s.noteChanges()
	return nil
}

// SelectOption picks the option of a <select> that matches value: its value
// or label exactly, else the same number written differently ("7" and "07",
// "2030" and "30"). The options are read once, so a value with no match
// fails at once instead of waiting out the timeout.
func (s *Session) SelectOption(t Target, value string, timeout time.Duration) error {
	loc, _, err := s.locator(t)
	if err != nil {
		return err
	}
	if t.Frame == "" {
		loc = loc.First()
	}
	if err := loc.WaitFor(playwright.LocatorWaitForOptions{State: playwright.WaitForSelectorStateAttached, Timeout: ms(timeout)}); err != nil {
		return fillError(t, timeout, err)
	}
	raw, err := loc.Evaluate(`(el) => el.tagName === 'SELECT' ? Array.from(el.options).map((o) => [o.value, (o.label || o.textContent || '').trim()]) : null`, nil,
		playwright.LocatorEvaluateOptions{Timeout: ms(timeout)})
	if err != nil {
		return fillError(t, timeout, err)
	}
	list, ok := raw.([]any)
	if !ok {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "%s is not a <select>: use kind input", t)
	}
	var opts [][2]string
	for _, o := range list {
		pair, _ := o.([]any)
		if len(pair) == 2 {
			v, _ := pair[0].(string)
			l, _ := pair[1].(string)
			opts = append(opts, [2]string{v, l})
		}
	}
	pick, ok := chooseOption(opts, value)
	if !ok {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "%s has no option matching the value given (%d options)", t, len(opts))
	}
	s.acted()
	if _, err := loc.SelectOption(playwright.SelectOptionValues{Values: &[]string{pick}}, playwright.LocatorSelectOptionOptions{Timeout: ms(timeout)}); err != nil {
		return fillError(t, timeout, err)
	}
	s.noteChanges()
	return nil
}

// chooseOption returns the value of the option matching want: exact value,
// exact label, then numeric equivalents (leading zeros, a four-digit year
// against its last two digits).
func chooseOption(opts [][2]string, want string) (string, bool) {
	want = strings.TrimSpace(want)
	for _, o := range opts {
		if o[0] == want {
			return o[0], true
		}
	}
	for _, o := range opts {
		if strings.EqualFold(o[1], want) {
			return o[0], true
		}
	}
	n, ok := digits(want)
	if !ok {
		return "", false
	}
	for _, o := range opts {
		for _, cand := range o {
			m, ok := digits(strings.TrimSpace(cand))
			if !ok {
				continue
			}
			if trimZeros(m) == trimZeros(n) || (len(n) == 4 && len(m) == 2 && n[2:] == m) || (len(n) == 2 && len(m) == 4 && m[2:] == n) {
				return o[0], true
			}
		}
	}
	return "", false
}

func digits(s string) (string, bool) {
	if s == "" || len(s) > 8 {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return "", false
		}
	}
	return s, true
}

func trimZeros(s string) string {
	t := strings.TrimLeft(s, "0")
	if t == "" {
		return "0"
	}
	return t
}

func fillError(t Target, timeout time.Duration, err error) error {
	msg := err.Error()
	// Only fixed markers are read; the cause is replaced so that no typed
	// value can ride along in a log line.
	cause := errors.New("playwright fill error (text withheld)")
	switch {
	case strings.Contains(msg, "strict mode violation"):
		return agentvault.Wrap(agentvault.CodeInvalidInput, cause, "selector %s matches more than one element; narrow it", t)
	case strings.Contains(msg, "not an <input>"), strings.Contains(msg, "Element is not an"), strings.Contains(msg, "not a <select>"):
		return agentvault.Wrap(agentvault.CodeInvalidInput, cause, "%s is not a field that takes text (or not a select)", t)
	case strings.Contains(msg, "not editable"), strings.Contains(msg, "readonly"), strings.Contains(msg, "disabled"):
		return agentvault.Wrap(agentvault.CodeFieldNotFound, cause, "%s is disabled or read-only", t)
	case errors.Is(err, playwright.ErrTimeout):
		return agentvault.Wrap(agentvault.CodeFieldNotFound, cause, "%s was not found, visible and editable within %d ms", t, timeout.Milliseconds())
	case strings.Contains(msg, "closed"):
		return agentvault.Wrap(agentvault.CodeNoPage, cause, "the page or frame went away")
	}
	return agentvault.Wrap(agentvault.CodeInternal, cause, "fill of %s failed", t)
}

// WaitState is one of attached, detached, visible, hidden.
type WaitState string

// WaitFor waits until the target reaches state (visible when empty).
func (s *Session) WaitFor(t Target, state WaitState, timeout time.Duration) error {
	loc, _, err := s.locator(t)
	if err != nil {
		return err
	}
	o := playwright.LocatorWaitForOptions{Timeout: ms(timeout)}
	switch state {
	case "", "visible":
		o.State = playwright.WaitForSelectorStateVisible
	case "attached":
		o.State = playwright.WaitForSelectorStateAttached
	case "detached":
		o.State = playwright.WaitForSelectorStateDetached
	case "hidden":
		o.State = playwright.WaitForSelectorStateHidden
	default:
		return agentvault.Errorf(agentvault.CodeInvalidInput, "state must be attached, detached, visible or hidden")
	}
	// A selector matching several elements waits for the first match (for
	// visible: the first visible one) instead of failing strict mode.
	if o.State == playwright.WaitForSelectorStateVisible {
		loc = loc.Filter(playwright.LocatorFilterOptions{Visible: playwright.Bool(true)})
	}
	// Playwright polls a wait at 0, 20, 70, 170 and 270 ms and then every
	// 500 ms, but drops the steps longer than a fifth of the call's
	// timeout: what shows 700 ms into a long wait is seen at 770, and
	// after 1.3 s up to half a second late. The wait is asked in short
	// calls instead, each polling every 20 ms (the first waitFastFor) or
	// every 100 ms (after it), until the caller's timeout.
	begun := time.Now()
	deadline := begun.Add(timeout)
	var werr error
	for first := true; ; first = false {
		left := time.Until(deadline)
		if !first && left < time.Millisecond {
			break // werr is the last call's timeout
		}
		chunk := waitChunk
		if time.Since(begun) < waitFastFor {
			chunk = waitFastChunk
		}
		o.Timeout = ms(max(min(chunk, left), time.Millisecond))
		switch o.State {
		case playwright.WaitForSelectorStateVisible, playwright.WaitForSelectorStateAttached:
			// A wait for an element to appear asks Playwright to expect a
			// count other than zero. playwright-go's WaitFor asks for the
			// element's handle, which brings it into the page's main world
			// and previews it there, at the price of compiling Playwright's
			// whole engine into that world (profiled: most of a first wait
			// on a page), and the handle is never released. The polling is
			// the same; the failure carries a count, never the page
			// (to.be.visible would carry a snapshot of it).
			werr = playwright.NewPlaywrightAssertions().Locator(loc).Not().ToHaveCount(0, playwright.LocatorAssertionsToHaveCountOptions{Timeout: o.Timeout})
		default:
			werr = loc.First().WaitFor(o) // no element comes back
		}
		if werr == nil {
			break
		}
		if _, timedOut := waitFailure(werr); !timedOut {
			break
		}
	}
	if werr != nil {
		return waitError(t, state, timeout, werr)
	}
	s.noteChanges()
	return nil
}

// The calls a wait is asked in: Playwright polls every 20 ms in a call of
// under 250 ms and every 100 ms in one of under 2.5 s.
const (
	waitFastChunk = 240 * time.Millisecond
	waitFastFor   = 2 * time.Second
	waitChunk     = 2 * time.Second
)

// waitFailure reads a failed wait's call: whether it failed only because
// what it waited for did not hold in time, and the error to report. An
// expectation that could not be checked names its cause after "Error: " (a
// selector matching several elements, a page that closed); one that did
// not hold in time has none.
func waitFailure(err error) (cause error, timedOut bool) {
	timedOut = errors.Is(err, playwright.ErrTimeout)
	if msg := err.Error(); strings.HasPrefix(msg, "Locator expected not to have count") {
		if _, c, ok := strings.Cut(msg, "\nError: "); ok {
			return errors.New(c), timedOut
		}
		return err, true
	}
	return err, timedOut
}

// waitError classifies a failed wait. An expectation that did not hold in
// time says so with no cause; one that could not be checked names its
// cause after "Error: " (a selector matching several elements, a page
// that closed).
func waitError(t Target, state WaitState, timeout time.Duration, err error) error {
	err, timedOut := waitFailure(err)
	if timedOut {
		return agentvault.Wrap(agentvault.CodeTimeout, err, "%s did not become %s within %d ms", t, stateName(state), timeout.Milliseconds())
	}
	return actionError("wait", t, timeout, err)
}

func stateName(s WaitState) string {
	if s == "" {
		return "visible"
	}
	return string(s)
}

// Counted is what Count saw.
type Counted struct {
	Count int
	// Visible is nil when it could not be checked (too many matches, or the
	// page navigated mid-read).
	Visible *int
}

// maxVisibleCheck bounds the per-element visibility probe.
const maxVisibleCheck = 20

// Count counts matches now, without waiting.
func (s *Session) Count(t Target) (Counted, error) {
	loc, _, err := s.locator(t)
	if err != nil {
		return Counted{}, err
	}
	if strings.HasPrefix(strings.TrimSpace(t.Selector), "aria-ref=") {
		// A ref can point into a child frame; only Playwright's own
		// locator calls follow it there, evaluateAll does not.
		n, err := loc.Count()
		if err != nil {
			return Counted{}, agentvault.Wrap(agentvault.CodeInternal, err, "count of %s failed (the page may have navigated: ask again)", t)
		}
		c := Counted{Count: n}
		if n == 1 {
			v := 0
			if ok, err := loc.IsVisible(); err == nil && ok {
				v = 1
			}
			c.Visible = &v
		}
		return c, nil
	}
	// One round trip for both numbers: evaluateAll resolves the matches once.
	res, err := loc.EvaluateAll(`(els, max) => {
		const n = els.length;
		if (n > max) return {count: n};
		let v = 0;
		for (const e of els) {
			const r = e.getBoundingClientRect();
			const st = getComputedStyle(e);
			if (r.width > 0 && r.height > 0 && st.visibility !== 'hidden' && st.display !== 'none') v++;
		}
		return {count: n, visible: v};
	}`, maxVisibleCheck)
	if err != nil {
		msg := err.Error()
		if t.Frame != "" && (strings.Contains(msg, "strict mode") || errors.Is(err, playwright.ErrTimeout)) {
			return Counted{}, agentvault.Wrap(agentvault.CodeInvalidInput, err, "frame selector %s must match exactly one iframe", t.Frame)
		}
		if strings.Contains(msg, "Unexpected token") || strings.Contains(msg, "not a valid selector") || strings.Contains(msg, "Unknown engine") {
			return Counted{}, agentvault.Wrap(agentvault.CodeInvalidInput, err, "selector %s is not valid", t.Selector)
		}
		return Counted{}, agentvault.Wrap(agentvault.CodeInternal, err, "count of %s failed (the page may have navigated: ask again)", t)
	}
	m, _ := res.(map[string]any)
	c := Counted{Count: toInt(m["count"])}
	if v, ok := m["visible"]; ok {
		n := toInt(v)
		c.Visible = &n
	}
	return c, nil
}

func toInt(v any) int {
	switch x := v.(type) {
	case int:
		return x
	case int64:
		return int(x)
	case float64:
		return int(x)
	}
	return 0
}

// FrameURL is the URL of the document inside the iframe that frameSelector
// names on the current page.
func (s *Session) FrameURL(frameSelector string) (string, error) {
	h, err := s.FrameOf(frameSelector)
	if err != nil {
		return "", err
	}
	return h.URL(), nil
}

// FrameHandle is the frame an iframe element held when it was looked up.
// Its URL is read when asked (Playwright follows the frame's navigations),
// so a caller that needs a frame's URL twice in one call looks it up once.
type FrameHandle struct{ f playwright.Frame }

// URL is the frame's current document URL.
func (h *FrameHandle) URL() string { return h.f.URL() }

// Gone reports whether the frame left the page (its iframe was removed):
// look the selector up again.
func (h *FrameHandle) Gone() bool { return frameGone(h.f) }

// frameGone reports whether f left its page. playwright-go's IsDetached
// reads a flag its connection goroutine sets without a lock (a data race
// beside a frame going away); the page's frame list, from which the same
// event removes the frame, is read under the page's lock.
func frameGone(f playwright.Frame) bool {
	p := f.Page()
	if p == nil {
		return true
	}
	return !slices.Contains(p.Frames(), f)
}

// FrameOf looks up the frame inside the iframe that frameSelector names on
// the current page (its first match).
//
// The iframe element and its frame are kept per selector (frameMemos): a
// later lookup of the same selector asks the page once whether the
// selector's first match is still that element (one round trip) instead of
// finding the element and asking for its frame again (two). A frame whose
// iframe was removed, another page, or another element is looked up afresh.
func (s *Session) FrameOf(frameSelector string) (*FrameHandle, error) {
	p, err := s.page()
	if err != nil {
		return nil, err
	}
	s.frameMu.Lock()
	m := s.frameMemos[frameSelector]
	s.frameMu.Unlock()
	if m != nil && m.page == p && !frameGone(m.frame) {
		// One call to the driver, which finds the selector's first match
		// and compares it where it is: a locator's Evaluate would also
		// wait for the element, hand its handle back and release it (three
		// calls, eleven CDP commands against four). No match, or another
		// element, falls through to the full lookup, which waits.
		same, err := p.EvalOnSelector(frameSelector, `(el, kept) => el === kept`, m.el, playwright.PageEvalOnSelectorOptions{Strict: playwright.Bool(false)})
		if err == nil && same == true {
			return &FrameHandle{m.frame}, nil
		}
	}
	frameLookups.Add(1)
	loc := p.Locator(frameSelector).First()
	h, err := loc.ElementHandle(playwright.LocatorElementHandleOptions{Timeout: ms(3 * time.Second)})
	if err != nil {
		return nil, agentvault.Wrap(agentvault.CodeFieldNotFound, err, "frame %s not found", frameSelector)
	}
	f, err := h.ContentFrame()
	if err != nil || f == nil {
		go h.Dispose()
		return nil, agentvault.Wrap(agentvault.CodeFieldNotFound, err, "%s is not an iframe with a document", frameSelector)
	}
	s.keepFrame(frameSelector, &frameMemo{page: p, el: h, frame: f})
	return &FrameHandle{f}, nil
}

// frameMemo is what FrameOf found for a selector: the iframe element (its
// handle kept) and the frame inside it.
type frameMemo struct {
	page  playwright.Page
	el    playwright.ElementHandle
	frame playwright.Frame
}

// frameLookups counts FrameOf's full lookups, for tests.
var frameLookups atomic.Int64

// maxFrameMemos bounds the iframe handles a session keeps.
const maxFrameMemos = 16

// keepFrame stores m for sel. The handles it replaces, those of another
// page, and all of them when the bound is reached are released off the
// caller's path.
func (s *Session) keepFrame(sel string, m *frameMemo) {
	s.frameMu.Lock()
	defer s.frameMu.Unlock()
	if s.frameMemos == nil {
		s.frameMemos = map[string]*frameMemo{}
	}
	var drop []playwright.ElementHandle
	full := len(s.frameMemos) >= maxFrameMemos
	for k, old := range s.frameMemos {
		if k == sel || old.page != m.page || full {
			drop = append(drop, old.el)
			delete(s.frameMemos, k)
		}
	}
	s.frameMemos[sel] = m
	if len(drop) > 0 {
		go func() {
			for _, h := range drop {
				_ = h.Dispose()
			}
		}()
	}
}

// PopupResult says where WaitForPopup landed.
type PopupResult struct {
	URL string
	// Child is true when the popup had closed itself and its own child tab
	// became current instead.
	Child bool
}

// WaitForPopup makes the oldest queued tab current, waiting up to timeout
// for one to open.
func (s *Session) WaitForPopup(timeout time.Duration) (PopupResult, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return PopupResult{}, agentvault.Errorf(agentvault.CodeSessionEnded, "the browser session is closed")
		}
		for len(s.queue) > 0 {
			q := s.queue[0]
			s.queue = s.queue[1:]
			child := false
			pg := q.page
			if s.isClosed(pg) {
				// A popup that closed itself: its own child tab, if any, is
				// the one to land on. One it opened in the script that
				// closed it came with no opener (adopt): the first such tab
				// queued after it (another page that closed itself that
				// way while both tabs wait in the queue could have opened
				// it instead; the browser no longer says which).
				i := s.queuedChild(pg)
				if i < 0 {
					i = s.queuedChild(nil)
				}
				if i < 0 {
					continue
				}
				pg, child = s.queue[i].page, true
				s.queue = append(s.queue[:i], s.queue[i+1:]...)
			}
			s.stack = append(s.stack, pg)
			s.announced = s.opened
			s.mu.Unlock()
			s.acted()
			_ = pg.WaitForLoadState(playwright.PageWaitForLoadStateOptions{State: playwright.LoadStateDomcontentloaded, Timeout: ms(5 * time.Second)})
			return PopupResult{URL: pg.URL(), Child: child}, nil
		}
		s.mu.Unlock()
		select {
		case <-s.popupArrived:
		case <-deadline.C:
			return PopupResult{}, agentvault.Errorf(agentvault.CodeTimeout, "no popup opened within %d ms (a late one is queued: one retry is worthwhile)", timeout.Milliseconds())
		}
	}
}

// queuedChild is the index of the first open tab in the queue that opener
// opened (nil: a tab whose opener was gone when it was reported), or -1.
// The caller holds s.mu.
func (s *Session) queuedChild(opener playwright.Page) int {
	for i, c := range s.queue {
		if c.opener == opener && !s.isClosed(c.page) {
			return i
		}
	}
	return -1
}

// ClosePopup closes the current page if it is a popup and returns where the
// session landed: "opener", "sibling", "child" or "blank".
func (s *Session) ClosePopup() (string, string, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return "", "", agentvault.Errorf(agentvault.CodeSessionEnded, "the browser session is closed")
	}
	s.epoch.Add(1)
	var cur playwright.Page
	if len(s.stack) > 1 {
		cur = s.stack[len(s.stack)-1]
		s.stack = s.stack[:len(s.stack)-1]
	}
	s.mu.Unlock()
	if cur != nil && !s.isClosed(cur) {
		_ = cur.Close()
	}
	s.mu.Lock()
	// A child tab the popup opened comes first, then the opener, then a
	// sibling queued under the opener.
	if cur != nil {
		if i := s.queuedChild(cur); i >= 0 {
			q := s.queue[i]
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			s.stack = append(s.stack, q.page)
			s.mu.Unlock()
			return "child", q.page.URL(), nil
		}
	}
	for len(s.stack) > 0 && s.isClosed(s.stack[len(s.stack)-1]) {
		s.stack = s.stack[:len(s.stack)-1]
	}
	if len(s.stack) > 0 {
		top := s.stack[len(s.stack)-1]
		if i := s.queuedChild(top); i >= 0 {
			q := s.queue[i]
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			s.stack = append(s.stack, q.page)
			s.mu.Unlock()
			return "sibling", q.page.URL(), nil
		}
		s.mu.Unlock()
		return "opener", top.URL(), nil
	}
	s.blanking = true
	s.mu.Unlock()
	// Playwright delivers the new page's context event before NewPage
	// returns, so adopt sees blanking set.
	p, err := s.ctx.NewPage()
	s.mu.Lock()
	s.blanking = false
	s.mu.Unlock()
	if err != nil {
		return "", "", agentvault.Wrap(agentvault.CodeInternal, err, "open a blank page")
	}
	s.watch(p, nil)
	s.mu.Lock()
	s.stack = append(s.stack, p)
	s.mu.Unlock()
	return "blank", p.URL(), nil
}

// FrameInfo is one frame of the current page.
type FrameInfo struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

// Frames lists the current page's frames, main frame first.
func (s *Session) Frames() ([]FrameInfo, error) {
	p, err := s.page()
	if err != nil {
		return nil, err
	}
	var out []FrameInfo
	for _, f := range p.Frames() {
		out = append(out, FrameInfo{Name: f.Name(), URL: f.URL()})
	}
	return out, nil
}

// Screenshot captures the viewport with every sensitive field painted over
// before the pixels leave Chromium (P19): redact.MaskSelectors() always, plus
// extra, in every frame.
func (s *Session) Screenshot(extra []string) ([]byte, error) {
	p, err := s.page()
	if err != nil {
		return nil, err
	}
	sels := append(redact.MaskSelectors(), extra...)
	var masks []playwright.Locator
	for _, f := range p.Frames() {
		for _, sel := range sels {
			masks = append(masks, f.Locator(sel))
		}
	}
	b, err := p.Screenshot(playwright.PageScreenshotOptions{
		Mask:      masks,
		MaskColor: playwright.String("#000000"),
		Type:      playwright.ScreenshotTypePng,
		Timeout:   ms(10 * time.Second),
	})
	if err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "screenshot failed")
	}
	return b, nil
}

// Race waits until either target is visible and says which: "success" or
// "failure" ("" with a timeout error when neither appeared).
func (s *Session) Race(success, failure Target, timeout time.Duration) (string, error) {
	ls, _, err := s.locator(success)
	if err != nil {
		return "", err
	}
	// Only visible matches count: a hidden error template earlier in the
	// page must not hold up a visible success message.
	visible := playwright.LocatorFilterOptions{Visible: playwright.Bool(true)}
	ls = ls.Filter(visible)
	either := ls
	var lf playwright.Locator
	if failure.Selector != "" {
		lf, _, err = s.locator(failure)
		if err != nil {
			return "", err
		}
		lf = lf.Filter(visible)
		either = ls.Or(lf)
	}
	if err := either.First().WaitFor(playwright.LocatorWaitForOptions{State: playwright.WaitForSelectorStateVisible, Timeout: ms(timeout)}); err != nil {
		if errors.Is(err, playwright.ErrTimeout) {
			return "", agentvault.Wrap(agentvault.CodeTimeout, err, "neither selector appeared within %d ms", timeout.Milliseconds())
		}
		return "", actionError("wait", success, timeout, err)
	}
	if lf != nil {
		if n, err := lf.Count(); err == nil && n > 0 {
			return "failure", nil
		}
	}
	return "success", nil
}
