package mcpserver

import (
	"context"
	"net"
	"net/url"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/redact"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HintControl is the control API's hint part (control.Client has it).
type HintControl interface {
	HintKinds(ctx context.Context, in control.HintKindsIn) ([]control.HintKind, error)
	ArmTOTPCapture(ctx context.Context, in control.TOTPArmIn) (control.TOTPArmOut, error)
	TakeTOTPCapture(ctx context.Context, in control.TOTPTakeIn) (control.TOTPTakeOut, error)
}

var _ HintControl = (*control.Client)(nil)

const (
	totpReloadTimeout = 30 * time.Second
	totpTakeTimeout   = 15 * time.Second
)

// declareTOTPHint is declare_page_hint login.totp_secret (seed 004). The
// agent points at the element showing the enrolment secret; mcpd asks the
// browser where that element sits (no text is read), arms a capture at
// proxyd for this session bound to the page's URL, and loads the page
// again: proxyd reads the secret from that document's bytes (refusing one
// the page echoed from its own request, totp_seed_untrusted), masks it in
// what the browser gets, and stores it on the login. A login that already
// has a secret keeps it until the owner approves the new one: the call
// waits on the owner like a fill does (waitOwner), then collects the
// outcome. The agent gets stored, digits and period, never the secret.
func (s *Server) declareTOTPHint(ctx context.Context, ss *Session, in declareHintIn) (*mcp.CallToolResult, error) {
	hc, ok := s.cfg.Control.(HintControl)
	if !ok {
		return nil, agentvault.Errorf(agentvault.CodeInvalidHint, "login.totp_secret is not accepted on this deployment: ask list_page_hint_kinds")
	}
	if in.Label == "" {
		return nil, agentvault.Errorf(agentvault.CodeInvalidHint, "login.totp_secret needs label: the stored login the secret belongs to")
	}
	if in.Frame != "" {
		return nil, agentvault.Errorf(agentvault.CodeInvalidHint, "login.totp_secret reads the page itself, not a frame")
	}
	if in.Read != "" && in.Read != "text" {
		return nil, agentvault.Errorf(agentvault.CodeInvalidHint, "login.totp_secret reads text only")
	}
	if err := redact.ValidateHintSelector(in.Selector, ss.gate.Filled()); err != nil {
		return nil, err
	}
	pageURL := ss.page.URL()
	u, err := url.Parse(pageURL)
	if err != nil || u.Hostname() == "" {
		return nil, agentvault.Errorf(agentvault.CodeInsecurePage, "the page has no address: open the enrolment page first")
	}
	if !securePage(u) {
		return nil, agentvault.Errorf(agentvault.CodeInsecurePage, "an authenticator secret is read only from an https:// page")
	}
	loc, err := ss.page.LocateElement(in.Selector)
	if err != nil {
		return nil, err
	}
	armed, err := hc.ArmTOTPCapture(ctx, control.TOTPArmIn{Session: ss.ctl.ID, Label: in.Label, PageURL: pageURL,
		Locator: control.TOTPLocator{ID: loc.ID, Tag: loc.Tag, Index: loc.Index}})
	if agentvault.ErrorCode(err) == agentvault.CodeSensitiveDataBlocked {
		// proxyd's precondition: the session has not signed in as that
		// login. The remedy is to sign in, not the after-a-fill one the
		// code usually carries.
		return nil, ownRemedy{err}
	}
	if err != nil {
		return nil, err
	}
	if err := ss.page.Reload(totpReloadTimeout); err != nil {
		return nil, err
	}
	take := control.TOTPTakeIn{Session: ss.ctl.ID, CaptureID: armed.CaptureID, TimeoutMs: int(totpTakeTimeout.Milliseconds())}
	got, err := hc.TakeTOTPCapture(ctx, take)
	for round := 0; err != nil; round++ {
		p, ok := control.PendingOf(err)
		if !ok || agentvault.ErrorCode(err) != agentvault.CodeApprovalPending {
			return nil, err
		}
		if round >= maxOwnerRounds {
			return nil, agentvault.Errorf(agentvault.CodeApprovalPending, "the owner's answer on the new authenticator secret did not arrive; stopped waiting")
		}
		if err := s.waitOwner(ctx, ss, p); err != nil {
			return nil, err
		}
		take.WaitID = p.WaitID
		got, err = hc.TakeTOTPCapture(ctx, take)
	}
	return jsonAnswer(okStatus(), map[string]any{"kind": in.Kind, "accepted": true, "stored": got.Stored,
		"digits": got.Digits, "period": got.Period})
}

// securePage is https://, or http:// on a loopback address.
func securePage(u *url.URL) bool {
	switch u.Scheme {
	case "https":
		return true
	case "http":
		if u.Hostname() == "localhost" {
			return true
		}
		ip := net.ParseIP(u.Hostname())
		return ip != nil && ip.IsLoopback()
	}
	return false
}
