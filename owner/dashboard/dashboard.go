package dashboard

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/authz"
	"github.com/agentvault/agentvault/credentials"
	"github.com/agentvault/agentvault/handoff"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/vault"
)

// Vault is what the dashboard needs from the vault: item metadata, the
// audit log, and the owner's edits (add, update, remove).
// *vault.Vault implements it. Nothing here can release a value: values go
// in through the add forms and never come back out.
type Vault interface {
	List(ctx context.Context, org string) ([]vault.Item, error)
	Get(ctx context.Context, org, id string) (vault.Item, error)
	Audit(ctx context.Context, f vault.AuditFilter) ([]vault.AuditRecord, error)
	AddCard(ctx context.Context, org, owner string, in vault.CardInput) (vault.Item, error)
	AddLogin(ctx context.Context, org, owner string, in vault.LoginInput) (vault.Item, error)
	UpdateCard(ctx context.Context, org, id string, u vault.CardUpdate) (vault.Item, error)
	Remove(ctx context.Context, org, id string) error
	// AuditHMAC, SealBlob and OpenBlob let internal/cardcheck find a card
	// already in the vault by its number's keyed HMAC.
	AuditHMAC(value vault.Secret) []byte
	SealBlob(ctx context.Context, name string, data []byte) error
	OpenBlob(ctx context.Context, name string) ([]byte, error)
}

// Config configures the dashboard handler.
type Config struct {
	Service *owner.Service
	Vault   Vault
	Logger  *slog.Logger
	Now     func() time.Time
	// SignInBurst failed sign-ins are allowed per (client address, email),
	// four times as many per address; each further failure waits, from
	// SignInEvery doubling up to 15 minutes. Successful sign-ins never
	// count, and failures from one address never slow another. Zero: 5 and
	// a minute.
	SignInBurst int
	SignInEvery time.Duration
	// LiveCVV, when set, lets the owner answer a cvv_entry approval by
	// typing the card's security code: the dashboard hands it to this hook
	// (proxyd keeps it in the waiting session's memory for that one fill,
	// never in the vault or a log) and then approves. Without it a CVV
	// entry can only be denied here.
	LiveCVV func(ctx context.Context, a owner.Approval, cvv vault.Secret) error
	// Recipes, when set, is the checkout recipe registry whose submissions
	// the owner reviews on /recipes.
	Recipes Recipes
	// Credentials, when set, serves the portal credential pages
	// (credentials.go): entry forms, the list, members and key bindings.
	Credentials *credentials.Service
	// OnSignInFailed, when set, is called for each refused sign-in (wrong
	// email or password, or rate limited): proxyd counts them for alerts.
	OnSignInFailed func()
	// Handoffs, when set, serves the live view of challenge hand-offs
	// (handoff.go).
	Handoffs Handoffs
	// Notifications, when set, serves the owner's notification switches
	// (notify.go).
	Notifications Notifications
	// Apps, when set, serves the connected apps page (apps.go).
	Apps Apps
	// Signing, when set, serves the signed requests page (signing.go).
	Signing Signing
}

// Handler serves the dashboard.
type Handler struct {
	svc     *owner.Service
	vault   Vault
	log     *slog.Logger
	now     func() time.Time
	guard   *signInGuard // failed sign-ins per address and per (address, email)
	liveCVV func(ctx context.Context, a owner.Approval, cvv vault.Secret) error
	recipes Recipes
	creds   *credentials.Service
	mux     *http.ServeMux
	// signInFailed is Config.OnSignInFailed or a no-op.
	signInFailed func()

	handoffs Handoffs      // challenge hand-offs' live view (handoff.go)
	notifs   Notifications // the owner's notification switches (notify.go)
	apps     Apps          // connected apps and their hosted sessions (apps.go)
	signing  Signing       // the agent's signing identity (signing.go)

	routes []string // every pattern registered, each through authz (access.go)
}

const (
	sessionCookie = "__Host-av_session"
	preCookie     = "__Host-av_pre" // anti-CSRF for the sign-in form itself
	flashCookie   = "__Host-av_flash"
	maxForm       = 64 << 10
)

// New builds the handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Service == nil || cfg.Vault == nil {
		return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "dashboard needs the owner service and the vault")
	}
	h := &Handler{svc: cfg.Service, vault: cfg.Vault, log: cfg.Logger, now: cfg.Now, liveCVV: cfg.LiveCVV, recipes: cfg.Recipes, creds: cfg.Credentials, handoffs: cfg.Handoffs, notifs: cfg.Notifications, apps: cfg.Apps,
		signing: cfg.Signing, signInFailed: cfg.OnSignInFailed}
	if h.signInFailed == nil {
		h.signInFailed = func() {}
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.now == nil {
		h.now = time.Now
	}
	burst, every := cfg.SignInBurst, cfg.SignInEvery
	if burst <= 0 {
		burst = 5
	}
	if every <= 0 {
		every = time.Minute
	}
	h.guard = newSignInGuard(burst, every, h.now)
	m := http.NewServeMux()
	h.route(m, "GET /style.css", h.style)
	h.route(m, "GET /signin", h.signInPage)
	h.route(m, "POST /signin", h.signIn)
	h.route(m, "POST /signout", h.signOut)
	h.route(m, "GET /{$}", h.approvalsPage)
	h.route(m, "POST /approvals/{id}", h.decide)
	h.route(m, "GET /cards", h.cardsPage)
	h.route(m, "GET /cards/new", h.newCardPage)
	h.route(m, "POST /cards", h.addCard)
	h.route(m, "POST /cards/{id}", h.saveCard)
	h.route(m, "POST /cards/{id}/use", h.saveCardUse)
	h.route(m, "GET /cards/{id}/remove", h.confirmRemove(vault.KindCard))
	h.route(m, "POST /cards/{id}/remove", h.removeItem(vault.KindCard))
	h.route(m, "GET /logins", h.loginsPage)
	h.route(m, "GET /logins/new", h.newLoginPage)
	h.route(m, "POST /logins", h.addLogin)
	h.route(m, "GET /logins/{id}/remove", h.confirmRemove(vault.KindLogin))
	h.route(m, "POST /logins/{id}/remove", h.removeItem(vault.KindLogin))
	h.route(m, "GET /keys", h.keysPage)
	h.route(m, "POST /keys", h.createKey)
	h.route(m, "POST /keys/{id}/scope", h.setScope)
	h.route(m, "POST /keys/{id}/revoke", h.revokeKey)
	h.route(m, "GET /sites", h.sitesPage)
	h.route(m, "POST /sites", h.addSite)
	h.route(m, "POST /sites/remove", h.removeSite)
	h.route(m, "GET /signups", h.signupsPage)
	h.route(m, "POST /signups", h.addSignup)
	h.route(m, "POST /signups/remove", h.removeSignup)
	h.route(m, "GET /activity", h.activityPage)
	h.route(m, "GET /recipes", h.recipesPage)
	h.route(m, "POST /recipes/{id}/accept", h.acceptRecipe)
	h.route(m, "POST /recipes/{id}/reject", h.rejectRecipe)
	h.route(m, "POST /recipes/{id}/edit", h.editRecipe)
	h.route(m, "GET /delegation", h.delegationPage)
	h.route(m, "POST /delegation", h.saveDelegation)
	h.credentialRoutes(m)
	h.handoffRoutes(m)
	h.notifyRoutes(m)
	h.appRoutes(m)
	h.signingRoutes(m)
	h.mux = m
	return h, nil
}

// ServeHTTP implements http.Handler with the security headers every answer
// carries.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Strict-Transport-Security", "max-age=31536000")
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
		// Browsers send Origin on POST; one from another site is refused
		// before the token is even looked at.
		if o := r.Header.Get("Origin"); o != "" && o != "null" {
			u, err := url.Parse(o)
			if err != nil || u.Host != r.Host {
				h.fail(w, r, http.StatusForbidden, "cross-site request refused")
				return
			}
		}
	}
	h.mux.ServeHTTP(w, r)
}

// csrfFor derives the synchronizer token of a cookie value: only someone
// who can read the cookie (the page's own origin) can know it.
func csrfFor(cookie string) string {
	m := hmac.New(sha256.New, []byte(cookie))
	m.Write([]byte("agentvault dashboard csrf v1"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func checkCSRF(r *http.Request, cookie string) bool {
	got := r.PostFormValue("csrf")
	return cookie != "" && got != "" && hmac.Equal([]byte(got), []byte(csrfFor(cookie)))
}

type ctxKey struct{}

type session struct {
	email string
	token string
	sub   authz.Subject // who the account is to authz: role, delegated areas
}

func (h *Handler) setCookie(w http.ResponseWriter, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge, Secure: true, HttpOnly: true, SameSite: http.SameSiteStrictMode})
}

// authed admits signed-in requests and checks the CSRF token of every POST.
func (h *Handler) authed(pattern string, rule authz.Rule, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie(sessionCookie)
		if err != nil {
			http.Redirect(w, r, "/signin", http.StatusSeeOther)
			return
		}
		d, err := h.svc.DashSession(r.Context(), c.Value)
		if err != nil {
			if agentvault.ErrorCode(err) == agentvault.CodeUnauthorized {
				h.setCookie(w, sessionCookie, "", -1)
				http.Redirect(w, r, "/signin", http.StatusSeeOther)
				return
			}
			h.internal(w, r, err)
			return
		}
		if r.Method == http.MethodPost && !checkCSRF(r, c.Value) {
			h.fail(w, r, http.StatusForbidden, "the form has expired or did not come from this dashboard; reload the page and try again")
			return
		}
		sub, err := h.subjectOf(r.Context(), d.Email)
		if err != nil {
			h.internal(w, r, err)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, session{email: d.Email, token: c.Value, sub: sub}))
		if err := rule.Allows(sub); err != nil {
			h.log.Info("dashboard action refused", "route", pattern, "role", string(sub.Role))
			h.refuse(w, r, pattern, err)
			return
		}
		next(w, r)
	}
}

func sess(r *http.Request) session { s, _ := r.Context().Value(ctxKey{}).(session); return s }

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func (h *Handler) signInPage(w http.ResponseWriter, r *http.Request) {
	pre := ""
	if c, err := r.Cookie(preCookie); err == nil && len(c.Value) >= 32 && len(c.Value) <= 64 {
		pre = c.Value
	} else {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		pre = base64.RawURLEncoding.EncodeToString(b)
		h.setCookie(w, preCookie, pre, 3600)
	}
	hasOwner, err := h.svc.HasOwner(r.Context())
	if err != nil {
		h.internal(w, r, err)
		return
	}
	h.render(w, r, http.StatusOK, "signin", &page{Title: "Sign in", CSRF: csrfFor(pre), Data: map[string]any{"HasOwner": hasOwner, "Email": r.URL.Query().Get("email")}})
}

func (h *Handler) signIn(w http.ResponseWriter, r *http.Request) {
	c, err := r.Cookie(preCookie)
	if err != nil || !checkCSRF(r, c.Value) {
		h.fail(w, r, http.StatusForbidden, "the sign-in form has expired; reload the page and try again")
		return
	}
	email := strings.ToLower(strings.TrimSpace(r.PostFormValue("email")))
	addr := clientIP(r)
	if wait := h.guard.wait(addr, email); wait > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
		h.signInFailed()
		h.fail(w, r, http.StatusTooManyRequests, "too many failed sign-in attempts from this address; wait "+wait.Round(time.Second).String()+" and try again")
		return
	}
	if _, err := h.svc.CheckOwnerPassword(r.Context(), email, r.PostFormValue("password")); err != nil {
		if agentvault.ErrorCode(err) != agentvault.CodeUnauthorized {
			h.internal(w, r, err)
			return
		}
		h.guard.failed(addr, email)
		h.log.Info("dashboard sign-in refused", "client", addr)
		h.signInFailed()
		h.render(w, r, http.StatusUnauthorized, "signin", &page{Title: "Sign in", CSRF: csrfFor(c.Value), Error: "Wrong email or password.",
			Data: map[string]any{"HasOwner": true, "Email": email}})
		return
	}
	h.guard.succeeded(addr, email)
	token, d, err := h.svc.NewDashSession(r.Context(), email)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	h.log.Info("dashboard sign-in", "client", clientIP(r))
	h.setCookie(w, sessionCookie, token, int(d.Expires.Sub(d.Created).Seconds()))
	h.setCookie(w, preCookie, "", -1)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (h *Handler) signOut(w http.ResponseWriter, r *http.Request) {
	if err := h.svc.EndDashSession(r.Context(), sess(r).token); err != nil {
		h.internal(w, r, err)
		return
	}
	h.setCookie(w, sessionCookie, "", -1)
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}

// ---- approvals ----

func (h *Handler) approvalsPage(w http.ResponseWriter, r *http.Request) {
	recent, err := h.svc.Approvals(r.Context(), owner.ApprovalFilter{Limit: 30})
	if err != nil {
		h.internal(w, r, err)
		return
	}
	var decided []owner.Approval
	for _, a := range recent {
		if a.Done() {
			decided = append(decided, a)
		}
	}
	// The item each approval names (card: label, last 4, expiry; login:
	// its site), by id; an item since deleted shows its id.
	list, err := h.vault.List(r.Context(), h.svc.Org())
	if err != nil {
		h.internal(w, r, err)
		return
	}
	items := make(map[string]approvalItem, len(list))
	for _, it := range list {
		items[it.ID] = approvalItem{Kind: it.Kind, Name: approvalItemName(it)}
	}
	var handoffs []handoff.View
	if h.handoffs != nil {
		handoffs = h.handoffs.OpenHandoffs()
	}
	w.Header().Set("Content-Security-Policy", approvalsCSP)
	h.page(w, r, "approvals", "Approvals", map[string]any{"Decided": decided, "Items": items, "LiveCVV": h.liveCVV != nil,
		"Handoffs": handoffs, "Notify": h.notifyPrefs()})
}

func (h *Handler) decide(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var approve bool
	switch r.PostFormValue("decision") {
	case "approve":
		approve = true
	case "deny":
	default:
		h.fail(w, r, http.StatusBadRequest, "choose approve or deny")
		return
	}
	if approve {
		// A live CVV is typed by the owner, not approved blind.
		if cur, err := h.svc.Approval(r.Context(), id); err == nil && cur.Kind == owner.KindCVVEntry {
			if msg := h.handOverCVV(r, cur); msg != "" {
				h.redirect(w, r, "/", "", msg)
				return
			}
		}
	}
	a, err := h.svc.Decide(r.Context(), id, approve, "owner:"+sess(r).email)
	if err != nil {
		switch agentvault.ErrorCode(err) {
		case agentvault.CodeConflict, agentvault.CodeApprovalExpired, agentvault.CodeNotFound:
			h.redirect(w, r, "/", "", agentvault.ErrorMessage(err))
			return
		}
		h.internal(w, r, err)
		return
	}
	h.redirect(w, r, "/", "Request "+a.ID+" "+string(a.Status)+".", "")
}

// handOverCVV gives the typed security code to the LiveCVV hook; it
// returns a message for the owner when that cannot happen.
func (h *Handler) handOverCVV(r *http.Request, a owner.Approval) string {
	if h.liveCVV == nil || a.Status != owner.StatusPending {
		return "a security code request cannot be approved without the code"
	}
	raw := []byte(r.PostFormValue("cvv"))
	defer func() {
		for i := range raw {
			raw[i] = 0
		}
	}()
	if len(raw) < 3 || len(raw) > 4 || strings.Trim(string(raw), "0123456789") != "" {
		return "the security code is 3 or 4 digits"
	}
	cvv := vault.NewSecret(raw)
	if err := h.liveCVV(r.Context(), a, cvv); err != nil {
		cvv.Wipe()
		h.log.Warn("live CVV hand-over failed", "approval", a.ID, "code", string(agentvault.ErrorCode(err)))
		return "the security code could not be handed to the waiting fill: " + agentvault.ErrorMessage(err)
	}
	return ""
}

// ---- cards ----

type cardRow struct {
	Item    vault.Item
	Policy  owner.CardPolicy
	Today   policy.Amount
	Month   policy.Amount
	Blocked string
}

func (h *Handler) cardsPage(w http.ResponseWriter, r *http.Request) {
	items, err := h.vault.List(r.Context(), h.svc.Org())
	if err != nil {
		h.internal(w, r, err)
		return
	}
	now := h.now()
	var rows []cardRow
	for _, it := range items {
		if it.Kind != vault.KindCard || it.Card == nil {
			continue
		}
		p, err := h.svc.CardPolicy(r.Context(), it.ID)
		if err != nil {
			h.internal(w, r, err)
			return
		}
		row := cardRow{Item: it, Policy: p, Blocked: strings.Join(p.Rules.BlockedMerchants, "\n")}
		if p.Currency != "" {
			row.Today, row.Month, err = h.svc.Ledger().Spent(r.Context(), it.ID, h.svc.Day(now), h.svc.Month(now), p.Currency)
			if err != nil {
				h.internal(w, r, err)
				return
			}
		}
		rows = append(rows, row)
	}
	h.page(w, r, "cards", "Cards", rows)
}

func (h *Handler) saveCard(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	items, err := h.vault.List(r.Context(), h.svc.Org())
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if !slices.ContainsFunc(items, func(it vault.Item) bool { return it.ID == id && it.Kind == vault.KindCard }) {
		h.fail(w, r, http.StatusNotFound, "no such card")
		return
	}
	cur := strings.ToUpper(strings.TrimSpace(r.PostFormValue("currency")))
	amount := func(name string) (*policy.Amount, error) {
		v := strings.TrimSpace(r.PostFormValue(name))
		if v == "" {
			return nil, nil
		}
		if cur == "" {
			return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "set the card's currency to use limits")
		}
		a, err := policy.ParseDecimal(v, cur)
		if err != nil {
			return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "limits are plain decimals such as 120.50")
		}
		return &a, nil
	}
	var rules policy.CardPolicy
	var errs []error
	for name, dst := range map[string]**policy.Amount{"per_purchase": &rules.PerPurchaseCap, "daily": &rules.DailyCap,
		"monthly": &rules.MonthlyCap, "threshold": &rules.ApprovalThreshold} {
		a, err := amount(name)
		errs = append(errs, err)
		*dst = a
	}
	if err := errors.Join(errs...); err != nil {
		h.redirect(w, r, "/cards", "", agentvault.ErrorMessage(firstErr(errs)))
		return
	}
	on := func(name string) bool { return r.PostFormValue(name) == "on" }
	rules.Paused, rules.EveryPurchase, rules.LiveCVV, rules.StrictAmount = on("paused"), on("every_purchase"), on("live_cvv"), on("strict_amount")
	rules.BlockedMerchants = strings.FieldsFunc(r.PostFormValue("blocked"), func(c rune) bool { return c == '\n' || c == '\r' || c == ',' || c == ' ' })
	if err := h.svc.SetCardPolicy(r.Context(), owner.CardPolicy{CardID: id, Currency: cur, Rules: rules}, "owner:"+sess(r).email); err != nil {
		if agentvault.ErrorCode(err) == agentvault.CodeInvalidInput {
			h.redirect(w, r, "/cards", "", agentvault.ErrorMessage(err))
			return
		}
		h.internal(w, r, err)
		return
	}
	h.redirect(w, r, "/cards", "Card rules saved.", "")
}

func firstErr(errs []error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// ---- logins ----

func (h *Handler) loginsPage(w http.ResponseWriter, r *http.Request) {
	showPage(h, w, r, "logins", "Logins", h.logins)
}

// logins is the vault's logins.
func (h *Handler) logins(ctx context.Context) ([]vault.Item, error) {
	items, err := h.vault.List(ctx, h.svc.Org())
	var logins []vault.Item
	for _, it := range items {
		if it.Kind == vault.KindLogin && it.Login != nil {
			logins = append(logins, it)
		}
	}
	return logins, err
}

// ---- API keys ----

type keysData struct {
	Keys   []owner.APIKey
	Cards  []vault.Item
	Logins []vault.Item
	NewKey string // shown once, right after creation
	NewID  string
}

func (h *Handler) keysData(ctx context.Context) (keysData, error) {
	keys, err := h.svc.APIKeys(ctx)
	if err != nil {
		return keysData{}, err
	}
	items, err := h.vault.List(ctx, h.svc.Org())
	if err != nil {
		return keysData{}, err
	}
	d := keysData{Keys: keys}
	for _, it := range items {
		switch it.Kind {
		case vault.KindCard:
			d.Cards = append(d.Cards, it)
		case vault.KindLogin:
			d.Logins = append(d.Logins, it)
		}
	}
	return d, nil
}

func (h *Handler) keysPage(w http.ResponseWriter, r *http.Request) {
	showPage(h, w, r, "keys", "API keys", h.keysData)
}

func scopeFromForm(r *http.Request) owner.Scope {
	_ = r.ParseForm()
	return owner.Scope{
		AllCards: r.PostForm.Get("all_cards") == "on", CardIDs: r.PostForm["card"],
		AllLogins: r.PostForm.Get("all_logins") == "on", LoginIDs: r.PostForm["login"],
		CanCreateLogins: r.PostForm.Get("create_logins") == "on",
	}
}

func (h *Handler) createKey(w http.ResponseWriter, r *http.Request) {
	k, secret, err := h.svc.CreateAPIKey(r.Context(), r.PostFormValue("name"), scopeFromForm(r))
	if err != nil {
		if agentvault.ErrorCode(err) == agentvault.CodeInvalidInput {
			h.redirect(w, r, "/keys", "", agentvault.ErrorMessage(err))
			return
		}
		h.internal(w, r, err)
		return
	}
	h.log.Info("API key created", "key", k.ID)
	d, err := h.keysData(r.Context())
	if err != nil {
		h.internal(w, r, err)
		return
	}
	// Rendered in the POST's own answer (no redirect, no-store): the only
	// time the secret leaves the appliance.
	d.NewKey, d.NewID = secret, k.ID
	h.page(w, r, "keys", "API keys", d)
}

func (h *Handler) setScope(w http.ResponseWriter, r *http.Request) {
	if err := h.svc.SetScope(r.Context(), r.PathValue("id"), scopeFromForm(r)); err != nil {
		h.keyErr(w, r, err)
		return
	}
	h.redirect(w, r, "/keys", "Scope saved.", "")
}

func (h *Handler) revokeKey(w http.ResponseWriter, r *http.Request) {
	if err := h.svc.Revoke(r.Context(), r.PathValue("id")); err != nil {
		h.keyErr(w, r, err)
		return
	}
	h.log.Info("API key revoked", "key", r.PathValue("id"))
	h.redirect(w, r, "/keys", "Key revoked.", "")
}

func (h *Handler) keyErr(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, vault.ErrNotFound) {
		h.fail(w, r, http.StatusNotFound, "no such key")
		return
	}
	h.internal(w, r, err)
}

// ---- sites and signups ----

func (h *Handler) sitesPage(w http.ResponseWriter, r *http.Request) {
	showPage(h, w, r, "sites", "Authorized sites", h.svc.Sites)
}

func (h *Handler) addSite(w http.ResponseWriter, r *http.Request) {
	if err := h.svc.AuthorizeSite(r.Context(), r.PostFormValue("host"), "owner:"+sess(r).email); err != nil {
		h.formErr(w, r, "/sites", err)
		return
	}
	h.redirect(w, r, "/sites", "Site authorized.", "")
}

func (h *Handler) removeSite(w http.ResponseWriter, r *http.Request) {
	if err := h.svc.RemoveSite(r.Context(), r.PostFormValue("host")); err != nil {
		h.formErr(w, r, "/sites", err)
		return
	}
	h.redirect(w, r, "/sites", "Site removed.", "")
}

func (h *Handler) signupsPage(w http.ResponseWriter, r *http.Request) {
	showPage(h, w, r, "signups", "Pre-approved signups", h.svc.Signups)
}

func (h *Handler) addSignup(w http.ResponseWriter, r *http.Request) {
	if err := h.svc.AddSignup(r.Context(), r.PostFormValue("site"), r.PostFormValue("email"), "owner:"+sess(r).email); err != nil {
		h.formErr(w, r, "/signups", err)
		return
	}
	h.redirect(w, r, "/signups", "Signup pre-approved.", "")
}

func (h *Handler) removeSignup(w http.ResponseWriter, r *http.Request) {
	if err := h.svc.RemoveSignup(r.Context(), r.PostFormValue("site"), r.PostFormValue("email")); err != nil {
		h.formErr(w, r, "/signups", err)
		return
	}
	h.redirect(w, r, "/signups", "Pre-approval removed.", "")
}

func (h *Handler) formErr(w http.ResponseWriter, r *http.Request, back string, err error) {
	switch {
	case agentvault.ErrorCode(err) == agentvault.CodeInvalidInput, errors.Is(err, vault.ErrNotFound):
		h.redirect(w, r, back, "", agentvault.ErrorMessage(err))
	default:
		h.internal(w, r, err)
	}
}

// ---- activity ----

type activityRow struct {
	Rec     vault.AuditRecord
	Item    string // display name of the item
	KeyName string
}

// Audit purposes as broker writes them (broker.PurposeSubstitute and
// PurposeAuthorize; the dashboard does not import broker): only a
// substitution put a value on the wire to a site. An authorization checks
// the value and hands the agent a stand-in: the value stays here.
const (
	purposeSubstitute = "substitute"
	purposeAuthorize  = "authorize"
)

type activityData struct {
	Rows         []activityRow
	Approvals    []owner.Approval
	Kinds        map[string]int // values sent to sites, by kind
	Releases     int            // values sent to sites (purpose substitute)
	Authorized   int            // authorizations: the value never left the machine
	Unanswered   int            // denied and expired approvals shown
	Refusals     []refusalRow
	RefusalCodes map[string]int
	// Diagnostics are the sign-ins browser_login kept a masked capture
	// of (seed 000), newest first.
	Diagnostics []diagnosticRow
	// Receipts are the checkout confirmations mcpd kept a masked receipt
	// image of (seed 004), newest first.
	Receipts []receiptRow
	Totals   []cardTotal
	Days     int
}

type refusalRow struct {
	owner.Refusal
	Item    string
	KeyName string
}

type diagnosticRow struct {
	owner.LoginDiagnostic
	KeyName string
}

type receiptRow struct {
	owner.Receipt
	KeyName string
}

type cardTotal struct {
	Name  string
	Month policy.Amount
}

func (h *Handler) activityPage(w http.ResponseWriter, r *http.Request) {
	const days = 30
	ctx := r.Context()
	recs, err := h.vault.Audit(ctx, vault.AuditFilter{Org: h.svc.Org(), Since: h.now().Add(-days * 24 * time.Hour)})
	if err != nil {
		h.internal(w, r, err)
		return
	}
	items, err := h.itemsByID(ctx)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	_, names, err := h.keyNames(ctx)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	d := activityData{Kinds: map[string]int{}, Days: days}
	for i := len(recs) - 1; i >= 0 && len(d.Rows) < 200; i-- {
		rec := recs[i]
		rec.ValueHMAC = nil // not for display
		d.Rows = append(d.Rows, activityRow{Rec: rec, Item: items[rec.ItemID], KeyName: names[rec.Actor]})
	}
	for _, rec := range recs {
		if rec.Action != vault.AuditRelease {
			continue
		}
		switch rec.Purpose {
		case purposeSubstitute:
			d.Releases++
			d.Kinds[string(rec.Kind)]++
		case purposeAuthorize:
			d.Authorized++
		}
	}
	if d.Approvals, err = h.svc.Approvals(ctx, owner.ApprovalFilter{Limit: 100}); err != nil {
		h.internal(w, r, err)
		return
	}
	for _, a := range d.Approvals {
		if a.Status == owner.StatusDenied || a.Status == owner.StatusExpired {
			d.Unanswered++
		}
	}
	refusals, err := h.svc.Refusals(ctx, h.now().Add(-days*24*time.Hour), 0)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	d.RefusalCodes = map[string]int{}
	for i, rf := range refusals {
		d.RefusalCodes[rf.Code]++
		if i < 100 {
			d.Refusals = append(d.Refusals, refusalRow{Refusal: rf, Item: items[rf.ItemID], KeyName: names[rf.APIKeyID]})
		}
	}
	for _, dg := range h.svc.LoginDiagnostics() {
		d.Diagnostics = append(d.Diagnostics, diagnosticRow{LoginDiagnostic: dg, KeyName: names[dg.APIKeyID]})
	}
	for _, rc := range h.svc.Receipts() {
		d.Receipts = append(d.Receipts, receiptRow{Receipt: rc, KeyName: names[rc.APIKeyID]})
	}
	policies, err := h.svc.CardPolicies(ctx)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	now := h.now()
	for _, p := range policies {
		if p.Currency == "" {
			continue
		}
		_, month, err := h.svc.Ledger().Spent(ctx, p.CardID, h.svc.Day(now), h.svc.Month(now), p.Currency)
		if err != nil {
			h.internal(w, r, err)
			return
		}
		d.Totals = append(d.Totals, cardTotal{Name: cmp.Or(items[p.CardID], p.CardID), Month: month})
	}
	h.page(w, r, "activity", "Activity", d)
}

// keyNames lists the API keys and names them for display, by id.
func (h *Handler) keyNames(ctx context.Context) ([]owner.APIKey, map[string]string, error) {
	keys, err := h.svc.APIKeys(ctx)
	if err != nil {
		return nil, nil, err
	}
	names := make(map[string]string, len(keys))
	for _, k := range keys {
		names[k.ID] = k.Name
	}
	return keys, names, nil
}

// itemsByID names items for display ("Visa •••• 4242", "github login").
func (h *Handler) itemsByID(ctx context.Context) (map[string]string, error) {
	items, err := h.vault.List(ctx, h.svc.Org())
	if err != nil {
		return nil, err
	}
	m := make(map[string]string, len(items))
	for _, it := range items {
		m[it.ID] = itemName(it)
	}
	return m, nil
}

// ---- responses ----

// redirect answers a POST with 303 to a page, carrying its one-line
// outcome in a short-lived cookie (not the URL: a link someone sends the
// owner cannot put words on the dashboard).
func (h *Handler) redirect(w http.ResponseWriter, r *http.Request, to, flash, errMsg string) {
	q := url.Values{}
	if flash != "" {
		q.Set("ok", trimMsg(flash))
	}
	if errMsg != "" {
		q.Set("err", trimMsg(errMsg))
	}
	if len(q) > 0 {
		h.setCookie(w, flashCookie, base64.RawURLEncoding.EncodeToString([]byte(q.Encode())), 60)
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// takeFlash reads and clears the outcome of the previous POST.
func (h *Handler) takeFlash(w http.ResponseWriter, r *http.Request) (ok, errMsg string) {
	c, err := r.Cookie(flashCookie)
	if err != nil {
		return "", ""
	}
	h.setCookie(w, flashCookie, "", -1)
	b, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		return "", ""
	}
	q, err := url.ParseQuery(string(b))
	if err != nil {
		return "", ""
	}
	return trimMsg(q.Get("ok")), trimMsg(q.Get("err"))
}

func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	h.render(w, r, status, "error", &page{Title: http.StatusText(status), Error: msg})
}

// internal logs the code and public message only (the cause may hold SQL
// text) and shows a generic page.
func (h *Handler) internal(w http.ResponseWriter, r *http.Request, err error) {
	h.log.Error("dashboard request failed", "path", r.URL.Path, "code", string(agentvault.ErrorCode(err)), "err", agentvault.ErrorMessage(err))
	h.fail(w, r, http.StatusInternalServerError, "something went wrong; the details are in proxyd's log")
}

// page renders a signed-in page with the banner of pending approvals.
// showPage renders page name with what read answers (an internal error
// when it fails): the pages that show one read of the owner's state.
func showPage[T any](h *Handler, w http.ResponseWriter, r *http.Request, name, title string, read func(context.Context) (T, error)) {
	data, err := read(r.Context())
	if err != nil {
		h.internal(w, r, err)
		return
	}
	h.page(w, r, name, title, data)
}

func (h *Handler) page(w http.ResponseWriter, r *http.Request, name, title string, data any) {
	h.pageStatus(w, r, http.StatusOK, name, title, data)
}

func (h *Handler) pageStatus(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) {
	s := sess(r)
	var pending []owner.Approval
	if authz.CanSee(s.sub, authz.Dashboard, "GET /{$}") {
		var err error
		if pending, err = h.svc.Pending(r.Context()); err != nil {
			h.internal(w, r, err)
			return
		}
	}
	flash, errMsg := h.takeFlash(w, r)
	h.render(w, r, status, name, &page{
		Title: title, Nav: navOf(name, r.URL.Path), CSRF: csrfFor(s.token), Email: s.email, Sub: s.sub, Pending: pending,
		Flash: flash, Error: errMsg, Data: data, Now: h.now(),
	})
}

// navOf is the menu entry a page belongs to: the add forms and the
// removal confirmations belong to their list.
func navOf(name, path string) string {
	switch name {
	case "cardnew", "loginnew", "confirm":
		first, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
		return first
	case "signingrotate":
		return "signing"
	}
	return name
}

func trimMsg(s string) string {
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
