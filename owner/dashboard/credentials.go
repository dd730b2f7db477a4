package dashboard

import (
	"net/http"
	"strings"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/authz"
	"github.com/agentvault/agentvault/credentials"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/vault"
)

// Portal credentials (seed 003): the one-time entry form a
// credential_request link opens, the list of credentials (owners and admins
// also see members' personal ones, to delete them when someone leaves,
// never to use or read them), members with their roles and teams, and which
// member each API key acts for. A key an owner or admin binds to someone
// else is an offer: the person accepts it here, signed in as themselves,
// before it reaches their personal credentials (P24). No page here ever
// shows a value.

func (h *Handler) credentialRoutes(m *http.ServeMux) {
	h.route(m, "GET /credentials", h.credentialsPage)
	h.route(m, "POST /credentials/{id}/delete", h.deleteCredential)
	h.route(m, "POST /credentials/members", h.putMember)
	h.route(m, "POST /credentials/keys", h.bindKey)
	h.route(m, "POST /credentials/keys/{id}/accept", h.acceptKey)
	h.route(m, "GET /credentials/enter/{token}", h.entryPage)
	h.route(m, "POST /credentials/enter", h.submitEntry)
}

func (h *Handler) principal(w http.ResponseWriter, r *http.Request) (credentials.Principal, bool) {
	if h.creds == nil {
		h.fail(w, r, http.StatusNotFound, "credentials are not enabled on this appliance")
		return credentials.Principal{}, false
	}
	p, err := h.creds.PrincipalFor(r.Context(), h.svc.Org(), sess(r).email)
	if err != nil {
		h.credErr(w, r, "", err)
		return credentials.Principal{}, false
	}
	return p, true
}

// credErr shows a refusal's public message; back, when set, is where the
// page goes with it as an error flash.
func (h *Handler) credErr(w http.ResponseWriter, r *http.Request, back string, err error) {
	status := http.StatusInternalServerError
	switch agentvault.ErrorCode(err) {
	case agentvault.CodeForbidden:
		status = http.StatusForbidden
	case agentvault.CodeNotFound:
		status = http.StatusNotFound
	case agentvault.CodeLinkUsed, agentvault.CodeLinkExpired:
		status = http.StatusGone
	case agentvault.CodeInvalidInput, agentvault.CodeConflict:
		status = http.StatusBadRequest
	default:
		h.internal(w, r, err)
		return
	}
	if back != "" {
		h.redirect(w, r, back, "", agentvault.ErrorMessage(err))
		return
	}
	h.fail(w, r, status, agentvault.ErrorMessage(err))
}

type credentialsData struct {
	P       credentials.Principal
	List    []credentials.Listed
	Members []credentials.Member
	Keys    []owner.APIKey
	// Ladder is every role from the top; Roles the ones P may give someone
	// new (authz.SetRole).
	Ladder []credentials.Role
	Roles  []credentials.Role
	// Offered and Mine: the keys bound to P, waiting for P's acceptance or
	// acting for P.
	Offered []keyLine
	Mine    []keyLine
	// ActsFor: for owners and admins, whom each API key acts for.
	ActsFor []keyLine
}

// keyLine is an API key with the person it is bound to.
type keyLine struct {
	ID, Name  string
	User, By  string
	Consented bool
}

func (h *Handler) credentialsPage(w http.ResponseWriter, r *http.Request) {
	p, ok := h.principal(w, r)
	if !ok {
		return
	}
	list, err := h.creds.List(r.Context(), p)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	d := credentialsData{P: p, List: list, Ladder: authz.Roles}
	for _, role := range authz.Roles {
		if authz.SetRole(p.Role, "", role, false, 1) == nil {
			d.Roles = append(d.Roles, role)
		}
	}
	keys, names, err := h.keyNames(r.Context())
	if err != nil {
		h.internal(w, r, err)
		return
	}
	bindings, err := h.creds.KeyBindings(r.Context(), p)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	for _, b := range bindings {
		if b.User != p.User {
			continue
		}
		l := keyLine{ID: b.KeyID, Name: names[b.KeyID], User: b.User, By: b.By, Consented: b.Consented}
		if b.Consented {
			d.Mine = append(d.Mine, l)
		} else {
			d.Offered = append(d.Offered, l)
		}
	}
	if p.Role.Manages() {
		if d.Members, err = h.creds.Members(r.Context(), p); err != nil {
			h.internal(w, r, err)
			return
		}
		d.Keys = keys
		for _, k := range keys {
			l := keyLine{ID: k.ID, Name: k.Name}
			// Whom the key acts for, by the service's one rule (the
			// default key included); a key for nobody shows empty.
			if kp, err := h.creds.KeyPrincipal(r.Context(), k.ID); err == nil {
				l.User, l.Consented = kp.User, kp.Consented
			}
			d.ActsFor = append(d.ActsFor, l)
		}
	}
	h.page(w, r, "credentials", "Credentials", d)
}

func (h *Handler) deleteCredential(w http.ResponseWriter, r *http.Request) {
	p, ok := h.principal(w, r)
	if !ok {
		return
	}
	c, err := h.creds.Get(r.Context(), p, r.PathValue("id"))
	if err == nil {
		err = h.creds.Delete(r.Context(), p, c.ID)
	}
	if err != nil {
		h.credErr(w, r, "/credentials", err)
		return
	}
	h.log.Info("credential deleted", "credential", c.ID, "visibility", string(c.Visibility))
	h.redirect(w, r, "/credentials", "Credential "+c.Name+" of "+c.Owner+" deleted, with its values, links and grants.", "")
}

func (h *Handler) putMember(w http.ResponseWriter, r *http.Request) {
	p, ok := h.principal(w, r)
	if !ok {
		return
	}
	var teams []string
	for _, t := range strings.FieldsFunc(r.PostFormValue("teams"), func(c rune) bool { return c == ',' || c == ' ' }) {
		teams = append(teams, strings.ToLower(t))
	}
	m := credentials.Member{Org: p.Org, User: r.PostFormValue("user"), Role: credentials.Role(r.PostFormValue("role")), Teams: teams}
	if err := h.creds.PutMember(r.Context(), p, m); err != nil {
		h.credErr(w, r, "/credentials", err)
		return
	}
	h.redirect(w, r, "/credentials", "Member saved.", "")
}

func (h *Handler) bindKey(w http.ResponseWriter, r *http.Request) {
	p, ok := h.principal(w, r)
	if !ok {
		return
	}
	b, err := h.creds.BindKey(r.Context(), p, r.PostFormValue("key"), r.PostFormValue("user"))
	if err != nil {
		h.credErr(w, r, "/credentials", err)
		return
	}
	if b.Consented {
		h.redirect(w, r, "/credentials", "The API key acts for "+b.User+".", "")
		return
	}
	h.redirect(w, r, "/credentials", "Offered the API key to "+b.User+". It reaches their own credentials only once they accept it on their Credentials page.", "")
}

// acceptKey is the signed-in person accepting an API key offered to them:
// from then on it acts for them and reaches their personal credentials.
func (h *Handler) acceptKey(w http.ResponseWriter, r *http.Request) {
	p, ok := h.principal(w, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	if err := h.creds.AcceptKey(r.Context(), p, id); err != nil {
		h.credErr(w, r, "/credentials", err)
		return
	}
	h.log.Info("API key accepted", "key", id)
	h.redirect(w, r, "/credentials", "The API key now acts for you: an agent holding it can use your own credentials.", "")
}

type entryData struct {
	Token  string
	Cred   credentials.Credential
	Fields []string
}

// entryPage opens a credential_request link: only for the requester, only
// once (a second open is refused), within its hour.
func (h *Handler) entryPage(w http.ResponseWriter, r *http.Request) {
	p, ok := h.principal(w, r)
	if !ok {
		return
	}
	tok := r.PathValue("token")
	c, l, err := h.creds.OpenEntry(r.Context(), p, tok)
	if err != nil {
		h.credErr(w, r, "", err)
		return
	}
	h.page(w, r, "credentialentry", "Enter "+c.Name, entryData{Token: tok, Cred: c, Fields: l.Fields})
}

func (h *Handler) submitEntry(w http.ResponseWriter, r *http.Request) {
	p, ok := h.principal(w, r)
	if !ok {
		return
	}
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, http.StatusBadRequest, "the form could not be read")
		return
	}
	values := map[string]vault.Secret{}
	for k, v := range r.PostForm {
		if f, ok := strings.CutPrefix(k, "value_"); ok && len(v) == 1 && v[0] != "" {
			values[f] = vault.NewSecret([]byte(v[0]))
		}
	}
	c, err := h.creds.SubmitEntry(r.Context(), p, r.PostFormValue("token"), values)
	for _, s := range values {
		s.Wipe()
	}
	if err != nil {
		h.credErr(w, r, "", err)
		return
	}
	h.log.Info("credential values saved", "credential", c.ID)
	h.redirect(w, r, "/credentials", "Saved the values of "+c.Name+". You can close this page.", "")
}
