package dashboard

import (
	"html/template"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/agentvault/agentvault/apps"
)

// Connected apps (seed 004, "On the hosted server"): the apps (API keys)
// connected to the hosted MCP server, with their open sessions, and an End
// button per session. proxyd keeps the list in memory as mcpd reports it;
// ending a session closes its proxy session at once (its credential stops
// working), and mcpd refuses the next call on it with the ended-session
// message whose reason is "the account holder ended it on the dashboard".

// Apps is what the dashboard needs from the list of hosted sessions
// (package apps, *apps.Registry).
type Apps interface {
	ConnectedApps() []apps.View
	// EndAppSession ends a listed session; an unknown id is an error
	// whose code is not_found.
	EndAppSession(id string) error
}

func init() {
	layout := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html"))
	pages["apps"] = template.Must(layout.ParseFS(files, "templates/apps.html"))
}

func (h *Handler) appRoutes(m *http.ServeMux) {
	h.route(m, "GET /apps", h.appsPage)
	h.route(m, "POST /apps/sessions/{id}/end", h.endAppSession)
}

type appRow struct {
	KeyID, Name string
	Sessions    []sessionRow
}

type sessionRow struct {
	apps.SessionView
	// Age and Idle are how long ago it started and was last used.
	Age, Idle string
}

func ago(now, t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := now.Sub(t)
	if d < time.Minute {
		return "under a minute"
	}
	return strings.TrimSuffix((d / time.Minute * time.Minute).String(), "0s")
}

func (h *Handler) appsPage(w http.ResponseWriter, r *http.Request) {
	var rows []appRow
	now := h.now()
	if h.apps != nil {
		names := map[string]string{}
		if keys, err := h.svc.APIKeys(r.Context()); err == nil {
			for _, k := range keys {
				names[k.ID] = k.Name
			}
		}
		for _, a := range h.apps.ConnectedApps() {
			sort.Slice(a.Sessions, func(i, j int) bool { return a.Sessions[i].Started.Before(a.Sessions[j].Started) })
			row := appRow{KeyID: a.KeyID, Name: names[a.KeyID]}
			for _, s := range a.Sessions {
				row.Sessions = append(row.Sessions, sessionRow{SessionView: s, Age: ago(now, s.Started), Idle: ago(now, s.LastUsed)})
			}
			rows = append(rows, row)
		}
		sort.Slice(rows, func(i, j int) bool { return rows[i].KeyID < rows[j].KeyID })
	}
	h.page(w, r, "apps", "Connected apps", rows)
}

func (h *Handler) endAppSession(w http.ResponseWriter, r *http.Request) {
	if h.apps == nil {
		h.fail(w, r, http.StatusNotFound, "no such session")
		return
	}
	if err := h.apps.EndAppSession(r.PathValue("id")); err != nil {
		h.redirect(w, r, "/apps", "", "That session had already ended.")
		return
	}
	h.log.Info("hosted session ended by the owner")
	h.redirect(w, r, "/apps", "Session ended. The app's next call on it is told you ended it.", "")
}
