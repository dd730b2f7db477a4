package mcpserver

import (
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/browser"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Default and maximum waits of the page tools.
const (
	navTimeout       = 30 * time.Second
	actionTimeout    = 10 * time.Second
	waitDefault      = 10 * time.Second
	waitMax          = 60 * time.Second
	popupDefault     = 30 * time.Second
	popupMax         = 60 * time.Second
	fieldDefault     = 5 * time.Second
	fieldMax         = 60 * time.Second
	loginFieldWait   = 3 * time.Second
	outcomeDefault   = 10 * time.Second
	outcomeMax       = 30 * time.Second
	snapshotPageSize = 24000
	reportTimeout    = 5 * time.Second
)

type catalogIn struct {
	SessionArg
	URL string `json:"url,omitempty" jsonschema:"Page you will fill on, e.g. https://shop.example.com/checkout: narrows cards and logins to that site. Identity and addresses always come back."`
}

type openPageIn struct {
	SessionArg
	URL string `json:"url" jsonschema:"Absolute https:// URL to load in the proxied browser."`
}

type clickIn struct {
	SessionArg
	Selector string `json:"selector" jsonschema:"Element to click: a CSS or Playwright selector, or aria-ref=eN from snapshot_page."`
	Frame    string `json:"frame,omitempty" jsonschema:"CSS selector of the iframe the element is in."`
	Timeout  int    `json:"timeout,omitempty" jsonschema:"Milliseconds to wait for the element to be clickable (default 10000)."`
}

type pressIn struct {
	SessionArg
	Selector string `json:"selector" jsonschema:"Element to send the key to (CSS, Playwright selector or aria-ref=eN)."`
	Key      string `json:"key" jsonschema:"Playwright key name: Enter, Tab, Escape, ArrowDown, Space, or one character."`
	Frame    string `json:"frame,omitempty" jsonschema:"CSS selector of the iframe the element is in."`
}

type waitIn struct {
	SessionArg
	Selector string `json:"selector" jsonschema:"Element to wait for (CSS, Playwright selector or aria-ref=eN)."`
	State    string `json:"state,omitempty" jsonschema:"attached, detached, visible or hidden (default visible)."`
	Timeout  int    `json:"timeout,omitempty" jsonschema:"Milliseconds to wait (default 10000, at most 60000). A wait that returns counts as an action between a card number and its security code."`
	Frame    string `json:"frame,omitempty" jsonschema:"CSS selector of the iframe to wait inside."`
}

type countIn struct {
	SessionArg
	Selector string `json:"selector" jsonschema:"Selector to count right now (never waits). After a token fill, selectors testing a value or with digits in a text match are refused."`
	Frame    string `json:"frame,omitempty" jsonschema:"CSS selector of the iframe to count inside."`
}

type popupIn struct {
	SessionArg
	Timeout int `json:"timeout,omitempty" jsonschema:"Milliseconds to wait for a popup or new tab (default 30000, clamped to 60000)."`
}

type noIn struct {
	SessionArg
}

func (s *Server) register() {
	addTool(s, "get_token_catalog", "List the mock tokens this key may use: identity, addresses, cards and logins (never a real card number or CVV). Pass url to narrow cards and logins to the site you are on. Answers JSON.", true, s.getTokenCatalog)
	addTool(s, "open_page", "Open an https:// page in the proxied browser (launched on the first call); later calls reuse the same tab so you can walk a multi-step checkout. Waits for the page's load event (its iframes included, up to 30 s) and answers; the page is then read once in the background, while you read this answer: snapshot_page waits for that reading if it is still running and answers from it while the page does not change. Content a page adds after its load is not waited for: use wait_for_selector.", false, s.openPage)
	addTool(s, "click", "Click an element, e.g. the place-order button. Waits until the element is visible, stable, enabled and not covered (up to timeout), clicks, and answers; when the click navigated the page (a link, a form post), it also waits for the new page's load (up to timeout) and starts reading it in the background, as open_page does. It does not wait for a settle or a new tab: a tab the click opens is reported in this answer or the next one: call wait_for_popup then. If an overlay covers the target, the error says to use press instead.", false, s.click)
	addTool(s, "press", "Send a key to an element instead of clicking (Enter submits a form, Space toggles a checkbox). Waits for the element (up to 10 s), sends the key, and answers; when the key navigated the page (a form submitted), it also waits for the new page's load and starts reading it in the background, as open_page does. It does not wait for a new tab; a tab it opens is reported in this answer or the next one. Copy/cut/paste chords are refused once a token was filled.", false, s.press)
	addTool(s, "wait_for_selector", "Wait for an element to reach a state (visible by default). Do waiting before a card number goes in: a wait that returns spends the security-code authorization.", false, s.waitForSelector)
	addTool(s, "count", "How many elements match a selector now, and how many are visible. Never waits; safe between a card number and its security code. Answers JSON {count, visible}.", true, s.count)
	addTool(s, "wait_for_popup", "Wait for a popup or new tab this page opened (3-D Secure, wallet, hosted checkout) and make it the current page.", false, s.waitForPopup)
	addTool(s, "close_popup", "Close the current popup and return to the page that opened it (or a sibling or child tab, or a blank page if none is left). Read the page before acting.", false, s.closePopup)
	addTool(s, "fill_checkout", "Fill an ordered list of fields with mock tokens (av_...) or literal values such as expiry month/year. Card order: expiry and billing first, then the card number, then its security code immediately after. Refs (aria-ref) are refused: fill by CSS selector. When the account owner must approve first (a new site, a purchase over a card's threshold, a security code they type), the call waits for them, up to 15 minutes, with progress notifications; tell the user what is waiting and do not repeat the call.", false, s.fillCheckout)
	addTool(s, "fill_login", "Fill a sign-in or signup form's identifier and/or password with a login's tokens. Email-first sign-ins take two calls (identifier, submit, then password). Each field gets 3 s to appear.", false, s.fillLogin)
	addTool(s, "snapshot_page", "The page's accessibility tree as YAML, into iframes: every control and field with a [ref=eN] handle (usable as aria-ref=eN in click, press, count and wait_for_selector), headings, landmarks and text; generic wrappers, labels repeated beside their fields, decorative images and field values are left out, and a select's options are on one line. Each page of the answer is at most 24,000 characters and ends with a '# Field selectors' comment giving, for each field on that page, the CSS selector and frame to fill it by. Cost: it reads the page as it is now (no load or settle wait); a call on a page unchanged since it was last read (open_page, a click that navigated and every snapshot read it) answers from that reading after one quick check per frame, so paging with cursor is cheap; otherwise it walks every frame. On a heavy page, selector or frame reads one part for less. Refused once any token was filled.", true, s.snapshotPage)
	addTool(s, "observe_page", "Fixed, value-free signals about the current page (password field, identifier field, email/phone input, code sent, error, refusing attempts) and scrubbed errorText from validation messages. Answers JSON.", true, s.observePage)
	addTool(s, "list_frames", "The current page's frames as {name, url}, to find the payment iframe. Refused once any token was filled. Answers JSON.", true, s.listFrames)
	addTool(s, "detect_challenge", "Whether the page shows a 3-D Secure step, a one-time code, a CAPTCHA or a block page. Call it when a click or fill seems to do nothing. Answers JSON.", true, s.detectChallenge)
	addTool(s, "get_session_outcome", "After submitting, race a success selector against a failure selector. With confirmsCheckout and submitSelector, the confirmation is recorded only when corroborated; receiptImageKept says whether a masked image of the receipt page was kept for the account owner, which happens only in a session that filled no token (a saved-payment checkout). Answers JSON {outcome: success, failure, timeout or cancelled (a challenge hand-off took the page over mid-check: ask again once it returns)}.", false, s.getSessionOutcome)
	addTool(s, "get_run_report", "What this session actually did, from the proxy's own record: filled token kinds, refused fills, confirmation, order total, credential writes. Read it before saying whether a card was charged. Answers JSON.", true, s.getRunReport)
	addTool(s, "close_session", "Close the browser and end the proxy session; returns the final run report. Answers JSON.", false, s.closeSessionTool)
	s.registerRecipeTools()
	s.registerHandoffTools()
	s.registerNetworkLogTool()
}

func (s *Server) getTokenCatalog(ctx context.Context, in catalogIn) (*mcp.CallToolResult, error) {
	ss, err := s.lookup(in.Session)
	if err != nil {
		return nil, err
	}
	raw, err := s.cfg.Control.Catalog(ctx, s.apiKeyOf(ctx), in.URL)
	if err != nil {
		return nil, err
	}
	if ss == nil {
		// The task starts here: open its proxyd session now (the seed's
		// catalog call starts a session without a browser) and start
		// Chromium in the background, so open_page only navigates. A
		// failure here is left for open_page to report.
		if ns, err := s.ensureSession(ctx, in.Session); err == nil {
			go s.prelaunch(ns.ctl.CASPKI)
		} else {
			s.log.Warn("session not opened at catalog time", "code", string(agentvault.ErrorCode(err)))
		}
	}
	text, err := withStatusKeys(okStatus(), raw)
	if err != nil {
		return nil, err
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}}, nil
}

func (s *Server) openPage(ctx context.Context, in openPageIn) (*mcp.CallToolResult, error) {
	u, err := url.Parse(in.URL)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "url must be an absolute https:// address")
	}
	ss, err := s.lookup(in.Session)
	if err != nil {
		return nil, err
	}
	upgraded := ""
	if u.Scheme == "http" {
		// A residential egress session is HTTPS only: the address is
		// opened as https:// (egress.go). Elsewhere plain http is refused.
		// The session's answer tells the two apart, so it is opened first
		// (the task's next open_page uses it).
		if ss == nil {
			if ss, err = s.ensureSession(ctx, in.Session); err != nil {
				return nil, err
			}
		}
		if !ss.residentialEgress() {
			return nil, agentvault.Errorf(agentvault.CodeInsecureSite,
				"This site doesn't support HTTPS at the address given (http://). The page did not change. Nothing was sent over plain http.")
		}
		in.URL = httpsOf(u)
		upgraded = "\nThis session goes through the deployment's residential egress and is HTTPS only: the http:// address was opened as " + safeURL(in.URL) + ". Nothing was sent over plain http."
	}
	if ss == nil {
		if ss, err = s.ensureSession(ctx, in.Session); err != nil {
			return nil, err
		}
	}
	if ss.handoff().parked {
		return nil, challengeRequired("open_page")
	}
	if err := s.egressLost(ss); err != nil {
		return nil, err
	}
	replaced := false
	defer func() {
		// After ss.mu is released: the connection's lock comes first.
		if replaced {
			s.hostedReplaced(ctx, ss.Handle, ss.ctlExpires())
		}
	}()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	// A proxy session whose connection died is replaced; the run's report
	// keeps the old one's as an earlier segment (replace.go). With a page
	// open, proxyd is asked while the page loads: the answer is nearly
	// always "alive", and a navigation through a dead session reaches
	// nothing (proxyd no longer knows its credential). When it died, the
	// page opens again through the new session.
	if ss.page != nil {
		check := make(chan endedCheck, 1)
		go func() { check <- s.proxyEnded(ctx, ss) }()
		ss.action()
		readings(ss)
		gotoErr := ss.page.Goto(in.URL, navTimeout)
		e := <-check
		if !e.ended {
			if gotoErr != nil {
				return nil, gotoErr
			}
			return prose(okStatus(), "Opened "+safeURL(ss.page.URL())+upgraded), nil
		}
		if err := s.replaceProxy(ctx, ss, e); err != nil {
			return nil, err
		}
		replaced = true
	} else if replaced, err = s.replaceDead(ctx, ss); err != nil {
		return nil, err
	}
	if ss.page == nil {
		var opts browser.SessionOptions
		spki := ss.ctl.CASPKI
		if !s.cfg.UnsafeDirectBrowser {
			proxy := ss.ctl.ProxyURL
			if s.cfg.ProxyURL != "" {
				proxy = s.cfg.ProxyURL
			}
			opts.Proxy = &browser.Proxy{Server: proxy, Username: ss.ctl.ProxyUser, Password: ss.ctl.ProxyPassword}
		}
		b, err := s.ensureBrowser(spki)
		if err != nil {
			return nil, err
		}
		p, err := b.NewSession(opts)
		if err != nil {
			return nil, err
		}
		if s.cfg.NetworkLog {
			p.StartNetworkLog()
		}
		ss.page = p
	}
	ss.action()
	readings(ss)
	if err := ss.page.Goto(in.URL, navTimeout); err != nil {
		return nil, err
	}
	return prose(okStatus(), "Opened "+safeURL(ss.page.URL())+upgraded), nil
}

func (s *Server) click(ctx context.Context, in clickIn) (*mcp.CallToolResult, error) {
	ss, err := s.pageSession("click", in.Session)
	if err != nil {
		return nil, err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.action()
	ss.lastAction = in.Selector
	readings(ss)
	seen := ss.page.RefusalCount()
	act, err := ss.page.Click(browser.Target{Selector: in.Selector, Frame: in.Frame}, ms(in.Timeout, actionTimeout, waitMax))
	if err != nil {
		return nil, err
	}
	return prose(okStatus(), "Clicked "+in.Selector+newTabNotice(act)+refusalNotice(ss.page.RefusalsSince(seen))), nil
}

// readings lets the browser read a page a navigation lands on ahead of
// snapshot_page only while snapshot_page can still answer (P19).
func readings(ss *Session) { ss.page.SetReadings(!ss.gate.Filled()) }

func newTabNotice(a browser.Action) string {
	if !a.NewTab {
		return ""
	}
	return "\nA new tab opened: call wait_for_popup before anything else (every tool still targets the page you were on)."
}

// lateTabNotice reports a tab that opened after the click or press that
// opened it had answered (clicks do not wait for one), on the next answer.
func lateTabNotice(ss *Session) string {
	if ss.page == nil || !ss.page.TakeNewTabs() {
		return ""
	}
	return "\nA new tab opened after your last click or press answered: call wait_for_popup before anything else (every tool still targets the page you were on)."
}

// refusalNotice reports requests proxyd refused while an action ran (only
// those answered before the action returned; get_run_report counts all).
func refusalNotice(rs []browser.Refusal) string {
	if len(rs) == 0 {
		return ""
	}
	var parts []string
	for _, r := range rs {
		parts = append(parts, r.Code+" ("+r.ResourceType+")")
	}
	return "\nThe proxy refused " + plural(len(rs), "request", "requests") + " this caused: " + strings.Join(parts, ", ") + ". Read observe_page and get_run_report before going on."
}

func (s *Server) press(ctx context.Context, in pressIn) (*mcp.CallToolResult, error) {
	ss, err := s.pageSession("press", in.Session)
	if err != nil {
		return nil, err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if strings.TrimSpace(in.Key) == "" {
		return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "key is required")
	}
	if ss.gate.Filled() {
		if err := s.red.CheckChordAfterFill(in.Key); err != nil {
			return nil, err
		}
	}
	ss.action()
	ss.lastAction = in.Selector
	readings(ss)
	seen := ss.page.RefusalCount()
	act, err := ss.page.Press(browser.Target{Selector: in.Selector, Frame: in.Frame}, in.Key, actionTimeout)
	if err != nil {
		return nil, err
	}
	return prose(okStatus(), "Pressed "+in.Key+" on "+in.Selector+newTabNotice(act)+refusalNotice(ss.page.RefusalsSince(seen))), nil
}

func (s *Server) checkSelector(ss *Session, selectors ...string) error {
	if !ss.gate.Filled() {
		return nil
	}
	for _, sel := range selectors {
		if sel == "" {
			continue
		}
		if err := s.red.CheckSelectorAfterFill(sel); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) waitForSelector(ctx context.Context, in waitIn) (*mcp.CallToolResult, error) {
	ss, err := s.pageSession("wait_for_selector", in.Session)
	if err != nil {
		return nil, err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if err := s.checkSelector(ss, in.Selector, in.Frame); err != nil {
		return nil, err
	}
	if err := ss.page.WaitFor(browser.Target{Selector: in.Selector, Frame: in.Frame}, browser.WaitState(in.State), ms(in.Timeout, waitDefault, waitMax)); err != nil {
		// A wait that timed out observed nothing: the code authorization
		// stays.
		return nil, err
	}
	ss.action()
	// What the agent waited for is usually what it reads next.
	readings(ss)
	ss.page.ReadAhead()
	return prose(okStatus(), "Found "+in.Selector+lateTabNotice(ss)), nil
}

func (s *Server) count(ctx context.Context, in countIn) (*mcp.CallToolResult, error) {
	ss, err := s.pageSession("count", in.Session)
	if err != nil {
		return nil, err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if err := s.checkSelector(ss, in.Selector, in.Frame); err != nil {
		return nil, err
	}
	c, err := ss.page.Count(browser.Target{Selector: in.Selector, Frame: in.Frame})
	if err != nil {
		return nil, err
	}
	return jsonAnswer(okStatus(), struct {
		Count   int  `json:"count"`
		Visible *int `json:"visible,omitempty"`
	}{c.Count, c.Visible})
}

func (s *Server) waitForPopup(ctx context.Context, in popupIn) (*mcp.CallToolResult, error) {
	ss, err := s.pageSession("wait_for_popup", in.Session)
	if err != nil {
		return nil, err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	r, err := ss.page.WaitForPopup(ms(in.Timeout, popupDefault, popupMax))
	if err != nil {
		return nil, err
	}
	ss.action()
	msg := "Switched to the popup: " + safeURL(r.URL) + ". Every page tool now targets it; close_popup returns to the opener."
	if r.Child {
		msg = "The popup had closed itself and opened a tab of its own: switched to that child tab, " + safeURL(r.URL) + ". It is a different document: read it before acting."
	}
	return prose(okStatus(), msg), nil
}

func (s *Server) closePopup(ctx context.Context, in noIn) (*mcp.CallToolResult, error) {
	ss, err := s.pageSession("close_popup", in.Session)
	if err != nil {
		return nil, err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	where, u, err := ss.page.ClosePopup()
	if err != nil {
		return nil, err
	}
	ss.action()
	var msg string
	switch where {
	case "opener":
		msg = "Closed the popup; back on the page that opened it: " + safeURL(u)
	case "sibling":
		msg = "Closed the popup; landed on another tab queued under the opener: " + safeURL(u)
	case "child":
		msg = "Closed the popup; landed on a tab it had opened: " + safeURL(u)
	default:
		msg = "Closed the popup; every page that opened it had closed, so this is a blank page in the same browser (cookies kept). Navigate with open_page."
	}
	return prose(okStatus(), msg+"\nRead the page before assuming the checkout is still on screen."), nil
}
