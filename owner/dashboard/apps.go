package dashboard

import (
	"html/template"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/apps"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/owner"
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
	// Choose records what an API key may use on the hosted server;
	// Uses reads it back (chosen is false before a choice).
	Choose(keyID string, uses []string) error
	Uses(keyID string) (uses []string, chosen bool)
}

func init() {
	layout := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html"))
	pages["apps"] = template.Must(layout.ParseFS(files, "templates/apps.html"))
}

func (h *Handler) appRoutes(m *http.ServeMux) {
	h.route(m, "GET /apps", h.appsPage)
	h.route(m, "POST /apps/sessions/{id}/end", h.endAppSession)
	h.route(m, "POST /apps/keys/{id}/uses", h.chooseAppUses)
}

// appsData is the Connected apps page: what each live key may use on the
// hosted server, and the open sessions.
type appsData struct {
	Choices []choiceRow
	Apps    []appRow
}

type choiceRow struct {
	KeyID, Name string
	Chosen      bool
	Uses        []useBox
}

type useBox struct {
	Use, Label string
	On         bool
}

// useLabels words each control.AppUses entry for the holder.
var useLabels = map[string]string{
	control.AppUseCheckout: "Browse and check out (pages, the token catalog, fill_checkout, recipe submissions)",
	control.AppUseLogins:   "Browse and use logins (create_login and the other login writes, fill_login)",
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
	var choices []choiceRow
	now := h.now()
	if h.apps != nil {
		names := map[string]string{}
		if keys, err := h.svc.APIKeys(r.Context()); err == nil {
			for _, k := range keys {
				names[k.ID] = k.Name
				if k.Revoked() {
					continue
				}
				uses, chosen := h.apps.Uses(k.ID)
				c := choiceRow{KeyID: k.ID, Name: k.Name, Chosen: chosen}
				for _, u := range control.AppUses {
					c.Uses = append(c.Uses, useBox{Use: u, Label: useLabels[u], On: slices.Contains(uses, u)})
				}
				choices = append(choices, c)
			}
			sort.Slice(choices, func(i, j int) bool { return choices[i].KeyID < choices[j].KeyID })
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
	h.page(w, r, "apps", "Connected apps", appsData{Choices: choices, Apps: rows})
}

// chooseAppUses records what a key may use on the hosted server: the
// checked boxes, none meaning only get_checkout_recipes.
func (h *Handler) chooseAppUses(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if h.apps == nil {
		h.fail(w, r, http.StatusNotFound, "connected apps are not kept here")
		return
	}
	keys, err := h.svc.APIKeys(r.Context())
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if !slices.ContainsFunc(keys, func(k owner.APIKey) bool { return k.ID == id && !k.Revoked() }) {
		h.redirect(w, r, "/apps", "", "No live API key has that id: reload the page and choose again.")
		return
	}
	_ = r.ParseForm()
	if err := h.apps.Choose(id, r.PostForm["use"]); err != nil {
		h.redirect(w, r, "/apps", "", agentvault.ErrorMessage(err))
		return
	}
	h.log.Info("connected app uses chosen", "key", id, "uses", len(r.PostForm["use"]))
	h.redirect(w, r, "/apps", "Saved. The app's calls follow your choice within a second.", "")
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
