package owner

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/hostname"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/vault"
)

// Config configures a Service.
type Config struct {
	Store Store
	// Engine decides fills for Authorize and Recheck (policy.NewEngine in
	// proxyd).
	Engine *policy.Engine
	// Org is the vault org this appliance serves (the one its owner signs
	// in for). Required.
	Org string
	// Notifier is told about new and decided approvals; nil for none.
	Notifier Notifier
	// DashboardURL is put into notifications so the owner can click through.
	DashboardURL string
	Logger       *slog.Logger
	Now          func() time.Time
	// Location is the owner's time zone: daily and monthly caps roll over at
	// its midnight. Nil is UTC.
	Location *time.Location
	// ApprovalTTL is how long an approval stays pending; zero is
	// policy.DestinationApprovalWait (15 minutes).
	ApprovalTTL time.Duration
	// PollEvery is how often WaitApproval re-reads the store, so a decision
	// taken by another process is seen; zero is one second.
	PollEvery time.Duration
	// SessionTTL is a dashboard session's life; zero is 12 hours.
	SessionTTL time.Duration
	// Password is argon2id's cost; zero is DefaultPasswordParams.
	Password PasswordParams
}

// Service is the owner side's logic over a Store. It is safe for concurrent
// use; several processes may share one store.
type Service struct {
	st       Store
	engine   *policy.Engine
	org      string
	notifier Notifier
	dashURL  string
	log      *slog.Logger
	now      func() time.Time
	loc      *time.Location
	ttl      time.Duration
	poll     time.Duration
	sessTTL  time.Duration
	pw       PasswordParams
	dummyPW  string

	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{}
	// staged settles TOTP replacements once decided (totp_replace.go);
	// nil until NewAccounts.
	staged atomic.Pointer[Accounts]

	diags    latest[LoginDiagnostic] // diagnostics.go
	receipts latest[Receipt]         // diagnostics.go
}

// New returns a Service.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Org == "" {
		return nil, agentvault.Errorf(agentvault.CodeInvalidInput, "owner service needs a store and an org")
	}
	s := &Service{
		st: cfg.Store, engine: cfg.Engine, org: cfg.Org, notifier: cfg.Notifier, dashURL: cfg.DashboardURL, log: cfg.Logger,
		now: cfg.Now, loc: cfg.Location, ttl: cfg.ApprovalTTL, poll: cfg.PollEvery, sessTTL: cfg.SessionTTL, pw: cfg.Password,
		waiters: map[string]map[chan struct{}]struct{}{},
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.loc == nil {
		s.loc = time.UTC
	}
	if s.ttl <= 0 {
		s.ttl = policy.DestinationApprovalWait
	}
	if s.poll <= 0 {
		s.poll = time.Second
	}
	if s.sessTTL <= 0 {
		s.sessTTL = 12 * time.Hour
	}
	if s.pw == (PasswordParams{}) {
		s.pw = DefaultPasswordParams
	}
	// A hash to check unknown emails against, so a sign-in for an email
	// with no account costs the same as one with a wrong password.
	d, err := dummyHash(s.pw)
	if err != nil {
		return nil, err
	}
	s.dummyPW = d
	return s, nil
}

// Org is the org the service manages.
func (s *Service) Org() string { return s.org }

// Store is the underlying store (the dashboard reads lists through it).
func (s *Service) Store() Store { return s.st }

// Ledger is the spending ledger proxyd reserves card charges in.
func (s *Service) Ledger() policy.Ledger { return s.st }

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("owner: no randomness") // crypto/rand never fails on supported platforms
	}
	return hex.EncodeToString(b)
}

// ---- API keys ----

const (
	apiKeyPrefix = "avk_"
	keyIDHexLen  = 16
	keySecretLen = 64
)

func hashSecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// CreateAPIKey creates a key and returns it with the key string the agent
// uses ("avk_<id>_<secret>"). The key string is returned only here; the
// store keeps a hash of its secret part.
func (s *Service) CreateAPIKey(ctx context.Context, name string, scope Scope) (APIKey, string, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 100 {
		return APIKey{}, "", agentvault.Errorf(agentvault.CodeInvalidInput, "an API key needs a name of at most 100 characters")
	}
	secret := randomHex(keySecretLen / 2)
	k := APIKey{
		ID: apiKeyPrefix + randomHex(keyIDHexLen/2), Org: s.org, Name: name, SecretHash: hashSecret(secret),
		Scope: cleanScope(scope), Created: s.now().UTC(),
	}
	if err := s.st.CreateAPIKey(ctx, k); err != nil {
		return APIKey{}, "", err
	}
	return k, k.ID + "_" + secret, nil
}

// RegisterFileKey records a key whose string lives outside the store
// (proxyd's <datadir>/api-key, id key_default) so the owner sees it in
// `proxyd owner keys` and on the dashboard and can revoke it like any other.
// Only the SHA-256 of the whole key string is stored. A key already
// registered under id is left as it is, so a revocation or a scope change
// survives restarts.
func (s *Service) RegisterFileKey(ctx context.Context, id, name, key string, scope Scope) (APIKey, error) {
	if id == "" || strings.HasPrefix(id, apiKeyPrefix) || key == "" {
		return APIKey{}, agentvault.Errorf(agentvault.CodeInvalidInput, "a file key needs an id outside the %s range and a key", apiKeyPrefix)
	}
	k, err := s.st.GetAPIKey(ctx, id)
	if err == nil {
		if k.Org != s.org {
			return APIKey{}, agentvault.Errorf(agentvault.CodeConflict, "key id %s belongs to another org", id)
		}
		return k, nil
	}
	if !errors.Is(err, vault.ErrNotFound) {
		return APIKey{}, err
	}
	k = APIKey{ID: id, Org: s.org, Name: name, SecretHash: hashSecret(key), Scope: cleanScope(scope), Created: s.now().UTC()}
	if err := s.st.CreateAPIKey(ctx, k); err != nil {
		// Another process registered it first: theirs stands.
		if got, gerr := s.st.GetAPIKey(ctx, id); gerr == nil && got.Org == s.org {
			return got, nil
		}
		return APIKey{}, err
	}
	return k, nil
}

// AuthenticateFileKey checks key against the file key registered under id
// (RegisterFileKey): CodeInvalidAPIKey when it is not that key, CodeKeyRevoked
// once the owner revoked it.
func (s *Service) AuthenticateFileKey(ctx context.Context, id, key string) (APIKey, error) {
	return s.checkKey(ctx, id, key)
}

func cleanScope(sc Scope) Scope {
	clean := func(ids []string) []string {
		var out []string
		for _, id := range ids {
			if id = strings.TrimSpace(id); id != "" && !slices.Contains(out, id) {
				out = append(out, id)
			}
		}
		return out
	}
	sc.CardIDs, sc.LoginIDs = clean(sc.CardIDs), clean(sc.LoginIDs)
	if sc.AllCards {
		sc.CardIDs = nil
	}
	if sc.AllLogins {
		sc.LoginIDs = nil
	}
	return sc
}

// splitKey parses "avk_<16 hex>_<64 hex>".
func splitKey(key string) (id, secret string, ok bool) {
	if !strings.HasPrefix(key, apiKeyPrefix) || len(key) != len(apiKeyPrefix)+keyIDHexLen+1+keySecretLen {
		return "", "", false
	}
	id, secret = key[:len(apiKeyPrefix)+keyIDHexLen], key[len(apiKeyPrefix)+keyIDHexLen+1:]
	if key[len(apiKeyPrefix)+keyIDHexLen] != '_' || !isHex(id[len(apiKeyPrefix):]) || !isHex(secret) {
		return "", "", false
	}
	return id, secret, true
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return true
}

var errInvalidKey = agentvault.Errorf(agentvault.CodeInvalidAPIKey, "the API key is not valid")

// AuthenticateKey checks a key string and returns its record: CodeInvalidAPIKey
// for anything malformed, unknown or with the wrong secret, CodeKeyRevoked
// for a revoked key (said only once the secret matched).
func (s *Service) AuthenticateKey(ctx context.Context, key string) (APIKey, error) {
	id, secret, ok := splitKey(key)
	if !ok {
		return APIKey{}, errInvalidKey
	}
	return s.checkKey(ctx, id, secret)
}

// checkKey is the one check of a key's secret: the key id must be this
// org's, the secret its own (compared in constant time), and the key not
// revoked (said only once the secret matched).
func (s *Service) checkKey(ctx context.Context, id, secret string) (APIKey, error) {
	k, err := s.st.GetAPIKey(ctx, id)
	if errors.Is(err, vault.ErrNotFound) {
		return APIKey{}, errInvalidKey
	}
	if err != nil {
		return APIKey{}, err
	}
	if subtle.ConstantTimeCompare(k.SecretHash, hashSecret(secret)) != 1 || k.Org != s.org {
		return APIKey{}, errInvalidKey
	}
	if k.Revoked() {
		return APIKey{}, agentvault.Errorf(agentvault.CodeKeyRevoked, "this API key has been revoked")
	}
	return k, nil
}

// Authenticate is AuthenticateKey as policy sees the key.
func (s *Service) Authenticate(ctx context.Context, key string) (policy.KeyInfo, error) {
	k, err := s.AuthenticateKey(ctx, key)
	if err != nil {
		return policy.KeyInfo{}, err
	}
	return k.Info(), nil
}

// KeyInfo re-reads a key by id (a session holds the id; a revocation or a
// scope change applies to its next fill).
func (s *Service) KeyInfo(ctx context.Context, id string) (policy.KeyInfo, error) {
	k, err := s.st.GetAPIKey(ctx, id)
	if errors.Is(err, vault.ErrNotFound) || (err == nil && k.Org != s.org) {
		return policy.KeyInfo{}, errInvalidKey
	}
	if err != nil {
		return policy.KeyInfo{}, err
	}
	return k.Info(), nil
}

// APIKeys lists the org's keys.
func (s *Service) APIKeys(ctx context.Context) ([]APIKey, error) { return s.st.ListAPIKeys(ctx, s.org) }

func (s *Service) ownKey(ctx context.Context, id string) error {
	k, err := s.st.GetAPIKey(ctx, id)
	if err != nil {
		return err
	}
	if k.Org != s.org {
		return vault.ErrNotFound
	}
	return nil
}

// Revoke revokes a key; its sessions fail their next fill.
func (s *Service) Revoke(ctx context.Context, id string) error {
	if err := s.ownKey(ctx, id); err != nil {
		return err
	}
	return s.st.RevokeAPIKey(ctx, id, s.now().UTC())
}

// SetScope replaces a key's scope.
func (s *Service) SetScope(ctx context.Context, id string, sc Scope) error {
	if err := s.ownKey(ctx, id); err != nil {
		return err
	}
	return s.st.SetAPIKeyScope(ctx, id, cleanScope(sc))
}

// ---- card policies ----

// CardPolicy returns a card's rules; a card the owner never configured has
// none (zero rules).
func (s *Service) CardPolicy(ctx context.Context, cardID string) (CardPolicy, error) {
	p, err := s.st.GetCardPolicy(ctx, s.org, cardID)
	if errors.Is(err, vault.ErrNotFound) {
		return CardPolicy{Org: s.org, CardID: cardID}, nil
	}
	return p, err
}

// CardPolicies lists configured cards.
func (s *Service) CardPolicies(ctx context.Context) ([]CardPolicy, error) {
	return s.st.ListCardPolicies(ctx, s.org)
}

// SetCardPolicy validates and stores a card's rules. Every amount must be
// in one currency (Currency, or the amounts' own when Currency is empty);
// merchant blocks must be hosts.
func (s *Service) SetCardPolicy(ctx context.Context, p CardPolicy, by string) error {
	if p.CardID == "" {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "no card named")
	}
	r := &p.Rules
	cur := strings.ToUpper(strings.TrimSpace(p.Currency))
	for _, a := range []*policy.Amount{r.PerPurchaseCap, r.DailyCap, r.MonthlyCap, r.ApprovalThreshold} {
		if a == nil {
			continue
		}
		if a.Minor < 0 {
			return agentvault.Errorf(agentvault.CodeInvalidInput, "a limit cannot be negative")
		}
		if cur == "" {
			cur = a.Currency
		}
		if a.Currency != cur {
			return agentvault.Errorf(agentvault.CodeInvalidInput, "every limit of a card must be in one currency")
		}
	}
	if cur != "" {
		if _, ok := policy.CurrencyExponent(cur); !ok {
			return agentvault.Errorf(agentvault.CodeInvalidInput, "unknown currency")
		}
	}
	var blocked []string
	for _, m := range r.BlockedMerchants {
		h, err := hostname.Site(m)
		if err != nil {
			return err
		}
		if !slices.Contains(blocked, h) {
			blocked = append(blocked, h)
		}
	}
	r.BlockedMerchants = blocked
	p.Org, p.Currency, p.Updated, p.UpdatedBy = s.org, cur, s.now().UTC(), by
	return s.st.PutCardPolicy(ctx, p)
}

// DeleteCardPolicy drops a card's rules (the card then has none).
func (s *Service) DeleteCardPolicy(ctx context.Context, cardID string) error {
	return s.st.DeleteCardPolicy(ctx, s.org, cardID)
}

// ---- destinations and signups ----

// AuthorizeSite lets fills happen on host and its subdomains.
func (s *Service) AuthorizeSite(ctx context.Context, host, by string) error {
	h, err := hostname.Site(host)
	if err != nil {
		return err
	}
	return s.st.AddDestination(ctx, Destination{Org: s.org, Host: h, AddedBy: by, Added: s.now().UTC()})
}

// RemoveSite withdraws an authorization. A name hostname.Site refuses is
// removed exactly as listed, so an entry stored under older rules can
// still go.
func (s *Service) RemoveSite(ctx context.Context, host string) error {
	return s.st.RemoveDestination(ctx, s.org, hostOrListed(host))
}

// hostOrListed is the canonical host, or the input as Sites or Signups
// listed it when it is not one.
func hostOrListed(h string) string {
	if n, err := hostname.Site(h); err == nil {
		return n
	}
	return strings.TrimSpace(h)
}

// Sites lists the authorized destinations.
func (s *Service) Sites(ctx context.Context) ([]Destination, error) {
	return s.st.ListDestinations(ctx, s.org)
}

// AuthorizedDestinations is Sites in the shape policy.Args takes.
func (s *Service) AuthorizedDestinations(ctx context.Context) (map[string]bool, error) {
	ds, err := s.Sites(ctx)
	if err != nil {
		return nil, err
	}
	m := make(map[string]bool, len(ds))
	for _, d := range ds {
		m[d.Host] = true
	}
	return m, nil
}

func normalizeEmail(e string) (string, error) {
	e = strings.ToLower(strings.TrimSpace(e))
	at := strings.LastIndexByte(e, '@')
	if at < 1 || at == len(e)-1 || len(e) > 254 || strings.ContainsAny(e, " \t\r\n<>\"") {
		return "", agentvault.Errorf(agentvault.CodeInvalidInput, "not an email address")
	}
	return e, nil
}

// AddSignup pre-approves an account creation on site with email.
func (s *Service) AddSignup(ctx context.Context, site, email, by string) error {
	h, err := hostname.Site(site)
	if err != nil {
		return err
	}
	e, err := normalizeEmail(email)
	if err != nil {
		return err
	}
	return s.st.AddSignup(ctx, Signup{Org: s.org, Site: h, Email: e, AddedBy: by, Added: s.now().UTC()})
}

// RemoveSignup withdraws a pre-approval.
func (s *Service) RemoveSignup(ctx context.Context, site, email string) error {
	return s.st.RemoveSignup(ctx, s.org, hostOrListed(site), strings.ToLower(strings.TrimSpace(email)))
}

// Signups lists pre-approved signups.
func (s *Service) Signups(ctx context.Context) ([]Signup, error) { return s.st.ListSignups(ctx, s.org) }

// ---- owner account and dashboard sessions ----

var errSignIn = agentvault.Errorf(agentvault.CodeUnauthorized, "wrong email or password")

// SetOwnerPassword creates the owner's account or changes its password
// (`proxyd owner set-password`), and ends every dashboard session of it.
func (s *Service) SetOwnerPassword(ctx context.Context, email, pw string) error {
	e, err := normalizeEmail(email)
	if err != nil {
		return err
	}
	if err := checkPasswordPolicy(pw); err != nil {
		return err
	}
	h, err := HashPassword(pw, s.pw)
	if err != nil {
		return err
	}
	now := s.now().UTC()
	if err := s.st.PutAccount(ctx, Account{Org: s.org, Email: e, PasswordHash: h, Created: now, Updated: now}); err != nil {
		return err
	}
	return s.st.DeleteDashSessions(ctx, e)
}

// HasOwner reports whether an owner account exists (the dashboard shows
// how to create one otherwise).
func (s *Service) HasOwner(ctx context.Context) (bool, error) {
	n, err := s.st.CountAccounts(ctx)
	return n > 0, err
}

// CheckOwnerPassword verifies a sign-in. Unknown email and wrong password
// give the same error after the same work.
func (s *Service) CheckOwnerPassword(ctx context.Context, email, pw string) (Account, error) {
	e, err := normalizeEmail(email)
	if err != nil || len(pw) > maxPasswordLen {
		CheckPassword(pw, s.dummyPW)
		return Account{}, errSignIn
	}
	a, err := s.st.GetAccount(ctx, e)
	if errors.Is(err, vault.ErrNotFound) || (err == nil && a.Org != s.org) {
		CheckPassword(pw, s.dummyPW)
		return Account{}, errSignIn
	}
	if err != nil {
		return Account{}, err
	}
	if !CheckPassword(pw, a.PasswordHash) {
		return Account{}, errSignIn
	}
	return a, nil
}

func tokenHash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// NewDashSession starts a dashboard session and returns its cookie token.
func (s *Service) NewDashSession(ctx context.Context, email string) (string, DashSession, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", DashSession{}, agentvault.Wrap(agentvault.CodeInternal, err, "no randomness")
	}
	token := base64.RawURLEncoding.EncodeToString(b)
	now := s.now().UTC()
	d := DashSession{TokenHash: tokenHash(token), Email: email, Created: now, Expires: now.Add(s.sessTTL)}
	if err := s.st.PutDashSession(ctx, d); err != nil {
		return "", DashSession{}, err
	}
	_ = s.st.DeleteExpiredDashSessions(ctx, now)
	return token, d, nil
}

// DashSession returns the live session for a cookie token, or
// CodeUnauthorized.
func (s *Service) DashSession(ctx context.Context, token string) (DashSession, error) {
	if token == "" || len(token) > 100 {
		return DashSession{}, agentvault.Errorf(agentvault.CodeUnauthorized, "not signed in")
	}
	d, err := s.st.GetDashSession(ctx, tokenHash(token))
	if errors.Is(err, vault.ErrNotFound) {
		return DashSession{}, agentvault.Errorf(agentvault.CodeUnauthorized, "not signed in")
	}
	if err != nil {
		return DashSession{}, err
	}
	if !s.now().Before(d.Expires) {
		_ = s.st.DeleteDashSession(ctx, d.TokenHash)
		return DashSession{}, agentvault.Errorf(agentvault.CodeUnauthorized, "the session has expired")
	}
	return d, nil
}

// EndDashSession signs a session out.
func (s *Service) EndDashSession(ctx context.Context, token string) error {
	return s.st.DeleteDashSession(ctx, tokenHash(token))
}
