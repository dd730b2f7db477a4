package dashboard

import (
	"context"
	"embed"
	"html/template"
	"net/http"
	"strconv"
	"time"

	"github.com/agentvault/agentvault/handoff"
)

// The live view of a challenge hand-off (seed 004 request_challenge_handoff,
// docs/handoff.md). An agent's page stopped at a 3-D Secure window, a
// one-time code or a CAPTCHA; the owner sees the page here, frame by frame,
// and clicks and types on it. The frames and the owner's input go through
// the Handoffs hub (package handoff, in proxyd's memory) to mcpd, which drives the page: none
// of it reaches the agent, and the owner's typing is never logged here.

// Handoffs is what the dashboard needs from the hand-off hub (package
// handoff, *handoff.Hub).
type Handoffs interface {
	OpenHandoffs() []handoff.View
	Handoff(id string) (handoff.View, bool)
	NextFrame(ctx context.Context, id string, after int64) (handoff.Frame, error)
	HandoffInput(id string, in handoff.InputEvent) error
	DecideHandoff(id, decision string) error
	WaitHandoff(ctx context.Context, id string) (handoff.View, error)
}

//go:embed handoff/handoff.js handoff/handoff.css handoff/handoff.html live/approvals.js
var handoffFiles embed.FS

func init() {
	layout := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html"))
	pages["handoff"] = template.Must(layout.ParseFS(handoffFiles, "handoff/handoff.html"))
}

// liveViewCSP lets the live view run its own script and show frames from
// blob: URLs; everything else stays as strict as the other pages.
const liveViewCSP = "default-src 'none'; style-src 'self'; img-src 'self' blob:; script-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

const (
	// framePoll is the longest one frame request waits for a new frame.
	framePoll = 20 * time.Second
	// decideWait is how long the owner's decision waits for the agent's
	// outcome before the page shows "waiting".
	decideWait = 20 * time.Second
)

func (h *Handler) handoffRoutes(m *http.ServeMux) {
	h.route(m, "GET /handoff.js", h.handoffAsset("handoff/handoff.js", "text/javascript; charset=utf-8"))
	h.route(m, "GET /handoff.css", h.handoffAsset("handoff/handoff.css", "text/css; charset=utf-8"))
	h.route(m, "GET /handoffs", h.handoffsPage)
	h.route(m, "GET /handoffs/{id}", h.handoffPage)
	h.route(m, "GET /handoffs/{id}/frame", h.handoffFrame)
	h.route(m, "POST /handoffs/{id}/input", h.handoffInput)
	h.route(m, "POST /handoffs/{id}/decide", h.handoffDecide)
}

func (h *Handler) handoffAsset(name, ctype string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, _ := handoffFiles.ReadFile(name)
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Cache-Control", "max-age=3600")
		_, _ = w.Write(b)
	}
}

func (h *Handler) noHandoffs(w http.ResponseWriter, r *http.Request) bool {
	if h.handoffs == nil {
		h.fail(w, r, http.StatusNotFound, "challenge hand-offs are not part of this appliance")
		return true
	}
	return false
}

func challengeLabel(t string) string {
	switch t {
	case "three_ds":
		return "Bank verification (3-D Secure)"
	case "otp":
		return "One-time code"
	case "captcha":
		return "CAPTCHA or bot check"
	case "blocked":
		return "The site is blocking the agent"
	}
	return t
}

func (h *Handler) handoffsPage(w http.ResponseWriter, r *http.Request) {
	if h.noHandoffs(w, r) {
		return
	}
	h.page(w, r, "handoff", "Hand-offs", map[string]any{"List": h.handoffs.OpenHandoffs()})
}

func (h *Handler) handoffPage(w http.ResponseWriter, r *http.Request) {
	if h.noHandoffs(w, r) {
		return
	}
	v, ok := h.handoffs.Handoff(r.PathValue("id"))
	if !ok {
		h.fail(w, r, http.StatusNotFound, "this hand-off has ended or never existed")
		return
	}
	w.Header().Set("Content-Security-Policy", liveViewCSP)
	h.page(w, r, "handoff", "Hand-off", map[string]any{"View": v, "Label": challengeLabel(v.ChallengeType)})
}

// handoffFrame answers the next frame after ?after=N as image/jpeg, with
// the page's viewport in headers; 204 when none came within framePoll, 410
// once the hand-off is decided (X-Handoff-Outcome names the outcome once
// the agent has it).
func (h *Handler) handoffFrame(w http.ResponseWriter, r *http.Request) {
	if h.handoffs == nil {
		http.NotFound(w, r)
		return
	}
	after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	ctx, cancel := context.WithTimeout(r.Context(), framePoll)
	defer cancel()
	f, err := h.handoffs.NextFrame(ctx, r.PathValue("id"), after)
	if err != nil {
		if ctx.Err() != nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		http.NotFound(w, r)
		return
	}
	hd := w.Header()
	hd.Set("X-Handoff-Seq", strconv.FormatInt(f.Seq, 10))
	hd.Set("X-Handoff-Decision", f.View.Decision)
	if f.View.Ended {
		hd.Set("X-Handoff-Outcome", f.View.Outcome)
	}
	if f.JPEG == nil {
		w.WriteHeader(http.StatusGone)
		return
	}
	hd.Set("X-Viewport-Width", strconv.Itoa(f.Width))
	hd.Set("X-Viewport-Height", strconv.Itoa(f.Height))
	hd.Set("Content-Type", "image/jpeg")
	hd.Set("Content-Length", strconv.Itoa(len(f.JPEG)))
	_, _ = w.Write(f.JPEG)
}

// handoffInput queues one click, text or key. What the owner typed is
// passed on and forgotten: it is not logged, not echoed, not stored.
func (h *Handler) handoffInput(w http.ResponseWriter, r *http.Request) {
	if h.handoffs == nil {
		http.NotFound(w, r)
		return
	}
	in := handoff.InputEvent{Type: r.PostFormValue("type"), Text: r.PostFormValue("text"), Key: r.PostFormValue("key")}
	in.X, _ = strconv.ParseFloat(r.PostFormValue("x"), 64)
	in.Y, _ = strconv.ParseFloat(r.PostFormValue("y"), 64)
	if err := h.handoffs.HandoffInput(r.PathValue("id"), in); err != nil {
		http.Error(w, "input refused", http.StatusConflict)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handler) handoffDecide(w http.ResponseWriter, r *http.Request) {
	if h.noHandoffs(w, r) {
		return
	}
	id := r.PathValue("id")
	if err := h.handoffs.DecideHandoff(id, r.PostFormValue("decision")); err != nil {
		h.redirect(w, r, "/handoffs/"+id, "", "This hand-off has already ended.")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), decideWait)
	defer cancel()
	v, err := h.handoffs.WaitHandoff(ctx, id)
	if err != nil || !v.Ended {
		h.redirect(w, r, "/handoffs/"+id, "The page went back to the agent; it is still checking the result.", "")
		return
	}
	h.redirect(w, r, "/handoffs/"+id, "The page went back to the agent: "+outcomeText(v.Outcome), "")
}

func outcomeText(o string) string {
	switch o {
	case "solved":
		return "the challenge is gone."
	case "completed":
		return "the agent could not check the page."
	case "released_unsolved":
		return "the challenge is still on the page."
	case "failed":
		return "you marked it as failed."
	case "abandoned":
		return "you gave up."
	}
	return o + "."
}
