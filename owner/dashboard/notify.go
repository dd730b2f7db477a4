package dashboard

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/agentvault/agentvault/owner"
)

// Notifications (seed 004): the owner turns the channels the deployment
// configured on and off, and the switch "A checkout needs me to clear a bank
// or verification step" for hand-offs. The Approvals page updates itself by
// polling /approvals/live (JSON, ids and public facts only) and, when the
// owner allowed it, shows the browser's own notifications; without script it
// falls back to a meta refresh.

// NotifyChannels says which channels the deployment configured.
type NotifyChannels struct{ Webhook, Email bool }

// Notifications is what the dashboard needs from proxyd's notification
// state.
type Notifications interface {
	NotifyPrefs() owner.NotifyPrefs
	SetNotifyPrefs(ctx context.Context, p owner.NotifyPrefs) error
	NotifyChannels() NotifyChannels
}

// approvalsCSP lets the Approvals page run its one script (approvals.js)
// and poll /approvals/live; every other page runs none.
const approvalsCSP = "default-src 'none'; style-src 'self'; img-src 'self'; script-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func (h *Handler) notifyRoutes(m *http.ServeMux) {
	h.route(m, "GET /approvals.js", h.handoffAsset("live/approvals.js", "text/javascript; charset=utf-8"))
	h.route(m, "GET /approvals/live", h.approvalsLive)
	h.route(m, "GET /notifications", h.notificationsPage)
	h.route(m, "POST /notifications", h.saveNotifications)
}

func (h *Handler) notifyPrefs() owner.NotifyPrefs {
	if h.notifs == nil {
		return owner.NotifyPrefs{}
	}
	return h.notifs.NotifyPrefs()
}

func (h *Handler) notificationsPage(w http.ResponseWriter, r *http.Request) {
	if h.notifs == nil {
		h.fail(w, r, http.StatusNotFound, "notifications are not part of this appliance")
		return
	}
	h.page(w, r, "notifications", "Notifications", map[string]any{"Prefs": h.notifs.NotifyPrefs(), "Channels": h.notifs.NotifyChannels()})
}

func (h *Handler) saveNotifications(w http.ResponseWriter, r *http.Request) {
	if h.notifs == nil {
		h.fail(w, r, http.StatusNotFound, "notifications are not part of this appliance")
		return
	}
	on := func(k string) bool { return r.PostFormValue(k) == "on" }
	p := owner.NotifyPrefs{Webhook: on("webhook"), Email: on("email"), Browser: on("browser"), Challenges: on("challenges")}
	// A channel not configured shows a disabled box, which a form does not
	// send: keep its switch as it was for when it is configured.
	cur, ch := h.notifs.NotifyPrefs(), h.notifs.NotifyChannels()
	if !ch.Webhook {
		p.Webhook = cur.Webhook
	}
	if !ch.Email {
		p.Email = cur.Email
	}
	if err := h.notifs.SetNotifyPrefs(r.Context(), p); err != nil {
		h.internal(w, r, err)
		return
	}
	h.redirect(w, r, "/notifications", "Notification settings saved.", "")
}

// liveItem is one waiting request as the Approvals page's script sees it.
type liveItem struct {
	ID   string `json:"id"`
	Kind string `json:"kind"` // an approval kind, or challenge_handoff
	Site string `json:"site"`
	URL  string `json:"url"`
}

// liveState is /approvals/live's answer.
type liveState struct {
	Pending []liveItem `json:"pending"`
	// Browser: the owner wants the browser's own notifications; Challenges:
	// hand-offs are among them.
	Browser    bool `json:"browser"`
	Challenges bool `json:"challenges"`
}

func (h *Handler) liveState(ctx context.Context) (liveState, error) {
	pending, err := h.svc.Approvals(ctx, owner.ApprovalFilter{Status: owner.StatusPending, Limit: 50})
	if err != nil {
		return liveState{}, err
	}
	p := h.notifyPrefs()
	out := liveState{Pending: []liveItem{}, Browser: p.Browser, Challenges: p.Challenges}
	for _, a := range pending {
		out.Pending = append(out.Pending, liveItem{ID: a.ID, Kind: string(a.Kind), Site: a.Site, URL: "/"})
	}
	if h.handoffs != nil {
		for _, v := range h.handoffs.OpenHandoffs() {
			out.Pending = append(out.Pending, liveItem{ID: v.ID, Kind: "challenge_handoff", Site: v.Site, URL: "/handoffs/" + v.ID})
		}
	}
	return out, nil
}

func (h *Handler) approvalsLive(w http.ResponseWriter, r *http.Request) {
	st, err := h.liveState(r.Context())
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(st)
}
