package mcpserver

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/browser"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/redact"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type snapshotIn struct {
	SessionArg
	Depth    int    `json:"depth,omitempty" jsonschema:"How deep to walk the tree (default and maximum 30). Lower it only when nesting, not width, overflows a page of the answer: it saves characters, not time."`
	Cursor   int    `json:"cursor,omitempty" jsonschema:"Line offset of the next page of a truncated snapshot: pass it with the depth, selector and frame the truncation note names. Paging the whole, unchanged page walks nothing again (one quick check per frame); paging a part walks that part again."`
	Selector string `json:"selector,omitempty" jsonschema:"Read only this element and what is inside it, e.g. form#shipping: a CSS or Playwright selector matching exactly one element, or aria-ref=eN from an earlier snapshot. Costs one walk of that part, never kept for later calls; use it on a heavy page when you need one form or region. A selector that matches nothing (field_not_found) or several elements (invalid_input) is refused at once, with nothing read."`
	Frame    string `json:"frame,omitempty" jsonschema:"CSS selector of an iframe, as in fill_checkout (e.g. iframe[title='Secure payment input frame']): read only that frame's document, or selector inside it, and its field selectors name that frame. Costs one walk of that frame; use it for a payment form's fields once you know its frame. Refused like selector when it matches no iframe or several."`
}

type outcomeIn struct {
	SessionArg
	SuccessSelector  string `json:"successSelector" jsonschema:"Appears on success, e.g. #order-success."`
	FailureSelector  string `json:"failureSelector,omitempty" jsonschema:"Appears on failure, e.g. .checkout-error."`
	Timeout          int    `json:"timeout,omitempty" jsonschema:"Milliseconds to wait (default 10000, clamped to 30000; 0 or negative means the default)."`
	ConfirmsCheckout bool   `json:"confirmsCheckout,omitempty" jsonschema:"true only when the success selector confirms a completed checkout, so the session is recorded as confirmed. Leave it off for logins."`
	SubmitSelector   string `json:"submitSelector,omitempty" jsonschema:"Required with confirmsCheckout: the control you clicked or pressed to place the order, exactly as passed, and the latest click or press."`
}

func (s *Server) snapshotPage(ctx context.Context, in snapshotIn) (*mcp.CallToolResult, error) {
	ss, err := s.pageSession("snapshot_page", in.Session)
	if err != nil {
		return nil, err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if err := ss.gate.Check(redact.ToolSnapshotPage); err != nil {
		return nil, err
	}
	depth := in.Depth
	if depth <= 0 || depth > browser.MaxSnapshotDepth {
		depth = browser.MaxSnapshotDepth
	}
	snap, err := ss.page.SnapshotOf(browser.SnapshotOptions{Depth: depth, Selector: in.Selector, Frame: in.Frame})
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimRight(snap.YAML, "\n"), "\n")
	text, next := snapshotText(lines, snap.Fields, in.Cursor, snapshotPageSize-snapshotNoteRoom)
	if next > 0 {
		note := fmt.Sprintf("cursor=%d depth=%d", next, depth)
		if in.Selector != "" {
			note += " selector=" + in.Selector
		}
		if in.Frame != "" {
			note += " frame=" + in.Frame
		}
		text += "\n# truncated: call snapshot_page again with " + note + " for the rest"
	}
	return prose(okStatus(), text+lateTabNotice(ss)), nil
}

// snapshotNoteRoom is what a page of a snapshot keeps free for the
// truncation note.
const snapshotNoteRoom = 400

// fieldsHeader starts the field selector section of each page.
const fieldsHeader = "# Field selectors (for fill_checkout / fill_login)"

// snapshotText is one page of a snapshot: the YAML lines from cursor on
// and, after them, the field selector line of every field whose ref those
// lines show, all within limit characters; and the cursor of the next page (0 when nothing is left). Every
// field's ref is on exactly one page, with its selector on that page. At
// least one line is taken, so paging always advances.
func snapshotText(lines []string, fields []browser.Field, cursor, limit int) (string, int) {
	if cursor < 0 || cursor >= len(lines) {
		if cursor == 0 {
			return "", 0
		}
		return "# cursor past the end of the snapshot", 0
	}
	byRef := make(map[string]string, len(fields))
	for _, f := range fields {
		l := "# " + f.Ref + ": (no CSS selector could be computed)"
		if f.Selector != "" {
			l = "# " + f.Ref + ": selector=" + f.Selector
			if f.Frame != "" {
				l += " frame=" + f.Frame
			}
		}
		byRef[f.Ref] = l
	}
	var b strings.Builder
	var sel []string
	used := 0
	i := cursor
	for ; i < len(lines); i++ {
		l := lines[i]
		if len(l) > limit {
			l = l[:limit]
		}
		cost := len(l)
		if i > cursor {
			cost++
		}
		var add []string
		for _, ref := range lineRefs(l) {
			if s, ok := byRef[ref]; ok {
				add = append(add, s)
				cost += len(s) + 1
			}
		}
		if len(add) > 0 && len(sel) == 0 {
			cost += len(fieldsHeader) + 1
		}
		if i > cursor && used+cost > limit {
			break
		}
		if i > cursor {
			b.WriteByte('\n')
		}
		b.WriteString(l)
		sel = append(sel, add...)
		used += cost
	}
	if len(sel) > 0 {
		b.WriteString("\n" + fieldsHeader + "\n" + strings.Join(sel, "\n"))
	}
	if i >= len(lines) {
		return b.String(), 0
	}
	return b.String(), i
}

// lineRefs lists the refs a snapshot line shows.
func lineRefs(l string) []string {
	var out []string
	for {
		i := strings.Index(l, "[ref=")
		if i < 0 {
			return out
		}
		l = l[i+5:]
		j := strings.IndexByte(l, ']')
		if j < 0 {
			return out
		}
		out = append(out, l[:j])
		l = l[j:]
	}
}

// observeAnswer is observe_page's JSON, after the status keys.
type observeAnswer struct {
	PasswordField     bool     `json:"passwordField"`
	IdentifierField   bool     `json:"identifierField"`
	EmailOrPhoneField bool     `json:"emailOrPhoneField"`
	CodeSent          bool     `json:"codeSent"`
	Error             bool     `json:"error"`
	RefusingAttempts  bool     `json:"refusingAttempts"`
	Matched           []string `json:"matched"`
	ErrorText         []string `json:"errorText"`
	Inconclusive      bool     `json:"inconclusive,omitempty"`
}

const (
	maxErrorTexts  = 5
	maxErrorTextLn = 200
)

func (s *Server) observePage(ctx context.Context, in noIn) (*mcp.CallToolResult, error) {
	ss, err := s.pageSession("observe_page", in.Session)
	if err != nil {
		return nil, err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	sig, err := ss.page.Observe()
	if err != nil {
		return nil, err
	}
	return jsonAnswer(okStatus(), s.observeFrom(ss, sig))
}

func (s *Server) observeFrom(ss *Session, sig browser.PageSignals) observeAnswer {
	a := observeAnswer{
		PasswordField: sig.PasswordField, IdentifierField: sig.IdentifierField, EmailOrPhoneField: sig.EmailOrPhone,
		CodeSent: sig.CodeSent, Error: sig.Error, RefusingAttempts: sig.RefusingAttempts, Inconclusive: sig.Incomplete,
		Matched: []string{}, ErrorText: []string{},
	}
	for _, m := range []struct {
		on   bool
		name string
	}{{a.PasswordField, "passwordField"}, {a.IdentifierField, "identifierField"}, {a.EmailOrPhoneField, "emailOrPhoneField"},
		{a.CodeSent, "codeSent"}, {a.Error, "error"}, {a.RefusingAttempts, "refusingAttempts"}} {
		if m.on {
			a.Matched = append(a.Matched, m.name)
		}
	}
	if ss.handoff().ownerDrove {
		// The owner typed on this page in a hand-off: its messages may
		// quote what they typed, so no page text for the rest of the run.
		return a
	}
	for _, t := range s.red.ScrubErrorTexts(sig.ErrorText, ss.filled) {
		if len(a.ErrorText) == maxErrorTexts {
			break
		}
		if r := []rune(t); len(r) > maxErrorTextLn {
			t = string(r[:maxErrorTextLn])
		}
		a.ErrorText = append(a.ErrorText, t)
	}
	return a
}

func (s *Server) listFrames(ctx context.Context, in noIn) (*mcp.CallToolResult, error) {
	ss, err := s.pageSession("list_frames", in.Session)
	if err != nil {
		return nil, err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if err := ss.gate.Check(redact.ToolListFrames); err != nil {
		return nil, err
	}
	frames, err := ss.page.Frames()
	if err != nil {
		return nil, err
	}
	for i := range frames {
		frames[i].URL = safeURL(frames[i].URL)
	}
	if frames == nil {
		frames = []browser.FrameInfo{}
	}
	return jsonAnswer(okStatus(), struct {
		Frames []browser.FrameInfo `json:"frames"`
	}{frames})
}

type challengeAnswer struct {
	Detected      bool     `json:"detected"`
	Type          string   `json:"type,omitempty"`
	Types         []string `json:"types"`
	Reason        string   `json:"reason,omitempty"`
	Signature     string   `json:"signature,omitempty"`
	DeliveredCode bool     `json:"deliveredCode,omitempty"`
	AmbiguousOnly bool     `json:"ambiguousOnly,omitempty"`
	Inconclusive  bool     `json:"inconclusive,omitempty"`
}

func (s *Server) detectChallenge(ctx context.Context, in noIn) (*mcp.CallToolResult, error) {
	ss, err := s.pageSession("detect_challenge", in.Session)
	if err != nil {
		return nil, err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	c, err := ss.page.DetectChallenge()
	if err != nil {
		return nil, err
	}
	a := challengeFrom(c, ss.loginPassword)
	if !a.Detected {
		a = popupChallenge(ss, a)
	}
	return jsonAnswer(okStatus(), a)
}

// challengeFrom turns the page's evidence into the answer. A field that
// only might be a code input counts only right after this session typed a
// login password, and then as ambiguousOnly.
func challengeFrom(c browser.Challenge, afterLoginPassword bool) challengeAnswer {
	a := challengeAnswer{Types: []string{}, Signature: c.Signature, Inconclusive: c.Incomplete}
	for _, t := range c.Types {
		if t == "otp" && c.OTPWeak && !afterLoginPassword {
			continue
		}
		a.Types = append(a.Types, t)
	}
	if len(a.Types) == 0 {
		a.Signature = ""
		return a
	}
	a.Detected = true
	a.Type = a.Types[0]
	a.Reason = c.Reason
	if a.Type == "otp" {
		a.DeliveredCode = c.DeliveredCode
		a.AmbiguousOnly = c.OTPWeak && len(a.Types) == 1
	}
	return a
}

// outcomeSlice is how long get_session_outcome watches before it looks
// whether a hand-off wants the page.
const outcomeSlice = 500 * time.Millisecond

type outcomeAnswer struct {
	Outcome                string   `json:"outcome"`
	Matched                string   `json:"matched,omitempty"`
	Corroborated           *bool    `json:"corroborated,omitempty"`
	NotCorroboratedBecause []string `json:"notCorroboratedBecause,omitempty"`
	// ReceiptImageKept, on a recorded confirmation, says whether a masked
	// image of the receipt page was kept for the owner (receipt.go).
	ReceiptImageKept *bool  `json:"receiptImageKept,omitempty"`
	Note             string `json:"note,omitempty"`
}

func (s *Server) getSessionOutcome(ctx context.Context, in outcomeIn) (*mcp.CallToolResult, error) {
	ss, err := s.pageSession("get_session_outcome", in.Session)
	if err != nil {
		return nil, err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if strings.TrimSpace(in.SuccessSelector) == "" {
		return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "successSelector is required")
	}
	if in.ConfirmsCheckout {
		if in.SubmitSelector == "" {
			return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "confirmsCheckout needs submitSelector: the control you clicked or pressed to place the order")
		}
		if in.SubmitSelector != ss.lastAction {
			return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "submitSelector must be the latest click or press on the page, exactly as you passed it")
		}
	}
	if err := s.checkSelector(ss, in.SuccessSelector, in.FailureSelector); err != nil {
		return nil, err
	}
	timeout := ms(in.Timeout, outcomeDefault, outcomeMax)
	// The check watches in short slices: a hand-off that wants the page
	// (request_challenge_handoff waiting for this session) takes it over,
	// and the check answers cancelled (seed 004).
	var matched string
	deadline := time.Now().Add(timeout)
	// Say the check is on (a client that sent a progress token sees it,
	// and knows a hand-off asked from now on cancels this check).
	callOf(ctx).notify(ctx, fmt.Sprintf("Watching the page for the success or failure selector, for up to %d ms.", timeout.Milliseconds()))
	for {
		if ss.handoffWanted() {
			return jsonAnswer(okStatus(), outcomeAnswer{Outcome: "cancelled",
				Note: "A challenge hand-off took the page over mid-check. Ask again once request_challenge_handoff has answered."})
		}
		slice := min(time.Until(deadline), outcomeSlice)
		if slice <= 0 {
			err = agentvault.Errorf(agentvault.CodeTimeout, "neither selector appeared within %d ms", timeout.Milliseconds())
			break
		}
		matched, err = ss.page.Race(browser.Target{Selector: in.SuccessSelector}, browser.Target{Selector: in.FailureSelector}, slice)
		if agentvault.ErrorCode(err) == agentvault.CodeNoPage && ss.page.HasPage() {
			// The page watched closed under the check (a bank's window
			// that hands the checkout back to its opener): watch the page
			// the session is on now.
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if agentvault.ErrorCode(err) != agentvault.CodeTimeout {
			break
		}
	}
	if agentvault.ErrorCode(err) == agentvault.CodeTimeout {
		return jsonAnswer(okStatus(), outcomeAnswer{Outcome: "timeout", Note: "Neither selector appeared yet. This is not a failure: read get_run_report before saying whether a card was charged."})
	}
	if err != nil {
		return nil, err
	}
	ss.action()
	a := outcomeAnswer{Outcome: matched, Matched: in.SuccessSelector}
	if matched == "failure" {
		a.Matched = in.FailureSelector
	}
	if !in.ConfirmsCheckout || matched != "success" {
		return jsonAnswer(okStatus(), a)
	}
	why := s.corroborate(ss, in)
	ok := len(why) == 0
	a.Corroborated = &ok
	if !ok {
		a.NotCorroboratedBecause = why
		a.Note = "Nothing was recorded: do not report an order on this answer."
		return jsonAnswer(okStatus(), a)
	}
	total := ss.orderTotal
	if t, found := ss.page.ReadOrderTotal(); found {
		total = &control.OrderTotal{Amount: t.Amount, Currency: t.Currency}
	}
	ev := control.EventRequest{Type: control.EventConfirmation, OrderTotal: total}
	ev.Receipt, ev.Site = s.keepReceipt(ss)
	err = s.cfg.Control.Event(ctx, ss.ctl.ID, ev)
	if ev.Receipt != "" && agentvault.ErrorCode(err) == agentvault.CodeInvalidInput {
		// A proxyd that takes no receipt: the confirmation counts more
		// than its image, so it is recorded without one.
		s.dropReceipt(ev.Receipt)
		ev.Receipt, ev.Site = "", ""
		err = s.cfg.Control.Event(ctx, ss.ctl.ID, ev)
	}
	if err != nil {
		if ev.Receipt != "" {
			s.dropReceipt(ev.Receipt)
			ev.Receipt = ""
		}
		s.log.Warn("confirmation event not recorded", "code", string(agentvault.ErrorCode(err)))
		a.Note = "The confirmation could not be recorded on the proxy; get_run_report is the record."
	} else {
		a.Note = "Confirmation recorded; get_run_report is the record."
	}
	kept := ev.Receipt != ""
	a.ReceiptImageKept = &kept
	switch {
	case kept:
		s.log.Info("receipt image kept", "artifact", ev.Receipt, "site", ev.Site)
		a.Note += " An image of the receipt page, sensitive fields masked, was kept for the account owner (their Activity page names it)."
	case ss.gate.Filled():
		a.Note += " No receipt image: this session filled values from the vault, and an image is kept only of a checkout that filled none."
	default:
		a.Note += " No receipt image could be kept."
	}
	return jsonAnswer(okStatus(), a)
}

// corroborate checks the confirmation rules and returns why it failed
// (nothing when it held).
func (s *Server) corroborate(ss *Session, in outcomeIn) []string {
	var why []string
	if c, err := ss.page.Count(browser.Target{Selector: in.SubmitSelector}); err != nil {
		why = append(why, "the submit control could not be checked")
	} else if c.Count > 0 && (c.Visible == nil || *c.Visible > 0) {
		why = append(why, "the submit control is still on screen")
	}
	if ss.page.PendingPopups() > 0 {
		why = append(why, "a tab this page opened is waiting for wait_for_popup")
	}
	if sig, err := ss.page.Observe(); err != nil || sig.Incomplete {
		why = append(why, "the page scan did not finish")
	} else {
		if sig.Error {
			why = append(why, "the page shows an error")
		}
		if sig.RefusingAttempts {
			why = append(why, "the page is refusing attempts")
		}
		if sig.SignIn {
			why = append(why, "the page shows a sign-in step")
		}
		if sig.CodeSent {
			why = append(why, "the page says a code was sent")
		}
	}
	if c, err := ss.page.DetectChallenge(); err != nil {
		why = append(why, "the challenge scan failed")
	} else if a := challengeFrom(c, ss.loginPassword); a.Detected {
		why = append(why, "the page shows a challenge step")
	}
	if c, err := ss.page.Count(browser.Target{Selector: in.SuccessSelector}); err != nil || c.Count == 0 || (c.Visible != nil && *c.Visible == 0) {
		why = append(why, "the success selector is no longer shown")
	}
	if in.FailureSelector != "" {
		if c, err := ss.page.Count(browser.Target{Selector: in.FailureSelector}); err != nil || (c.Count > 0 && (c.Visible == nil || *c.Visible > 0)) {
			why = append(why, "the failure selector is shown")
		}
	}
	return why
}

// reportAnswer is get_run_report's JSON after the status keys.
type reportAnswer struct {
	control.Report
	CoversWholeRun bool `json:"coversWholeRun"`
	// Note, EarlierReports and EarlierReportsNote: only when open_page
	// replaced the run's proxy session (replace.go).
	Note               string           `json:"note,omitempty"`
	EarlierReports     []control.Report `json:"earlierReports,omitempty"`
	EarlierReportsNote string           `json:"earlierReportsNote,omitempty"`
}

func normReport(r control.Report) control.Report {
	r.Ended = false
	if r.FilledFieldKinds == nil {
		r.FilledFieldKinds = []string{}
	}
	if r.CredentialWrites == nil {
		r.CredentialWrites = []string{}
	}
	return r
}

func (s *Server) getRunReport(ctx context.Context, in noIn) (*mcp.CallToolResult, error) {
	ss, err := s.lookup(in.Session)
	if err != nil {
		return nil, err
	}
	if ss == nil {
		return nil, agentvault.Errorf(agentvault.CodeNoPage, "get_run_report needs an open session: no session was started (call open_page first).")
	}
	ss.events.Wait()
	rctx, cancel := context.WithTimeout(ctx, reportTimeout)
	defer cancel()
	replaced, earlier := ss.segments()
	r, err := s.cfg.Control.Report(rctx, ss.ctlID())
	if err != nil {
		if len(earlier) > 0 {
			return jsonAnswer(okStatus(), splitReport{EarlierReports: earlier, EarlierReportsNote: earlierReportsNote,
				CurrentReportNote: currentReportNote + " (" + agentvault.ErrorMessage(err) + ")", CredentialWrites: writesOf(earlier)})
		}
		return nil, agentvault.Wrap(agentvault.ErrorCode(err), err,
			"The run report could not be read from the proxy (%s). Do NOT read this as nothing having been filled.", agentvault.ErrorMessage(err))
	}
	return jsonAnswer(okStatus(), withSegments(reportAnswer{Report: normReport(r), CoversWholeRun: true}, replaced, earlier))
}

type closeAnswer struct {
	Status        string          `json:"status"`
	Report        *control.Report `json:"report"`
	TeardownError string          `json:"teardownError,omitempty"`
	Note          string          `json:"note,omitempty"`
	// EarlierReports, EarlierReportsNote and CoversWholeRun: only when
	// open_page replaced the run's proxy session (replace.go).
	EarlierReports     []control.Report `json:"earlierReports,omitempty"`
	EarlierReportsNote string           `json:"earlierReportsNote,omitempty"`
	CoversWholeRun     *bool            `json:"coversWholeRun,omitempty"`
	CredentialWrites   []string         `json:"credentialWrites,omitempty"`
}

// withSegments marks a report of a run whose proxy session was replaced.
func withSegments(a reportAnswer, replaced int, earlier []control.Report) reportAnswer {
	if replaced == 0 {
		return a
	}
	a.CoversWholeRun = false
	a.Note = replacedNoteOf(replaced, len(earlier))
	if len(earlier) > 0 {
		a.EarlierReports, a.EarlierReportsNote = earlier, earlierReportsNote
	}
	return a
}

func (s *Server) closeSessionTool(ctx context.Context, in noIn) (*mcp.CallToolResult, error) {
	ss, err := s.lookup(in.Session)
	if err != nil {
		return nil, err
	}
	if ss == nil {
		return jsonAnswer(okStatus(), closeAnswer{Status: "No session was open", Note: "There is no report because no session was opened. Do NOT read this as nothing having been filled."})
	}
	ans, err := s.closeSession(ctx, ss)
	replaced, earlier := ss.segments()
	if err != nil && len(earlier) > 0 {
		no := false
		a := closeAnswer{Status: "Session closed; the proxy did not return the current proxy session's report",
			Note:           "There is no report for the current proxy session: " + agentvault.ErrorMessage(err) + ". Do NOT read this as nothing having been filled.",
			EarlierReports: earlier, EarlierReportsNote: earlierReportsNote, CoversWholeRun: &no, CredentialWrites: writesOf(earlier),
			TeardownError: ss.teardownErr}
		return jsonAnswer(okStatus(), a)
	}
	if err != nil {
		return nil, agentvault.Wrap(agentvault.ErrorCode(err), err,
			"The browser was closed but the proxy did not return the session's report (%s). Do NOT read this as nothing having been filled.", agentvault.ErrorMessage(err))
	}
	r := normReport(ans.Report)
	st := ans.Status
	if st == "" {
		st = "Session closed"
	}
	a := closeAnswer{Status: st, Report: &r}
	if ss.teardownErr != "" {
		a.Status = "Session closed; the browser did not close cleanly"
		a.TeardownError = ss.teardownErr
	}
	if replaced > 0 {
		no := false
		a.CoversWholeRun = &no
		if len(earlier) > 0 {
			a.EarlierReports, a.EarlierReportsNote = earlier, earlierReportsNote
		} else {
			a.Note = replacedNoteOf(replaced, 0)
		}
	}
	return jsonAnswer(okStatus(), a)
}
