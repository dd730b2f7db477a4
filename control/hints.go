package control

import (
	"context"
	"net/http"
)

// Page hints on the control API (seed 004, declare_page_hint and
// list_page_hint_kinds). The kinds come from proxyd, which accepts them; a
// login.totp_secret hint arms a capture of the authenticator seed bound to
// the page the hint was declared on (the answer to mcpd's reload of that
// URL, nothing else), then collects it into the vault. A login that has a
// seed already is changed only once the owner approved: take answers 202
// with a Pending (like authorize), mcpd waits on it, and takes again with
// its WaitID. No answer holds the seed.

// Paths of the hint calls on the control API (all POST).
const (
	HintKindsPath       = "/v1/hints/kinds"
	TOTPCaptureArmPath  = "/v1/hints/totp/arm"
	TOTPCaptureTakePath = "/v1/hints/totp/take"
)

// HintKind is one page hint kind as list_page_hint_kinds describes it.
type HintKind struct {
	Kind          string   `json:"kind"`
	Purpose       string   `json:"purpose"`
	Reads         []string `json:"reads,omitempty"`
	Attributes    []string `json:"attributes,omitempty"`
	FrameAllowed  bool     `json:"frameAllowed"`
	Preconditions string   `json:"preconditions,omitempty"`
}

// HintKindsIn asks for the kinds a session may declare.
type HintKindsIn struct {
	Session string `json:"session"`
}

// TOTPLocator is where the seed sits on the page: the element's id, or its
// tag and index among that tag's elements in document order.
type TOTPLocator struct {
	ID    string `json:"id,omitempty"`
	Tag   string `json:"tag,omitempty"`
	Index int    `json:"index"`
}

// TOTPArmIn arms a capture for login Label in Session, bound to PageURL:
// the page's address as the browser has it (https, host, port, path and
// query), the one document the capture reads.
type TOTPArmIn struct {
	Session string      `json:"session"`
	Label   string      `json:"label"`
	PageURL string      `json:"pageUrl"`
	Locator TOTPLocator `json:"locator"`
}

// TOTPArmOut names the armed capture.
type TOTPArmOut struct {
	CaptureID string `json:"captureId"`
}

// TOTPTakeIn waits up to TimeoutMs for the capture and stores the seed.
// With WaitID (the Pending an earlier take answered), it collects the
// outcome of the owner's decision on replacing the login's seed instead.
type TOTPTakeIn struct {
	Session   string `json:"session"`
	CaptureID string `json:"captureId"`
	TimeoutMs int    `json:"timeoutMs,omitempty"`
	WaitID    string `json:"waitId,omitempty"`
}

// TOTPTakeOut is what declare_page_hint answers: stored, and the code's
// digits and period, never the seed.
type TOTPTakeOut struct {
	Stored bool `json:"stored"`
	Digits int  `json:"digits"`
	Period int  `json:"period"`
}

// HintService is the control API's page hint part (Service embeds it).
type HintService interface {
	HintKinds(ctx context.Context, in HintKindsIn) ([]HintKind, error)
	ArmTOTPCapture(ctx context.Context, in TOTPArmIn) (TOTPArmOut, error)
	TakeTOTPCapture(ctx context.Context, in TOTPTakeIn) (TOTPTakeOut, error)
}

func hintRoutes(rt routes, svc HintService) {
	post(rt, HintKindsPath, svc.HintKinds)
	post(rt, TOTPCaptureArmPath, svc.ArmTOTPCapture)
	rt.mux.HandleFunc("POST "+TOTPCaptureTakePath, decoded(rt, true, func(r *http.Request, in TOTPTakeIn) (TOTPTakeOut, error) {
		return svc.TakeTOTPCapture(r.Context(), in)
	}))
}

// HintKinds lists the kinds proxyd accepts.
func (c *Client) HintKinds(ctx context.Context, in HintKindsIn) ([]HintKind, error) {
	return call[[]HintKind](ctx, c, http.MethodPost, HintKindsPath, in)
}

// ArmTOTPCapture arms a TOTP enrolment capture.
func (c *Client) ArmTOTPCapture(ctx context.Context, in TOTPArmIn) (TOTPArmOut, error) {
	return call[TOTPArmOut](ctx, c, http.MethodPost, TOTPCaptureArmPath, in)
}

// TakeTOTPCapture waits for the capture and stores the seed. When the
// owner must decide first (the login has a seed), the error has code
// approval_pending and PendingOf(err) gives what to wait on.
func (c *Client) TakeTOTPCapture(ctx context.Context, in TOTPTakeIn) (TOTPTakeOut, error) {
	return callWaiting[TOTPTakeOut](ctx, c, http.MethodPost, TOTPCaptureTakePath, in)
}

var _ HintService = (*Client)(nil)
