package dashboard

import (
	"context"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/authz"
)

// Signed requests (issue 29): the agent's identity on the wire, which
// proxyd signs for with a key sealed in the vault (package botauth, wired
// by proxyd). The page shows the identity (the key in use, where sites
// fetch the keys, whether signing is on), the sites chosen with the tags
// each gets, and, to whoever may read the activity log, the signed
// request classes as the audit log counted them. Choosing sites and
// their Visa TAP uses belongs to the sites area (like authorizing a site,
// it decides what a site learns from the agent); rotating the key is the
// owner's alone (every site that knows the agent by it is affected) and
// asks for a confirmation first. Nothing here can reach a private key:
// the page shows key ids, which are public thumbprints.

// Signing is what the dashboard needs from proxyd's signing identity.
type Signing interface {
	SigningState(ctx context.Context) (SigningState, error)
	// SignedClasses lists the signed request classes audited since a
	// time, newest first.
	SignedClasses(ctx context.Context, since time.Time) ([]SignedClass, error)
	// EnableSigning signs requests to host (and its subdomains) with Web
	// Bot Auth and the Visa TAP uses given (TAPBrowse, TAPPay); a site
	// already chosen gets exactly these uses. A host that is not one is
	// an error whose code is invalid_input.
	EnableSigning(ctx context.Context, host string, tap []string) (SignedSite, error)
	// DisableSigning stops signing for a site the owner chose. A site
	// proxyd's config names is an error that says where to remove it.
	DisableSigning(ctx context.Context, host string) error
	// RotateSigningKey makes a new key sign from now; the old one stays
	// in the directory until every signature it made has expired.
	RotateSigningKey(ctx context.Context) (Rotation, error)
}

// The Visa TAP uses a site may have (package botauth's names).
const (
	TAPBrowse = "browse"
	TAPPay    = "pay"
)

// SigningState is the identity as the owner sees it.
type SigningState struct {
	// On: the config sets where the keys are published, so requests to
	// the sites below are signed. Off: the sites are kept, nothing signs.
	On bool
	// DirectoryURL is where sites fetch the public keys ("" when off).
	DirectoryURL string
	// Window is how long a signature is valid; KeepOld how long a
	// rotated key stays in the directory.
	Window, KeepOld time.Duration
	// Keys are the published keys, the one in use last.
	Keys  []SigningKey
	Sites []SignedSite
}

// SigningKey is a published key: its id (the JWK thumbprint sites look
// it up by) and, once rotated, when it leaves the directory.
type SigningKey struct {
	ID      string
	Created time.Time
	Retire  time.Time // zero: the key in use
}

// SignedSite is a site requests are signed for.
type SignedSite struct {
	Host string
	TAP  []string // TAPBrowse, TAPPay
	// Config: proxyd's config names it (bot_auth.sites); Owner: the owner
	// chose it here or with `proxyd botauth enable`.
	Config, Owner bool
}

// Tags says what a request to the site is signed with, in the owner's
// words with the tag a merchant sees.
func (s SignedSite) Tags() []string {
	out := []string{"Web Bot Auth (web-bot-auth)"}
	for _, u := range s.TAP {
		switch u {
		case TAPBrowse:
			out = append(out, "Visa TAP browsing (agent-browser-auth)")
		case TAPPay:
			out = append(out, "Visa TAP payment (agent-payer-auth)")
		}
	}
	return out
}

// HasTAP reports whether a TAP use is on for the site.
func (s SignedSite) HasTAP(u string) bool {
	for _, x := range s.TAP {
		if x == u {
			return true
		}
	}
	return false
}

// SignedClass is one signed request class: a session's requests to one
// chosen site under one tag, audited at its first request and counted
// when the session ended.
type SignedClass struct {
	Session, Site, Tag string
	Key                string // the API key the session ran under
	First              time.Time
	// Requests is the count, known once the session ended (Ended).
	Requests int
	Ended    bool
}

// Rotation is what a rotation did.
type Rotation struct {
	New, Old  string
	OldRetire time.Time
}

func init() {
	layout := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html"))
	for _, name := range []string{"signing", "signingrotate"} {
		t := template.Must(layout.Clone())
		pages[name] = template.Must(t.ParseFS(files, "templates/"+name+".html"))
	}
}

func (h *Handler) signingRoutes(m *http.ServeMux) {
	h.route(m, "GET /signing", h.signingPage)
	h.route(m, "POST /signing/sites", h.enableSigning)
	h.route(m, "POST /signing/sites/remove", h.disableSigning)
	h.route(m, "GET /signing/rotate", h.confirmRotate)
	h.route(m, "POST /signing/rotate", h.rotateSigningKey)
}

// signingAbsent answers every signing route when proxyd gave no Signing.
func (h *Handler) signingAbsent(w http.ResponseWriter, r *http.Request) bool {
	if h.signing != nil {
		return false
	}
	h.fail(w, r, http.StatusNotFound, "signed requests are not part of this appliance")
	return true
}

// signedClassDays is how far back the page lists signed request classes.
const signedClassDays = 30

type signingData struct {
	State SigningState
	// InUse is the key signing now ("" before proxyd first created one).
	InUse string
	// Classes are shown only to whoever may read the activity log.
	ShowClasses bool
	Classes     []SignedClass
	Days        int
}

// signingState reads what the signing pages show; false when it answered
// already (no signing here, or the state could not be read).
func (h *Handler) signingState(w http.ResponseWriter, r *http.Request) (signingData, bool) {
	if h.signingAbsent(w, r) {
		return signingData{}, false
	}
	st, err := h.signing.SigningState(r.Context())
	if err != nil {
		h.internal(w, r, err)
		return signingData{}, false
	}
	d := signingData{State: st}
	if n := len(st.Keys); n > 0 {
		d.InUse = st.Keys[n-1].ID
	}
	return d, true
}

func (h *Handler) signingPage(w http.ResponseWriter, r *http.Request) {
	d, ok := h.signingState(w, r)
	if !ok {
		return
	}
	d.Days = signedClassDays
	var err error
	// The audit records are the activity log's: the sites area alone does
	// not show them.
	if authz.CanSee(sess(r).sub, authz.Dashboard, "GET /activity") {
		d.ShowClasses = true
		if d.Classes, err = h.signing.SignedClasses(r.Context(), h.now().Add(-signedClassDays*24*time.Hour)); err != nil {
			h.internal(w, r, err)
			return
		}
	}
	h.page(w, r, "signing", "Signed requests", d)
}

func (h *Handler) enableSigning(w http.ResponseWriter, r *http.Request) {
	if h.signingAbsent(w, r) {
		return
	}
	host := strings.TrimSpace(r.PostFormValue("host"))
	if host == "" {
		h.redirect(w, r, "/signing", "", "Name the site (a host such as shop.example).")
		return
	}
	site, err := h.signing.EnableSigning(r.Context(), host, r.PostForm["tap"])
	if err != nil {
		h.formErr(w, r, "/signing", err)
		return
	}
	h.log.Info("signed requests: site chosen", "site", site.Host, "tap", strings.Join(site.TAP, ","))
	h.redirect(w, r, "/signing", "Requests to "+site.Host+" and its subdomains are signed with "+strings.Join(site.Tags(), " and ")+
		": the site learns they come from this agent.", "")
}

func (h *Handler) disableSigning(w http.ResponseWriter, r *http.Request) {
	if h.signingAbsent(w, r) {
		return
	}
	host := strings.TrimSpace(r.PostFormValue("host"))
	if err := h.signing.DisableSigning(r.Context(), host); err != nil {
		if agentvault.ErrorCode(err) == agentvault.CodeNotFound {
			h.redirect(w, r, "/signing", "", agentvault.ErrorMessage(err))
			return
		}
		h.formErr(w, r, "/signing", err)
		return
	}
	h.log.Info("signed requests: site dropped", "site", host)
	h.redirect(w, r, "/signing", "Requests to "+host+" are no longer signed.", "")
}

func (h *Handler) confirmRotate(w http.ResponseWriter, r *http.Request) {
	d, ok := h.signingState(w, r)
	if !ok {
		return
	}
	h.page(w, r, "signingrotate", "Rotate the signing key", d)
}

func (h *Handler) rotateSigningKey(w http.ResponseWriter, r *http.Request) {
	if h.signingAbsent(w, r) {
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		h.fail(w, r, http.StatusBadRequest, "confirm the rotation on its page")
		return
	}
	rot, err := h.signing.RotateSigningKey(r.Context())
	if err != nil {
		h.formErr(w, r, "/signing", err)
		return
	}
	h.log.Info("signed requests: key rotated", "key", rot.New, "old_key", rot.Old)
	h.redirect(w, r, "/signing", "Key "+rot.New+" signs from now. The old key "+rot.Old+" stays in the directory until "+
		rot.OldRetire.UTC().Format("2006-01-02 15:04 UTC")+", when every signature it made has expired.", "")
}
