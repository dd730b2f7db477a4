package control

import (
	"context"
	"net/http"
)

// Page hints on the control API (seed 004, declare_page_hint and
// list_page_hint_kinds). The kinds come from proxyd, which accepts them; a
// login.totp_secret hint arms a capture of the authenticator seed from the
// next enrolment document the session's browser loads from the host, then
// collects it into the vault. No answer holds the seed.

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

// TOTPArmIn arms a capture for login Label on Host in Session.
type TOTPArmIn struct {
	Session string      `json:"session"`
	Label   string      `json:"label"`
	Host    string      `json:"host"`
	Locator TOTPLocator `json:"locator"`
}

// TOTPArmOut names the armed capture.
type TOTPArmOut struct {
	CaptureID string `json:"captureId"`
}

// TOTPTakeIn waits up to TimeoutMs for the capture and stores the seed.
type TOTPTakeIn struct {
	Session   string `json:"session"`
	CaptureID string `json:"captureId"`
	TimeoutMs int    `json:"timeoutMs,omitempty"`
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

func hintRoutes(mux *routeMux, svc HintService, reply func(http.ResponseWriter, *http.Request, any, error), decode func(*http.Request, any) error) {
	mux.HandleFunc("POST "+HintKindsPath, func(w http.ResponseWriter, r *http.Request) {
		var in HintKindsIn
		if err := decode(r, &in); err != nil {
			reply(w, r, nil, err)
			return
		}
		v, err := svc.HintKinds(r.Context(), in)
		reply(w, r, v, err)
	})
	mux.HandleFunc("POST "+TOTPCaptureArmPath, func(w http.ResponseWriter, r *http.Request) {
		var in TOTPArmIn
		if err := decode(r, &in); err != nil {
			reply(w, r, nil, err)
			return
		}
		v, err := svc.ArmTOTPCapture(r.Context(), in)
		reply(w, r, v, err)
	})
	mux.HandleFunc("POST "+TOTPCaptureTakePath, func(w http.ResponseWriter, r *http.Request) {
		var in TOTPTakeIn
		if err := decode(r, &in); err != nil {
			reply(w, r, nil, err)
			return
		}
		v, err := svc.TakeTOTPCapture(r.Context(), in)
		reply(w, r, v, err)
	})
}

// HintKinds lists the kinds proxyd accepts.
func (c *Client) HintKinds(ctx context.Context, in HintKindsIn) ([]HintKind, error) {
	var out []HintKind
	return out, c.do(ctx, http.MethodPost, HintKindsPath, in, &out)
}

// ArmTOTPCapture arms a TOTP enrolment capture.
func (c *Client) ArmTOTPCapture(ctx context.Context, in TOTPArmIn) (TOTPArmOut, error) {
	var out TOTPArmOut
	return out, c.do(ctx, http.MethodPost, TOTPCaptureArmPath, in, &out)
}

// TakeTOTPCapture waits for the capture and stores the seed.
func (c *Client) TakeTOTPCapture(ctx context.Context, in TOTPTakeIn) (TOTPTakeOut, error) {
	var out TOTPTakeOut
	return out, c.do(ctx, http.MethodPost, TOTPCaptureTakePath, in, &out)
}

var _ HintService = (*Client)(nil)
