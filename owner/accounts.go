package owner

import (
	"context"
	"errors"
	"net/mail"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/hostname"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/vault"
)

// Accounts an agent opens on sites (seed 004, "Open an account"):
// create_login files a signup request that the owner approves (or that a
// pre-approved signup completes at once), the vault generates and seals the
// password when the login is made, and the agent only ever gets the login's
// tokens. set_login_username and rotate_login_password change a login the
// same key opened, within a window. Every rule of the seed's section is
// here, once; proxyd's control service calls these methods.

// Limits of the seed (Limits, "ceilings"); zero values in AccountsConfig
// take these.
const (
	DefaultMaxPendingSignups     = 5
	DefaultPreApprovedPerSite    = 2
	DefaultPreApprovedPerDay     = 60
	DefaultMaxLogins             = 500
	DefaultWritesPerMinute       = 20
	DefaultLoginChangesPerDay    = 25
	DefaultLoginChangeWindow     = 7 * 24 * time.Hour
	DefaultSignupRequestLifetime = 24 * time.Hour
)

// SignupStatus is where a signup request is, as the agent sees it.
type SignupStatus string

const (
	SignupPending  SignupStatus = "pending"
	SignupApproved SignupStatus = "approved"
	SignupDenied   SignupStatus = "denied"
	SignupExpired  SignupStatus = "expired"
)

// SignupRequest is one create_login call, durable. It holds no secret: the
// password is generated when the login is made, straight into the vault.
type SignupRequest struct {
	ID          string // "sr_" + 16 hex
	Org         string
	APIKeyID    string
	Site        string // registrable domain
	Email       string
	Username    string
	Rules       vault.PasswordRules
	ApprovalID  string // the owner's signup approval; "" when pre-approved
	PreApproved bool
	LoginID     string // the login made for it, once approved
	Created     time.Time
	Expires     time.Time
}

// LoginChange is one counted change to a login an agent made (username
// set, password rotated, TOTP enrolled), for the daily ceiling.
type LoginChange struct {
	Org      string
	APIKeyID string
	LoginID  string
	Change   string
	At       time.Time
}

// SignupRequestStore keeps signup requests and counted login changes
// (store/sqlite and store/postgres implement it beside owner.Store;
// contract ownertest.RunSignupRequests).
type SignupRequestStore interface {
	CreateSignupRequest(ctx context.Context, r SignupRequest) error
	GetSignupRequest(ctx context.Context, id string) (SignupRequest, error)
	// ListSignupRequests returns the org's requests created at or after
	// since, oldest first.
	ListSignupRequests(ctx context.Context, org string, since time.Time) ([]SignupRequest, error)
	// SetSignupLogin records the login made for a request, once: when one
	// is already recorded it returns the request as stored with
	// CodeConflict.
	SetSignupLogin(ctx context.Context, id, loginID string) (SignupRequest, error)
	AppendLoginChange(ctx context.Context, c LoginChange) error
	// ListLoginChanges returns the org's changes at or after since.
	ListLoginChanges(ctx context.Context, org string, since time.Time) ([]LoginChange, error)
}

// LoginVault is what Accounts needs of the vault.
type LoginVault interface {
	AddLogin(ctx context.Context, org, owner string, in vault.LoginInput) (vault.Item, error)
	UpdateLogin(ctx context.Context, org, id string, u vault.LoginUpdate) (vault.Item, error)
	Get(ctx context.Context, org, id string) (vault.Item, error)
	GetByLabel(ctx context.Context, org string, kind vault.Kind, label string) (vault.Item, error)
	List(ctx context.Context, org string) ([]vault.Item, error)
	Remove(ctx context.Context, org, id string) error
	FreeLoginLabel(ctx context.Context, org, domain string) (string, error)
	// A TOTP seed waiting for the owner's approval is a sealed blob
	// (totp_replace.go).
	SealBlob(ctx context.Context, name string, data []byte) error
	OpenBlob(ctx context.Context, name string) ([]byte, error)
	RemoveBlob(ctx context.Context, name string) error
}

// AccountsConfig wires Accounts. Zero limits take the defaults above.
type AccountsConfig struct {
	Service *Service
	Store   SignupRequestStore
	Vault   LoginVault
	// Owner is the vault item owner of the logins made ("owner" when
	// empty).
	Owner string
	// Authenticate reads an agent's API key; nil is
	// Service.AuthenticateKey (proxyd also accepts its api-key file's key).
	Authenticate func(ctx context.Context, apiKey string) (APIKey, error)

	MaxPendingSignups, PreApprovedPerSite, PreApprovedPerDay, MaxLogins int
	WritesPerMinute, LoginChangesPerDay                                 int
	// LoginChangeWindow is how long after its creation the key that made
	// a login may set its username or rotate its password.
	LoginChangeWindow time.Duration
	// RequestLifetime bounds a signup request's approval (at most the
	// service's approval lifetime).
	RequestLifetime time.Duration
}

// Accounts is the signup and login-write logic.
type Accounts struct {
	cfg     AccountsConfig
	svc     *Service
	limiter *policy.RateLimiter
	// mu makes one login per approved request in this process; the
	// store's SetSignupLogin makes it one across processes.
	mu sync.Mutex
	// totpMu orders TOTP writes (totp_replace.go): an add and a staging
	// of one login, and the settling of a staged seed. staged lists the
	// replacement approvals whose seed this process staged or found
	// staged, until settled; scanned reports whether the recent approvals
	// were read for staged seeds since the process started.
	totpMu  sync.Mutex
	staged  map[string]bool
	scanned bool
}

// NewAccounts returns the account logic over cfg.
func NewAccounts(cfg AccountsConfig) (*Accounts, error) {
	if cfg.Service == nil || cfg.Store == nil || cfg.Vault == nil {
		return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "accounts need the owner service, a store and the vault")
	}
	def := func(p *int, d int) {
		if *p <= 0 {
			*p = d
		}
	}
	def(&cfg.MaxPendingSignups, DefaultMaxPendingSignups)
	def(&cfg.PreApprovedPerSite, DefaultPreApprovedPerSite)
	def(&cfg.PreApprovedPerDay, DefaultPreApprovedPerDay)
	def(&cfg.MaxLogins, DefaultMaxLogins)
	def(&cfg.WritesPerMinute, DefaultWritesPerMinute)
	def(&cfg.LoginChangesPerDay, DefaultLoginChangesPerDay)
	if cfg.LoginChangeWindow <= 0 {
		cfg.LoginChangeWindow = DefaultLoginChangeWindow
	}
	if cfg.RequestLifetime <= 0 {
		cfg.RequestLifetime = DefaultSignupRequestLifetime
	}
	if cfg.Owner == "" {
		cfg.Owner = "owner"
	}
	if cfg.Authenticate == nil {
		cfg.Authenticate = cfg.Service.AuthenticateKey
	}
	a := &Accounts{cfg: cfg, svc: cfg.Service, staged: map[string]bool{}}
	a.limiter = policy.NewRateLimiter(cfg.WritesPerMinute, time.Minute/time.Duration(cfg.WritesPerMinute), cfg.Service.now)
	cfg.Service.staged.Store(a)
	return a, nil
}

// CreateLoginArgs is create_login's input.
type CreateLoginArgs struct {
	Website  string
	Email    string
	Username string
	Rules    vault.PasswordRules
}

// SignupAnswer is a request as the agent reads it: its status, and once
// approved the login (metadata only), the generated policy and whether the
// owner has since replaced the password.
type SignupAnswer struct {
	Request      SignupRequest
	Status       SignupStatus
	Login        *vault.Item
	Policy       *vault.PasswordPolicy
	OwnerManaged bool
}

// writer authenticates a key for a credential write: it must be allowed
// to create logins, and within the per-minute write budget.
func (a *Accounts) writer(ctx context.Context, apiKey string) (APIKey, error) {
	k, err := a.cfg.Authenticate(ctx, apiKey)
	if err != nil {
		return APIKey{}, err
	}
	if err := k.Info().CheckCreateLogins(); err != nil {
		return APIKey{}, err
	}
	if ok, retry := a.limiter.Take(k.ID); !ok {
		return APIKey{}, &policy.RateLimitError{Err: agentvault.Errorf(agentvault.CodeRateLimited,
			"over %d credential writes this minute for this key: wait, then call again", a.cfg.WritesPerMinute), RetryAfter: retry}
	}
	return k, nil
}

// SignupSite reads create_login's website: a host name (a URL gives its
// host) reduced to its registrable domain by package hostname. An IP
// address, a bare public suffix ("com", "co.uk") or anything unparsable is
// invalid_website.
func SignupSite(website string) (string, error) {
	h, err := hostname.Host(strings.TrimSpace(website))
	if err != nil || hostname.IsIP(h) {
		return "", agentvault.Errorf(agentvault.CodeInvalidWebsite, "website must be the site's registrable domain, such as example.com")
	}
	d, err := hostname.Registrable(h)
	if err != nil || d == "" {
		return "", agentvault.Errorf(agentvault.CodeInvalidWebsite, "website is a public suffix, not a site: pass the site's registrable domain, such as example.com")
	}
	return d, nil
}

// SignupEmail checks create_login's email: one plain address, no display
// name, a dotted domain, at most 254 characters.
func SignupEmail(email string) (string, error) {
	e := strings.TrimSpace(email)
	bad := agentvault.Errorf(agentvault.CodeInvalidEmail, "email must be one plain address the agent controls, such as inbox@example.com")
	if e == "" || len(e) > 254 || strings.ContainsAny(e, " \t\r\n<>\"(),;:") {
		return "", bad
	}
	addr, err := mail.ParseAddress(e)
	if err != nil || addr.Name != "" || addr.Address != e {
		return "", bad
	}
	at := strings.LastIndexByte(e, '@')
	if at < 1 || !strings.Contains(e[at+1:], ".") || strings.HasSuffix(e, ".") {
		return "", bad
	}
	return e, nil
}

// SignupUsername checks a handle: one line, 1 to 200 characters, no
// control characters.
func SignupUsername(u string) error {
	if u == "" || len(u) > 200 || strings.ContainsFunc(u, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return agentvault.Errorf(agentvault.CodeInvalidUsername, "username must be one line of 1 to 200 characters")
	}
	return nil
}

// CreateLogin files a signup request. It is approved at once when the
// owner pre-approved this site and this exact email and the pre-approval
// ceilings allow; otherwise it waits for the owner.
func (a *Accounts) CreateLogin(ctx context.Context, apiKey string, in CreateLoginArgs) (SignupRequest, error) {
	k, err := a.writer(ctx, apiKey)
	if err != nil {
		return SignupRequest{}, err
	}
	site, err := SignupSite(in.Website)
	if err != nil {
		return SignupRequest{}, err
	}
	email, err := SignupEmail(in.Email)
	if err != nil {
		return SignupRequest{}, err
	}
	if in.Username != "" {
		if err := SignupUsername(in.Username); err != nil {
			return SignupRequest{}, err
		}
	}
	if _, err := in.Rules.Policy(); err != nil {
		return SignupRequest{}, err
	}
	org := a.svc.org
	items, err := a.cfg.Vault.List(ctx, org)
	if err != nil {
		return SignupRequest{}, err
	}
	logins := 0
	for _, it := range items {
		if it.Kind == vault.KindLogin {
			logins++
		}
	}
	if logins >= a.cfg.MaxLogins {
		return SignupRequest{}, agentvault.Errorf(agentvault.CodeLoginLimit, "this account already holds %d logins", a.cfg.MaxLogins)
	}
	now := a.svc.now().UTC()
	recent, err := a.cfg.Store.ListSignupRequests(ctx, org, now.Add(-a.cfg.RequestLifetime))
	if err != nil {
		return SignupRequest{}, err
	}
	pending := 0
	for _, r := range recent {
		if r.PreApproved || !now.Before(r.Expires) {
			continue
		}
		if ap, err := a.svc.Approval(ctx, r.ApprovalID); err == nil && ap.Status == StatusPending {
			pending++
		}
	}
	if pending >= a.cfg.MaxPendingSignups {
		return SignupRequest{}, agentvault.Errorf(agentvault.CodeTooManyPending,
			"this account has %d signup requests waiting for the owner: wait for them before opening another", pending)
	}
	r := SignupRequest{ID: "sr_" + randomHex(8), Org: org, APIKeyID: k.ID, Site: site, Email: email, Username: in.Username,
		Rules: in.Rules, Created: now, Expires: now.Add(a.cfg.RequestLifetime)}
	if ok, err := a.preApproved(ctx, site, email, now); err != nil {
		return SignupRequest{}, err
	} else if ok {
		r.PreApproved = true
		if err := a.cfg.Store.CreateSignupRequest(ctx, r); err != nil {
			return SignupRequest{}, err
		}
		got, err := a.materialize(ctx, r)
		if err != nil {
			// The request landed; the login may have too.
			return r, agentvault.Wrap(agentvault.CodeWriteOutcomeUnknown, err,
				"the pre-approved signup was recorded but its login could not be confirmed: read the request with get_signup_request; do not call create_login again")
		}
		a.svc.log.Info("pre-approved signup used", "request", r.ID, "site", site)
		a.svc.notify(EventApprovalDecided, Approval{ID: r.ID, Org: org, Kind: KindSignup, Reason: "pre_approved", Site: site,
			APIKeyID: k.ID, Created: now, Expires: r.Expires, Status: StatusApproved, DecidedBy: "pre-approved", DecidedAt: now})
		return got, nil
	}
	ap, err := a.svc.RequestApproval(ctx, ApprovalRequest{Kind: KindSignup, Reason: "signup", Site: site, APIKeyID: k.ID,
		Subject: r.ID, TTL: a.cfg.RequestLifetime})
	if err != nil {
		return SignupRequest{}, err
	}
	r.ApprovalID, r.Expires = ap.ID, ap.Expires
	if err := a.cfg.Store.CreateSignupRequest(ctx, r); err != nil {
		return SignupRequest{}, agentvault.Wrap(agentvault.CodeWriteOutcomeUnknown, err,
			"the signup request could not be confirmed: tell the owner and do not call create_login again blind")
	}
	return r, nil
}

// SignupLabel names a request's login in the run report
// (credentialWrites, "label:signup_requested"): the login's own label once
// it exists (a pre-approved signup), else the label the vault would give
// it now. The login is made only at approval, and the site's bare name
// may already belong to another login, which the report must not seem to
// name.
func (a *Accounts) SignupLabel(ctx context.Context, r SignupRequest) string {
	if r.LoginID != "" {
		if it, err := a.cfg.Vault.Get(ctx, r.Org, r.LoginID); err == nil {
			return it.Label
		}
	}
	if l, err := a.cfg.Vault.FreeLoginLabel(ctx, r.Org, r.Site); err == nil {
		return l
	}
	return vault.LoginLabel(r.Site)
}

// preApproved reports whether the owner listed this site and exact email,
// and the pre-approval ceilings (per site, per day) still allow one.
func (a *Accounts) preApproved(ctx context.Context, site, email string, now time.Time) (bool, error) {
	list, err := a.svc.Signups(ctx)
	if err != nil {
		return false, err
	}
	listed := slices.ContainsFunc(list, func(s Signup) bool {
		d, err := hostname.Registrable(s.Site)
		return err == nil && d == site && strings.EqualFold(s.Email, email)
	})
	if !listed {
		return false, nil
	}
	all, err := a.cfg.Store.ListSignupRequests(ctx, a.svc.org, time.Time{})
	if err != nil {
		return false, err
	}
	perSite, perDay := 0, 0
	for _, r := range all {
		if !r.PreApproved {
			continue
		}
		if r.Site == site {
			perSite++
		}
		if !r.Created.Before(now.Add(-24 * time.Hour)) {
			perDay++
		}
	}
	return perSite < a.cfg.PreApprovedPerSite && perDay < a.cfg.PreApprovedPerDay, nil
}

// materialize makes the login of an approved request, once: the vault
// generates the password and seals it; nobody reads it.
func (a *Accounts) materialize(ctx context.Context, r SignupRequest) (SignupRequest, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	cur, err := a.cfg.Store.GetSignupRequest(ctx, r.ID)
	if err != nil {
		return r, err
	}
	if cur.LoginID != "" {
		return cur, nil
	}
	pol, err := r.Rules.Policy()
	if err != nil {
		return r, err
	}
	pw, err := vault.GeneratePassword(pol)
	if err != nil {
		return r, err
	}
	defer pw.Wipe()
	it, err := a.cfg.Vault.AddLogin(ctx, r.Org, a.cfg.Owner, vault.LoginInput{Site: r.Site, Website: r.Site, Email: r.Email,
		Username: r.Username, Password: pw, Generated: &pol, CreatedBy: r.APIKeyID})
	if err != nil {
		return r, err
	}
	got, err := a.cfg.Store.SetSignupLogin(ctx, r.ID, it.ID)
	if agentvault.ErrorCode(err) == agentvault.CodeConflict {
		// Another process made it first: keep theirs.
		_ = a.cfg.Vault.Remove(ctx, r.Org, it.ID)
		return got, nil
	}
	if err != nil {
		return r, err
	}
	// A key scoped to a list of logins sees the login it opened.
	if k, err := a.svc.st.GetAPIKey(ctx, r.APIKeyID); err == nil && !k.Scope.Items().Sees(it) {
		sc := k.Scope
		sc.LoginIDs = append(slices.Clone(sc.LoginIDs), it.ID)
		if err := a.svc.st.SetAPIKeyScope(ctx, k.ID, sc); err != nil {
			return got, err
		}
	}
	return got, nil
}

// errRequestNotFound is every unknown, malformed or other key's request.
var errRequestNotFound = agentvault.Errorf(agentvault.CodeRequestNotFound, "no signup request of this key has this id")

// SignupRequest reads a request of apiKey's once, making its login when
// the owner has approved it.
func (a *Accounts) SignupRequest(ctx context.Context, apiKey, id string) (SignupAnswer, error) {
	k, err := a.cfg.Authenticate(ctx, apiKey)
	if err != nil {
		return SignupAnswer{}, err
	}
	return a.answer(ctx, k, id)
}

func (a *Accounts) answer(ctx context.Context, k APIKey, id string) (SignupAnswer, error) {
	if !strings.HasPrefix(id, "sr_") || len(id) > 64 {
		return SignupAnswer{}, errRequestNotFound
	}
	r, err := a.cfg.Store.GetSignupRequest(ctx, id)
	if errors.Is(err, vault.ErrNotFound) || (err == nil && (r.APIKeyID != k.ID || r.Org != a.svc.org)) {
		return SignupAnswer{}, errRequestNotFound
	}
	if err != nil {
		return SignupAnswer{}, err
	}
	out := SignupAnswer{Request: r, Status: SignupApproved}
	if !r.PreApproved {
		ap, err := a.svc.Approval(ctx, r.ApprovalID)
		if err != nil {
			return SignupAnswer{}, err
		}
		switch ap.Status {
		case StatusPending:
			out.Status = SignupPending
			return out, nil
		case StatusDenied:
			out.Status = SignupDenied
			return out, nil
		case StatusExpired:
			out.Status = SignupExpired
			return out, nil
		}
	}
	if r.LoginID == "" {
		if r, err = a.materialize(ctx, r); err != nil {
			return SignupAnswer{}, err
		}
		out.Request = r
	}
	it, err := a.cfg.Vault.Get(ctx, r.Org, r.LoginID)
	if errors.Is(err, vault.ErrNotFound) {
		return SignupAnswer{}, errRequestNotFound
	}
	if err != nil {
		return SignupAnswer{}, err
	}
	cur, err := a.svc.st.GetAPIKey(ctx, k.ID)
	if err != nil {
		return SignupAnswer{}, err
	}
	if !cur.Info().Sees(it) {
		return SignupAnswer{}, agentvault.Errorf(agentvault.CodeScopeDenied, "the owner has removed this login from this key's access: ask the owner")
	}
	out.Login = &it
	if it.Login != nil {
		out.Policy, out.OwnerManaged = it.Login.Generated, it.Login.OwnerManaged
	}
	return out, nil
}

// WaitSignup waits up to maxWait for the owner's decision on a request of
// apiKey's, then answers as SignupRequest does.
func (a *Accounts) WaitSignup(ctx context.Context, apiKey, id string, maxWait time.Duration) (SignupAnswer, error) {
	k, err := a.cfg.Authenticate(ctx, apiKey)
	if err != nil {
		return SignupAnswer{}, err
	}
	ans, err := a.answer(ctx, k, id)
	if err != nil || ans.Status != SignupPending {
		return ans, err
	}
	if _, err := a.svc.WaitApproval(ctx, ans.Request.ApprovalID, maxWait); err != nil && agentvault.ErrorCode(err) != agentvault.CodeTimeout {
		return SignupAnswer{}, err
	}
	return a.answer(ctx, k, id)
}

// changeable finds a login apiKey's key opened by label. Any other login,
// or an unknown label, is not_found: the answer tells nothing about logins
// the key did not make.
func (a *Accounts) changeable(ctx context.Context, k APIKey, label string) (vault.Item, error) {
	notFound := agentvault.Errorf(agentvault.CodeNotFound, "no login this key may change has this label")
	if label == "" || len(label) > 200 {
		return vault.Item{}, notFound
	}
	it, err := a.cfg.Vault.GetByLabel(ctx, a.svc.org, vault.KindLogin, label)
	if errors.Is(err, vault.ErrNotFound) {
		return vault.Item{}, notFound
	}
	if err != nil {
		return vault.Item{}, err
	}
	if it.Login == nil || it.Login.CreatedBy != k.ID {
		return vault.Item{}, notFound
	}
	return it, nil
}

func (a *Accounts) inWindow(it vault.Item) bool {
	return a.svc.now().Sub(it.Created) <= a.cfg.LoginChangeWindow
}

// dailyBudget refuses once the account's changes in the last 24 hours
// reach the ceiling.
func (a *Accounts) dailyBudget(ctx context.Context) error {
	cs, err := a.cfg.Store.ListLoginChanges(ctx, a.svc.org, a.svc.now().UTC().Add(-24*time.Hour))
	if err != nil {
		return err
	}
	if len(cs) >= a.cfg.LoginChangesPerDay {
		return agentvault.Errorf(agentvault.CodeDailyLimit, "this account's %d login changes in 24 hours are spent", a.cfg.LoginChangesPerDay)
	}
	return nil
}

// Change names recorded in the login change log and the run report.
const (
	ChangeUsernameSet     = "username_set"
	ChangePasswordRotated = "password_rotated"
	ChangeTOTPEnrolled    = "totp_enrolled"
)

// SetUsername records the handle a site accepted on a login the key
// opened. The same handle again succeeds (even after the window); another
// is username_already_set.
func (a *Accounts) SetUsername(ctx context.Context, apiKey, label, username string) (vault.Item, error) {
	k, err := a.writer(ctx, apiKey)
	if err != nil {
		return vault.Item{}, err
	}
	if err := SignupUsername(username); err != nil {
		return vault.Item{}, err
	}
	it, err := a.changeable(ctx, k, label)
	if err != nil {
		return vault.Item{}, err
	}
	switch cur := it.Login.Username; {
	case cur == username:
		return it, nil
	case cur != "":
		return vault.Item{}, agentvault.Errorf(agentvault.CodeUsernameAlreadySet, "this login already has another username: tell the owner which handle the site accepted")
	}
	if !a.inWindow(it) {
		return vault.Item{}, agentvault.Errorf(agentvault.CodeNotFound, "no login this key may change has this label")
	}
	if err := a.dailyBudget(ctx); err != nil {
		return vault.Item{}, err
	}
	got, err := a.cfg.Vault.UpdateLogin(ctx, a.svc.org, it.ID, vault.LoginUpdate{Username: &username, Actor: k.ID})
	if err != nil {
		return vault.Item{}, writeUnknown(err)
	}
	a.countChange(ctx, k.ID, it.ID, ChangeUsernameSet)
	return got, nil
}

// RotatePassword generates a new password for a login the key opened and
// the vault generated, within the window.
func (a *Accounts) RotatePassword(ctx context.Context, apiKey, label string, rules vault.PasswordRules) (vault.Item, error) {
	k, err := a.writer(ctx, apiKey)
	if err != nil {
		return vault.Item{}, err
	}
	pol, err := rules.Policy()
	if err != nil {
		return vault.Item{}, err
	}
	notRotatable := agentvault.Errorf(agentvault.CodeNotRotatable, "this login's password cannot be rotated by this key: the owner handles it")
	it, err := a.changeable(ctx, k, label)
	if agentvault.ErrorCode(err) == agentvault.CodeNotFound {
		// Seed 004: not_rotatable "tells you nothing about whether such a
		// login exists" — the same answer for all of them.
		return vault.Item{}, notRotatable
	}
	if err != nil {
		return vault.Item{}, err
	}
	if it.Login.Generated == nil || it.Login.OwnerManaged || !a.inWindow(it) {
		return vault.Item{}, notRotatable
	}
	if err := a.dailyBudget(ctx); err != nil {
		return vault.Item{}, err
	}
	pw, err := vault.GeneratePassword(pol)
	if err != nil {
		return vault.Item{}, err
	}
	defer pw.Wipe()
	got, err := a.cfg.Vault.UpdateLogin(ctx, a.svc.org, it.ID, vault.LoginUpdate{Password: pw, Generated: &pol, Actor: k.ID})
	if err != nil {
		return vault.Item{}, writeUnknown(err)
	}
	a.countChange(ctx, k.ID, it.ID, ChangePasswordRotated)
	return got, nil
}

// countChange records a change for the daily ceiling. The change itself
// landed; a failed count is logged, not turned into an error the agent
// would retry.
func (a *Accounts) countChange(ctx context.Context, keyID, loginID, change string) {
	if err := a.cfg.Store.AppendLoginChange(ctx, LoginChange{Org: a.svc.org, APIKeyID: keyID, LoginID: loginID, Change: change, At: a.svc.now().UTC()}); err != nil {
		a.svc.log.Warn("login change not counted", "change", change, "code", string(agentvault.ErrorCode(err)))
	}
}

// writeUnknown turns a store failure during a write into
// write_outcome_unknown: the write may have landed (P20). A refusal the
// vault decided before writing keeps its code.
func writeUnknown(err error) error {
	switch agentvault.ErrorCode(err) {
	case agentvault.CodeInvalidInput, agentvault.CodeInvalidUsername, agentvault.CodeNotFound, agentvault.CodeSealed:
		return err
	}
	return agentvault.Wrap(agentvault.CodeWriteOutcomeUnknown, err, "the change may or may not have been stored: do not retry it blind")
}
