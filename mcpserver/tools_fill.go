package mcpserver

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/browser"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/redact"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FillField is one entry of fill_checkout.
type FillField struct {
	Selector string `json:"selector" jsonschema:"CSS selector of the input or select (not an aria-ref: fills refuse refs)."`
	Value    any    `json:"value" jsonschema:"A mock token (av_...) or a literal value such as the expiry month or year from the catalog. Numbers are accepted."`
	Kind     string `json:"kind,omitempty" jsonschema:"input (default) types the value; select picks the option whose value or label equals it."`
	Frame    string `json:"frame,omitempty" jsonschema:"CSS selector of the iframe the field lives in, e.g. iframe[title='Secure payment input frame']."`
}

type fillCheckoutIn struct {
	SessionArg
	Fields  []FillField `json:"fields" jsonschema:"The fields to fill, in order. Card order: expiry and billing first, then the card number, then its security code right after it."`
	Timeout int         `json:"timeout,omitempty" jsonschema:"Milliseconds each field gets to appear and accept input (default 5000, at most 60000)."`
}

type fillLoginIn struct {
	SessionArg
	UsernameSelector        string `json:"usernameSelector,omitempty" jsonschema:"CSS selector of the identifier field. Pass with usernameToken."`
	UsernameToken           string `json:"usernameToken,omitempty" jsonschema:"The login's tokens.email for an email field (choose by the field's type and visible label, not its name), tokens.username only for a field that asks for the site's own handle."`
	PasswordSelector        string `json:"passwordSelector,omitempty" jsonschema:"CSS selector of the password field. Pass with passwordToken."`
	PasswordToken           string `json:"passwordToken,omitempty" jsonschema:"The login's password token."`
	ConfirmPasswordSelector string `json:"confirmPasswordSelector,omitempty" jsonschema:"A repeat-password field on a signup form, filled with the same password token. Needs the password pair in the same call."`
}

// valueString turns a fill value (string or JSON number) into the text to
// type. Other JSON types are refused without echoing them.
func valueString(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	case int:
		return strconv.Itoa(x), nil
	case nil:
		return "", agentvault.Errorf(agentvault.CodeInvalidInput, "value is required")
	}
	return "", agentvault.Errorf(agentvault.CodeInvalidInput, "value must be a string or a number")
}

func isRef(sel string) bool { return redact.IsRefSelector(sel) }

// authorize asks proxyd for the value to type for a token on the current
// page (and frame), with the order total for a card number. When the owner
// must decide first, it waits for them (waitOwner) and asks again, reading
// the page afresh: the total may have changed while the owner looked.
func (s *Server) authorize(ctx context.Context, ss *Session, token string, cls fieldClass, frame string) (string, error) {
	return s.authorizeIn(ctx, ss, token, cls, frame, nil, nil)
}

// totalRead is a read of the page's order total in flight: the total a
// declared hint names if the page has one, else the one the page shows.
type totalRead struct {
	ch   chan *control.OrderTotal
	done bool
	t    *control.OrderTotal
}

func readTotal(ss *Session) *totalRead {
	r := &totalRead{ch: make(chan *control.OrderTotal, 1)}
	go func() {
		if t, ok := hintedTotal(ss); ok {
			r.ch <- t
		} else if t, ok := ss.page.ReadOrderTotal(); ok {
			r.ch <- &control.OrderTotal{Amount: t.Amount, Currency: t.Currency}
		} else {
			r.ch <- nil
		}
	}()
	return r
}

// wait returns the total read (nil when the page names none). A call that
// gives up on the read waits for it too: it reads the session's hints.
func (r *totalRead) wait() *control.OrderTotal {
	if r == nil {
		return nil
	}
	if !r.done {
		r.t, r.done = <-r.ch, true
	}
	return r.t
}

// authorizeIn is authorize with the frames this fill call looked up and,
// for a card number, the total read that started with the call (nil: it is
// read here, while the frame is looked up).
func (s *Server) authorizeIn(ctx context.Context, ss *Session, token string, cls fieldClass, frame string, frames frameCache, early *totalRead) (string, error) {
	for round := 0; ; round++ {
		req := control.AuthorizeRequest{Token: token, PageURL: ss.page.URL(), CVVSpent: cls.cvvSpent}
		var total *totalRead
		if cls.isNumber() {
			total = early
			if round > 0 || total == nil {
				total = readTotal(ss)
			}
		}
		if frame != "" {
			fu, err := frames.url(ss, frame)
			if err != nil {
				total.wait()
				return "", err
			}
			req.FrameURL = fu
		}
		if err := s.refuseClientSideEncryption(cmp.Or(req.FrameURL, req.PageURL)); err != nil {
			total.wait()
			return "", err
		}
		if t := total.wait(); t != nil {
			req.OrderTotal, ss.orderTotal = t, t
		}
		ans, err := s.cfg.Control.Authorize(ctx, ss.ctl.ID, req)
		if p, ok := control.PendingOf(err); ok && agentvault.ErrorCode(err) == agentvault.CodeApprovalPending {
			if round >= maxOwnerRounds {
				return "", agentvault.Errorf(agentvault.CodeApprovalPending,
					"the proxy asked the owner %d times in a row for field %s; stopped waiting. Nothing was typed in this field.", round, cls.field)
			}
			if err := s.waitOwner(ctx, ss, p); err != nil {
				return "", err
			}
			continue
		}
		if err != nil {
			return "", err
		}
		if ans.Value == "" {
			return "", agentvault.Errorf(agentvault.CodeSubstitution, "the proxy returned nothing to type for field %s", cls.field)
		}
		return ans.Value, nil
	}
}

func (s *Server) fillCheckout(ctx context.Context, in fillCheckoutIn) (*mcp.CallToolResult, error) {
	m := len(in.Fields)
	ss, err := s.pageSession("fill_checkout", in.Session)
	if err != nil {
		return nil, withFilled(err, 0, m)
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if m == 0 {
		return nil, withFilled(agentvault.Errorf(agentvault.CodeInvalidInput, "fields is empty"), 0, 0)
	}
	// Everything that can be refused is refused before the first keystroke.
	values := make([]string, m)
	classes := make([]fieldClass, m)
	for i, f := range in.Fields {
		if strings.TrimSpace(f.Selector) == "" {
			return nil, withFilled(agentvault.Errorf(agentvault.CodeInvalidInput, "field %d has no selector", i+1), 0, m)
		}
		if isRef(f.Selector) || isRef(f.Frame) {
			return nil, withFilled(agentvault.Errorf(agentvault.CodeInvalidInput, "field %d: a fill refuses aria-ref selectors; use the CSS selector from the snapshot's '# Field selectors' comment", i+1), 0, m)
		}
		if f.Kind != "" && f.Kind != "input" && f.Kind != "select" {
			return nil, withFilled(agentvault.Errorf(agentvault.CodeInvalidInput, "field %d: kind must be input or select", i+1), 0, m)
		}
		v, err := valueString(f.Value)
		if err != nil {
			return nil, withFilled(agentvault.Errorf(agentvault.ErrorCode(err), "field %d: %s", i+1, agentvault.ErrorMessage(err)), 0, m)
		}
		cls, err := classify(v)
		if err != nil {
			return nil, withFilled(agentvault.Errorf(agentvault.ErrorCode(err), "field %d: %s", i+1, agentvault.ErrorMessage(err)), 0, m)
		}
		if cls.isToken && cls.kind == "login" && cls.field != "totp" {
			return nil, withFilled(agentvault.Errorf(agentvault.CodeInvalidInput, "field %d: login identifier and password tokens go through fill_login", i+1), 0, m)
		}
		values[i], classes[i] = v, cls
	}
	// The client-side-encryption refusal is about substitution: a batch of
	// literals has nothing to substitute, and skips the frame lookups.
	frames := frameCache{}
	// A batch that starts with a card number reads the order total while
	// its frames are checked: nothing is typed between the two.
	var early *totalRead
	if classes[0].isToken && classes[0].isNumber() {
		early = readTotal(ss)
	}
	tm := fillTimer{start: time.Now()}
	if slices.ContainsFunc(classes, func(c fieldClass) bool { return c.isToken }) {
		err := s.checkFramesBeforeTyping(ss, in.Fields, frames)
		tm.mark(&tm.check)
		if err != nil {
			early.wait()
			return nil, withFilled(err, 0, m)
		}
	}
	if err := checkCardOrder(&ss.cards, classes); err != nil {
		early.wait()
		return nil, withFilled(err, 0, m)
	}
	markSpentCVV(&ss.cards, classes)
	timeout := ms(in.Timeout, fieldDefault, fieldMax)
	kinds := map[string]bool{}
	n := 0
	var fillErr error
	for i, f := range in.Fields {
		typed := values[i]
		if classes[i].isToken {
			// The gate closes before the first token is typed, so a snapshot
			// racing the fill is already refused. The page is no longer
			// read ahead of snapshots (readings): none can answer now.
			ss.gate.MarkFilled()
			readings(ss)
			first := early
			if i > 0 {
				first = nil
			}
			tm.mark(nil)
			typed, fillErr = s.authorizeIn(ctx, ss, values[i], classes[i], f.Frame, frames, first)
			tm.mark(&tm.authorize)
			if fillErr != nil {
				break
			}
			// Known to the scrubber before typing: a fill that fails
			// partway may still leave characters on the page.
			ss.filled = append(ss.filled, typed)
		}
		t := browser.Target{Selector: f.Selector, Frame: f.Frame}
		if f.Kind == "select" {
			fillErr = ss.page.SelectOption(t, typed, timeout)
		} else if h := frames[f.Frame]; classes[i].isToken && h != nil {
			// Into the frame authorize named: never a frame looked up anew.
			fillErr = ss.page.FillIn(h, t, typed, timeout)
		} else {
			fillErr = ss.page.Fill(t, typed, timeout)
		}
		if classes[i].isToken {
			tm.mark(&tm.typing)
			tm.tokens++
		}
		if fillErr != nil {
			break
		}
		if classes[i].isToken {
			ss.loginPassword = false
			k := classes[i].kind
			if classes[i].isCVV() {
				k = "cvv"
			}
			kinds[k] = true
		}
		n++
	}
	ss.cards.afterBatch(classes, n)
	if len(kinds) > 0 {
		s.reportFill(ctx, ss, kinds)
	}
	tm.log(s.log)
	if fillErr != nil {
		return nil, withFilled(fillErr, n, m)
	}
	names := make([]string, 0, m)
	for _, f := range in.Fields {
		if f.Frame != "" {
			names = append(names, f.Selector+" (in "+f.Frame+")")
		} else {
			names = append(names, f.Selector)
		}
	}
	msg := fmt.Sprintf("Filled %s: %s", plural(n, "field", "fields"), strings.Join(names, ", "))
	if ss.cards.pendingCVV != "" {
		msg += "\nThe batch ended on a card number: the next fill_checkout must start with that card's security code token."
	}
	return prose(status{State: "ok", Filled: &[2]int{n, m}}, msg+lateTabNotice(ss)), nil
}

// fillTimer times a fill_checkout batch's token phases for mcpd's debug
// "token fill" line: the frame and encryption check before the first
// keystroke, the authorize calls (the order total's read included when it
// was not done yet) and the typing of the tokens' values. Milliseconds and
// a count only: nothing typed, no selector.
type fillTimer struct {
	start, at                time.Time
	check, authorize, typing time.Duration
	tokens                   int
}

// mark adds the time since the last mark to d (nil: not counted).
func (t *fillTimer) mark(d *time.Duration) {
	now := time.Now()
	if t.at.IsZero() {
		t.at = t.start
	}
	if d != nil {
		*d += now.Sub(t.at)
	}
	t.at = now
}

// log writes the line when a token was typed.
func (t *fillTimer) log(l *slog.Logger) {
	if t.tokens == 0 || !l.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	l.Debug("token fill", "tokens", t.tokens, "check_ms", msOf(t.check), "authorize_ms", msOf(t.authorize),
		"type_ms", msOf(t.typing), "total_ms", msOf(time.Since(t.start)))
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// reportFill tells proxyd which kinds were filled (best effort: proxyd
// records authorizations itself; the event adds kinds it cannot see, such
// as identity values typed as is).
//
// It goes on its own, so the fill answers without waiting for it; every
// read of the session's report waits for it first (ss.events).
func (s *Server) reportFill(ctx context.Context, ss *Session, kinds map[string]bool) {
	var ks []string
	for _, k := range []string{"identity", "address", "card", "cvv", "login"} {
		if kinds[k] {
			ks = append(ks, k)
		}
	}
	id := ss.ctl.ID
	ss.events.Add(1)
	go func() {
		defer ss.events.Done()
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reportTimeout)
		defer cancel()
		if err := s.cfg.Control.Event(ectx, id, control.EventRequest{Type: control.EventFill, Kinds: ks}); err != nil {
			s.log.Warn("fill event not recorded", "code", string(agentvault.ErrorCode(err)))
		}
	}()
}

func (s *Server) fillLogin(ctx context.Context, in fillLoginIn) (*mcp.CallToolResult, error) {
	type half struct {
		name, selector, token string
		want                  []string // token fields allowed
	}
	var halves []half
	if (in.UsernameSelector == "") != (in.UsernameToken == "") {
		return nil, withFilled(agentvault.Errorf(agentvault.CodeInvalidInput, "usernameSelector and usernameToken go together"), 0, 0)
	}
	if (in.PasswordSelector == "") != (in.PasswordToken == "") {
		return nil, withFilled(agentvault.Errorf(agentvault.CodeInvalidInput, "passwordSelector and passwordToken go together"), 0, 0)
	}
	if in.ConfirmPasswordSelector != "" && in.PasswordSelector == "" {
		return nil, withFilled(agentvault.Errorf(agentvault.CodeInvalidInput, "confirmPasswordSelector needs the password pair in the same call"), 0, 0)
	}
	if in.UsernameSelector != "" {
		halves = append(halves, half{"username", in.UsernameSelector, in.UsernameToken, []string{"email", "username"}})
	}
	if in.PasswordSelector != "" {
		halves = append(halves, half{"password", in.PasswordSelector, in.PasswordToken, []string{"password"}})
	}
	if in.ConfirmPasswordSelector != "" {
		halves = append(halves, half{"repeat password", in.ConfirmPasswordSelector, in.PasswordToken, []string{"password"}})
	}
	m := len(halves)
	if m == 0 {
		return nil, withFilled(agentvault.Errorf(agentvault.CodeInvalidInput, "pass the identifier pair, the password pair, or both"), 0, 0)
	}
	ss, err := s.pageSession("fill_login", in.Session)
	if err != nil {
		return nil, withFilled(err, 0, m)
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	classes := make([]fieldClass, m)
	for i, h := range halves {
		if isRef(h.selector) {
			return nil, withFilled(agentvault.Errorf(agentvault.CodeInvalidInput, "%s: a fill refuses aria-ref selectors; use a CSS selector", h.name), 0, m)
		}
		cls, err := classify(h.token)
		if err != nil {
			return nil, withFilled(err, 0, m)
		}
		ok := cls.isToken && cls.kind == "login"
		if ok {
			ok = false
			for _, w := range h.want {
				ok = ok || cls.field == w
			}
		}
		if !ok {
			return nil, withFilled(agentvault.Errorf(agentvault.CodeInvalidInput, "%s: expected a login token for %s", h.name, strings.Join(h.want, " or ")), 0, m)
		}
		classes[i] = cls
	}
	// Every field must be there before anything is typed: an email-first
	// form shows the password only after the identifier is submitted.
	for _, h := range halves {
		if err := ss.page.WaitFor(browser.Target{Selector: h.selector}, "visible", loginFieldWait); err != nil {
			return nil, withFilled(agentvault.Errorf(agentvault.CodeFieldNotFound,
				"Nothing was filled: the %s field (%s) did not appear within 3 s. On an email-first sign-in, fill the identifier, submit, wait for the password field, then fill the password in a second call.", h.name, h.selector), 0, m)
		}
	}
	ss.action()
	ss.gate.MarkFilled()
	readings(ss)
	n := 0
	var typedPassword string
	for i, h := range halves {
		var value string
		if h.name == "repeat password" && typedPassword != "" {
			value = typedPassword
		} else {
			value, err = s.authorize(ctx, ss, h.token, classes[i], "")
			if err != nil {
				return nil, withFilled(err, n, m)
			}
			ss.filled = append(ss.filled, value)
		}
		if err := ss.page.Fill(browser.Target{Selector: h.selector}, value, loginFieldWait); err != nil {
			return nil, withFilled(err, n, m)
		}
		if h.name == "password" {
			typedPassword = value
			ss.loginPassword = true
		}
		n++
	}
	s.reportFill(ctx, ss, map[string]bool{"login": true})
	var parts []string
	for _, h := range halves {
		parts = append(parts, h.name)
	}
	msg := "Filled " + strings.Join(parts, " and ")
	return prose(status{State: "ok", Filled: &[2]int{n, m}}, msg+lateTabNotice(ss)), nil
}
