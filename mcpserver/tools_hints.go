package mcpserver

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/browser"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/redact"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Page hints (seed 004, declare_page_hint and list_page_hint_kinds): the
// agent tells where the order total is when no convention finds it, for
// example inside a cross-origin checkout iframe. It gives a location,
// never a value: the figure is read from the page at declaration and again
// at the card fill.

// maxHintsPerKind is how many distinct hints of one kind a page holds.
const maxHintsPerKind = 4

// hintKind is one kind as list_page_hint_kinds describes it.
type hintKind struct {
	Kind          string   `json:"kind"`
	Purpose       string   `json:"purpose"`
	Reads         []string `json:"reads"`
	Attributes    []string `json:"attributes,omitempty"`
	FrameAllowed  bool     `json:"frameAllowed"`
	Preconditions string   `json:"preconditions,omitempty"`
}

var hintKinds = []hintKind{{
	Kind:         "order.total",
	Purpose:      "Where the checkout's order total is, when the vault cannot find it by convention; read again at the card fill and checked against the card's limits.",
	Reads:        []string{"text", "attribute"},
	Attributes:   []string{"aria-label", "content", "data-total", "data-amount", "value", "title"},
	FrameAllowed: true,
}}

// hintState is a session's declared hints on its current page. doc is
// the page's document (browser.DocumentKey): any navigation clears the
// hints and their count.
type hintState struct {
	doc    string
	totals []browser.HintTarget
}

type declareHintIn struct {
	SessionArg
	Kind      string `json:"kind" jsonschema:"The hint kind, e.g. order.total (see list_page_hint_kinds)."`
	Selector  string `json:"selector" jsonschema:"Plain CSS of the element, at most 512 characters: no text=, :has-text(), >>, XPath or :visible."`
	Frame     string `json:"frame,omitempty" jsonschema:"Plain CSS of the iframe the element lives in (overlay checkouts)."`
	Read      string `json:"read,omitempty" jsonschema:"text (default) or attribute."`
	Attribute string `json:"attribute,omitempty" jsonschema:"The attribute to read when read is attribute, e.g. aria-label or data-total; its value must name a currency."`
	Label     string `json:"label,omitempty" jsonschema:"For login.totp_secret: the label of the stored login the secret belongs to."`
}

func (s *Server) registerHints() {
	addTool(s, "list_page_hint_kinds", "The page hint kinds this deployment accepts, what each is for and which attributes it may read. Answers a JSON array after a status line.", true, s.listPageHintKinds)
	addTool(s, "declare_page_hint", "Tell the vault where the order total is on the current page when it cannot find it by convention (a total inside an overlay checkout's iframe: pass frame). A location, never a value. Declare order.total before filling the card, and again after a navigation. Answers JSON {kind, accepted, checked, resolved, amount, currency}; accepted false means the hint was dropped: more than 8 matches, an element over 4,000 characters, and for a hint into a frame a frame over 20,000 characters of text, the rest of the page over 16,384 or more than 32 frames; untrusted names why a figure was refused (hidden: the element is not shown; larger_total_on_page: the page names a larger total). A page holds at most 4 order.total hints until it navigates. Kind login.totp_secret (with label, after signing in as that login on an https page) points at an authenticator enrolment secret: the vault reads it from the page's response, reloads the page with it masked and stores it, answering {stored, digits, period}; then fill tokens.totp to confirm. A login that already has a secret keeps it until the account owner approves the new one (the call waits, like a fill on a new site). Errors: invalid_hint, hint_unresolved (nothing matches), hint_uncertain (no clear figure), totp_seed_untrusted (the page echoed that text from its own address or form: use the site's enrolment page), approval_denied, approval_expired, sensitive_data_blocked, insecure_page.", false, s.declarePageHint)
}

func (s *Server) listPageHintKinds(ctx context.Context, in noIn) (*mcp.CallToolResult, error) {
	ss, err := s.pageSession("list_page_hint_kinds", in.Session)
	if err != nil {
		return nil, err
	}
	// The kinds are proxyd's (the vault accepts them); a control API
	// without the hint part answers the ones this server knows.
	var kinds any = hintKinds
	if hc, ok := s.cfg.Control.(HintControl); ok {
		got, err := hc.HintKinds(ctx, control.HintKindsIn{Session: ss.ctl.ID})
		if err != nil {
			return nil, err
		}
		kinds = got
	}
	b, err := json.Marshal(kinds)
	if err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "encode answer")
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: okStatus().line()}, &mcp.TextContent{Text: string(b)}}}, nil
}

func (s *Server) declarePageHint(ctx context.Context, in declareHintIn) (*mcp.CallToolResult, error) {
	ss, err := s.pageSession("declare_page_hint", in.Session)
	if err != nil {
		return nil, err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	switch in.Kind {
	case "order.total":
	case "login.totp_secret":
		return s.declareTOTPHint(ctx, ss, in)
	default:
		return nil, agentvault.Errorf(agentvault.CodeInvalidHint, "unknown hint kind: ask list_page_hint_kinds")
	}
	filled := ss.gate.Filled()
	if err := redact.ValidateHintSelector(in.Selector, filled); err != nil {
		return nil, err
	}
	if in.Frame != "" {
		if err := redact.ValidateHintSelector(in.Frame, filled); err != nil {
			return nil, err
		}
	}
	t := browser.HintTarget{Frame: in.Frame, Selector: in.Selector}
	switch in.Read {
	case "", "text":
	case "attribute":
		if in.Attribute == "" || !slices.Contains(hintKinds[0].Attributes, in.Attribute) {
			return nil, agentvault.Errorf(agentvault.CodeInvalidHint, "read attribute needs one of the attributes list_page_hint_kinds names")
		}
		t.Attribute = in.Attribute
	default:
		return nil, agentvault.Errorf(agentvault.CodeInvalidHint, "read is text or attribute")
	}
	h := &ss.hints
	doc, err := ss.page.DocumentKey()
	if err != nil {
		return nil, err
	}
	if h.doc != doc {
		*h = hintState{doc: doc}
	}
	if !slices.Contains(h.totals, t) {
		if len(h.totals) >= maxHintsPerKind {
			return nil, agentvault.Errorf(agentvault.CodeInvalidHint, "this page already holds %d order.total hints, the most a page holds: repeat one of them, or declare again after a navigation", maxHintsPerKind)
		}
		h.totals = append(h.totals, t)
	}
	if filled {
		// After a fill no figure is read back to the agent: the hint is
		// kept and used at the card fill.
		return jsonAnswer(okStatus(), map[string]any{"kind": in.Kind, "accepted": true, "checked": false})
	}
	r, err := ss.page.ReadHintTotal(t)
	if err != nil || !r.Accepted {
		h.totals = slices.DeleteFunc(h.totals, func(x browser.HintTarget) bool { return x == t })
	}
	if err != nil {
		return nil, err
	}
	if !r.Accepted {
		s.log.Info("page hint dropped", "kind", in.Kind, "why", r.Dropped)
		ans := map[string]any{"kind": in.Kind, "accepted": false, "checked": true}
		if r.Untrusted != "" {
			ans["untrusted"] = r.Untrusted
		}
		return jsonAnswer(okStatus(), ans)
	}
	return jsonAnswer(okStatus(), map[string]any{"kind": in.Kind, "accepted": true, "checked": true, "resolved": true,
		"amount": r.Total.Amount, "currency": r.Total.Currency})
}

// hintedTotal reads the order total at a card fill from the hints
// declared on this page, newest first; a hint that now compares an
// attribute value (refused after a fill) is skipped.
func hintedTotal(ss *Session) (*control.OrderTotal, bool) {
	h := ss.hints
	if h.doc == "" {
		return nil, false
	}
	if doc, err := ss.page.DocumentKey(); err != nil || doc != h.doc {
		return nil, false
	}
	for i := len(h.totals) - 1; i >= 0; i-- {
		t := h.totals[i]
		if redact.ValidateHintSelector(t.Selector, true) != nil || (t.Frame != "" && redact.ValidateHintSelector(t.Frame, true) != nil) {
			continue
		}
		if r, err := ss.page.ReadHintTotal(t); err == nil && r.Accepted {
			return &control.OrderTotal{Amount: r.Total.Amount, Currency: r.Total.Currency}, true
		}
	}
	return nil, false
}
