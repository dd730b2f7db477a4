package control

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/agentvault/agentvault"
)

// Challenge hand-off (seed 004 request_challenge_handoff). mcpd owns the
// browser and proxyd owns the owner's dashboard, so the live view travels
// over this loopback API: mcpd registers a hand-off, pushes screencast
// frames, and long-polls the owner's input and decision; the dashboard reads
// the frames and queues the input on proxyd's side (docs/handoff.md). None
// of it is ever part of an MCP answer.

// Paths of the hand-off calls.
const (
	HandoffsPath = "/v1/handoffs"
)

// MaxFrameBytes bounds one screencast frame (a JPEG) on the control API.
const MaxFrameBytes = 4 << 20

// HandoffRequest registers a hand-off of a session's page.
type HandoffRequest struct {
	// ChallengeType is what mcpd's re-detection found: three_ds, otp,
	// captcha or blocked.
	ChallengeType string `json:"challengeType"`
	// Site is the page's host, for the owner's banner (no path, no query).
	Site string `json:"site"`
	// Timeout is how long the owner has, in milliseconds.
	TimeoutMs int64 `json:"timeoutMs"`
}

// HandoffStarted is proxyd's answer: the hand-off's id and the dashboard
// address the owner opens (never shown to the agent).
type HandoffStarted struct {
	ID      string `json:"id"`
	ViewURL string `json:"viewUrl,omitempty"`
}

// HandoffInput is one owner action to replay on the page, in the page's
// CSS pixels. Text is what the owner typed: it goes to the page and nowhere
// else (no log, no answer, no store).
type HandoffInput struct {
	Seq  int64   `json:"seq"`
	Type string  `json:"type"` // click, text, key
	X    float64 `json:"x,omitempty"`
	Y    float64 `json:"y,omitempty"`
	Text string  `json:"text,omitempty"`
	Key  string  `json:"key,omitempty"`
}

// Owner decisions that end a hand-off.
const (
	HandoffOpen      = "open"      // the owner has not decided
	HandoffDone      = "done"      // the owner released the page as finished
	HandoffFailed    = "failed"    // the owner says it failed
	HandoffAbandoned = "abandoned" // the owner gave up
)

// HandoffEvents is a long poll's answer: the owner's input after the seq
// asked for, and their decision so far.
type HandoffEvents struct {
	Inputs   []HandoffInput `json:"inputs"`
	Decision string         `json:"decision"`
}

// HandoffEnd closes a hand-off with the outcome the agent was given.
type HandoffEnd struct {
	Outcome    string `json:"outcome"`
	DurationMs int64  `json:"durationMs"`
}

// HandoffService is the hand-off part of the control API (Service embeds
// it).
type HandoffService interface {
	StartHandoff(ctx context.Context, sessionID string, req HandoffRequest) (HandoffStarted, error)
	// HandoffFrame stores the latest frame of the page (a JPEG) and the
	// page's viewport in CSS pixels.
	HandoffFrame(ctx context.Context, id string, jpeg []byte, width, height int) error
	// HandoffEvents waits up to wait for input after seq or a decision.
	HandoffEvents(ctx context.Context, id string, after int64, wait time.Duration) (HandoffEvents, error)
	EndHandoff(ctx context.Context, id string, end HandoffEnd) error
}

func handoffRoutes(rt routes, svc HandoffService) {
	mux, reply := rt.mux, rt.reply
	mux.HandleFunc("POST "+SessionsPath+"/{id}/handoffs", decoded(rt, false, func(r *http.Request, req HandoffRequest) (HandoffStarted, error) {
		return svc.StartHandoff(r.Context(), r.PathValue("id"), req)
	}))
	mux.HandleFunc("POST "+HandoffsPath+"/{id}/frame", func(w http.ResponseWriter, r *http.Request) {
		data, err := io.ReadAll(io.LimitReader(r.Body, MaxFrameBytes+1))
		if err != nil || len(data) > MaxFrameBytes {
			reply(w, r, nil, agentvault.Errorf(agentvault.CodeBodyTooLarge, "frame too large or unreadable"))
			return
		}
		wd, _ := strconv.Atoi(r.URL.Query().Get("w"))
		ht, _ := strconv.Atoi(r.URL.Query().Get("h"))
		reply(w, r, DoneOut{Done: true}, svc.HandoffFrame(r.Context(), r.PathValue("id"), data, wd, ht))
	})
	mux.HandleFunc("GET "+HandoffsPath+"/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		wait, err := waitParam(r.URL.Query().Get("wait"))
		if err != nil {
			reply(w, r, nil, err)
			return
		}
		after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
		ev, err := svc.HandoffEvents(r.Context(), r.PathValue("id"), after, wait)
		reply(w, r, ev, err)
	})
	mux.HandleFunc("POST "+HandoffsPath+"/{id}/end", decoded(rt, false, func(r *http.Request, end HandoffEnd) (DoneOut, error) {
		return DoneOut{Done: true}, svc.EndHandoff(r.Context(), r.PathValue("id"), end)
	}))
}

// StartHandoff registers a hand-off; proxyd tells the owner.
func (c *Client) StartHandoff(ctx context.Context, sessionID string, req HandoffRequest) (HandoffStarted, error) {
	return call[HandoffStarted](ctx, c, http.MethodPost, sessionPath(sessionID, "handoffs"), req)
}

// HandoffFrame sends one frame.
func (c *Client) HandoffFrame(ctx context.Context, id string, jpeg []byte, width, height int) error {
	q := url.Values{"w": {strconv.Itoa(width)}, "h": {strconv.Itoa(height)}}
	resp, err := c.send(ctx, http.MethodPost, HandoffsPath+"/"+url.PathEscape(id)+"/frame?"+q.Encode(), jpeg, http.Header{"Content-Type": {"image/jpeg"}})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return decodeError(resp.StatusCode, data)
	}
	return nil
}

// HandoffEvents long-polls the owner's input after seq (the server caps the
// wait at 25 s).
func (c *Client) HandoffEvents(ctx context.Context, id string, after int64, wait time.Duration) (HandoffEvents, error) {
	q := url.Values{"after": {strconv.FormatInt(after, 10)}, "wait": {wait.String()}}
	return call[HandoffEvents](ctx, c, http.MethodGet, HandoffsPath+"/"+url.PathEscape(id)+"/events?"+q.Encode(), nil)
}

// EndHandoff closes a hand-off with the agent's outcome.
func (c *Client) EndHandoff(ctx context.Context, id string, end HandoffEnd) error {
	return c.do(ctx, http.MethodPost, HandoffsPath+"/"+url.PathEscape(id)+"/end", end, nil)
}

var _ HandoffService = (*Client)(nil)
