package intercept

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/tokens"
	"github.com/agentvault/agentvault/vault"
	"golang.org/x/net/publicsuffix"
)

// ReleaseArgs mirrors vault.ReleaseArgs: which value, for whom, why. It is
// declared here so the proxy depends only on the two vault methods it uses.
type ReleaseArgs struct {
	Org, ItemID string
	Field       vault.Field
	Destination string
	Session     string
	Actor       string
	Purpose     string
}

// Vault is what the proxy needs from the vault service. Release must write
// its audit record before returning a value and fail when it cannot (P12).
type Vault interface {
	List(ctx context.Context, org string) ([]vault.Item, error)
	GetByLabel(ctx context.Context, org string, kind vault.Kind, label string) (vault.Item, error)
	Release(ctx context.Context, a ReleaseArgs) (vault.Secret, error)
}

// UseAuditor is the vault's audit path for a value it does not store (a
// live CVV the owner typed): vault.Vault.AuditUse. A Vault without it
// cannot use such values: they are refused (P12).
type UseAuditor interface {
	AuditUse(ctx context.Context, a ReleaseArgs, value vault.Secret) error
}

// auditUse records the use of a value kept in the session's memory before
// it is typed or sent, and fails closed when it cannot.
func (ss *Sessions) auditUse(ctx context.Context, s *Session, item vault.Item, f vault.Field, host, purpose string, v vault.Secret) error {
	au, ok := ss.Vault.(UseAuditor)
	if !ok {
		return agentvault.Errorf(agentvault.CodeAuditUnavailable, "this vault cannot audit a value it does not store")
	}
	err := au.AuditUse(ctx, ReleaseArgs{Org: s.Key.Org, ItemID: item.ID, Field: f, Destination: host,
		Session: s.ID, Actor: s.Key.ID, Purpose: purpose}, v)
	if err != nil {
		if c := agentvault.ErrorCode(err); c != agentvault.CodeAuditUnavailable {
			return agentvault.Wrap(agentvault.CodeAuditUnavailable, err, "the use could not be audited")
		}
		return err
	}
	return nil
}

// APIKey is an agent credential: which org's items it may use, and the
// token suffix derived for it (tokens.Suffix of the deployment secret and ID).
type APIKey struct {
	ID     string
	Org    string
	Suffix string
	// Scope limits the cards and logins the key sees in the catalog; nil
	// means every item.
	Scope *tokens.Scope
}

// KeyLookup resolves the API key an agent presents.
type KeyLookup func(ctx context.Context, apiKey string) (APIKey, error)

// Release purposes recorded in the audit log.
const (
	PurposeAuthorize  = "authorize"
	PurposeSubstitute = "substitute"
)

// binding is one authorized token in a session: the token and its stand-in
// both map to the item's field, usable only on the hosts authorized for it
// and admitted by the item's scope.
type binding struct {
	token   string
	standIn string // empty for non-secret fields (their real value is typed)
	item    vault.Item
	field   vault.Field
	hosts   []string // normalised hosts authorized for this binding
	live    bool     // the value is in the session's memory (a live CVV), not the vault
	// total is the checkout total the last authorize of a card number was
	// decided for (nil when the page showed none); an amount on the wire
	// next to the number may not exceed it (wire_amount.go).
	total *policy.Amount
}

// released is a real value released in the session, scrubbed from every
// response with its stand-in.
type released struct {
	real    vault.Secret
	standIn string
	kind    vault.Kind
}

// Session is one browser session: its proxy credential, API key, bindings
// and report.
type Session struct {
	ID      string
	Key     APIKey
	pwdHash [32]byte

	mu       sync.Mutex
	closed   bool
	bindings map[string]*binding // by token and by stand-in
	released []released
	live     map[string]vault.Secret // item id + field → value the owner typed
	version  int                     // bumps when bindings or released change
	reqMatch *requestMatch
	scrub    *scrubber
	cacheVer int
	report   control.Report
	// counted names refusals already in DeniedCount that can be reported
	// more than once (an approval the owner denied, seen by each wait).
	counted map[string]bool
	// lastRateLimited is when a rate_limited refusal was last counted in
	// the report: a burst counts once a minute.
	lastRateLimited time.Time
}

// DecideArgs is what an authorization decision sees.
type DecideArgs struct {
	Session     string
	Token       string
	Key         APIKey
	Item        vault.Item
	Field       vault.Field
	Destination string // normalised host, no port
	Total       *control.OrderTotal
}

// Decider is the policy hook authorize consults after the item's own scope
// admitted the destination (policy.Engine in proxyd). nil means the scope
// rule alone decides.
type Decider func(ctx context.Context, a DecideArgs) error

// Sessions holds the live sessions.
type Sessions struct {
	Vault     Vault
	LookupKey KeyLookup
	Decide    Decider
	// Limiter, when set, bounds authorize calls per API key (rate_limited
	// with a retry time).
	Limiter *policy.RateLimiter
	// WireAmount configures the amount check on requests that carry a card
	// number (wire_amount.go). The zero value checks the common field names.
	WireAmount WireAmountConfig
	// Now is the clock for report counting; nil means time.Now.
	Now func() time.Time

	mu   sync.RWMutex
	byID map[string]*Session
}

// NewSessions returns an empty session table.
func NewSessions(v Vault, lookup KeyLookup) *Sessions {
	return &Sessions{Vault: v, LookupKey: lookup, byID: map[string]*Session{}}
}

func randomID(prefix string, n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// Create opens a session under apiKey and returns it with its proxy
// password (shown once; only its hash is kept).
func (ss *Sessions) Create(ctx context.Context, apiKey string) (*Session, string, error) {
	key, err := ss.LookupKey(ctx, apiKey)
	if err != nil {
		return nil, "", err
	}
	pwd := make([]byte, 24)
	_, _ = rand.Read(pwd)
	password := base64.RawURLEncoding.EncodeToString(pwd)
	s := &Session{
		ID:       randomID("s_", 12),
		Key:      key,
		pwdHash:  sha256.Sum256([]byte(password)),
		bindings: map[string]*binding{},
		report:   control.Report{FilledFieldKinds: []string{}, CredentialWrites: []string{}},
	}
	ss.mu.Lock()
	ss.byID[s.ID] = s
	ss.mu.Unlock()
	return s, password, nil
}

// Get returns a live session.
func (ss *Sessions) Get(id string) (*Session, error) {
	ss.mu.RLock()
	s := ss.byID[id]
	ss.mu.RUnlock()
	if s == nil {
		return nil, agentvault.Errorf(agentvault.CodeNotFound, "no such session")
	}
	return s, nil
}

// Authenticate checks a proxy credential (user = session id).
func (ss *Sessions) Authenticate(user, password string) (*Session, bool) {
	ss.mu.RLock()
	s := ss.byID[user]
	ss.mu.RUnlock()
	if s == nil {
		// Same work either way, so timing does not reveal live session ids.
		h := sha256.Sum256([]byte(password))
		subtle.ConstantTimeCompare(h[:], h[:])
		return nil, false
	}
	h := sha256.Sum256([]byte(password))
	if subtle.ConstantTimeCompare(h[:], s.pwdHash[:]) != 1 {
		return nil, false
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	return s, !closed
}

// Close ends a session: its credential stops working, its released values
// are wiped, and its final report is returned.
func (ss *Sessions) Close(id string) (control.Report, error) {
	ss.mu.Lock()
	s := ss.byID[id]
	delete(ss.byID, id)
	ss.mu.Unlock()
	if s == nil {
		return control.Report{}, agentvault.Errorf(agentvault.CodeNotFound, "no such session")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, r := range s.released {
		r.real.Wipe()
	}
	for _, v := range s.live {
		v.Wipe()
	}
	s.released, s.live = nil, nil
	s.bindings = map[string]*binding{}
	s.version++
	return s.reportLocked(), nil
}

// CloseAll ends every session (shutdown).
func (ss *Sessions) CloseAll() {
	ss.mu.RLock()
	ids := make([]string, 0, len(ss.byID))
	for id := range ss.byID {
		ids = append(ids, id)
	}
	ss.mu.RUnlock()
	for _, id := range ids {
		_, _ = ss.Close(id)
	}
}

func isLiveCVV(item vault.Item, f vault.Field) bool {
	return f == vault.FieldCVV && item.Kind == vault.KindCard && item.Card != nil && item.Card.CVVLen == 0 && !item.Has(f)
}

func (s *Session) liveValue(itemID string, f vault.Field) (vault.Secret, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.live[itemID+"\x00"+string(f)]
	return v, ok
}

// SetLiveValue keeps a value the owner typed for this session only (a live
// CVV): it never goes to the vault or a log, and is wiped when the session
// closes.
func (ss *Sessions) SetLiveValue(sessionID, itemID string, f vault.Field, v vault.Secret) error {
	s, err := ss.Get(sessionID)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return agentvault.Errorf(agentvault.CodeSessionEnded, "the session has ended")
	}
	if s.live == nil {
		s.live = map[string]vault.Secret{}
	}
	if old, ok := s.live[itemID+"\x00"+string(f)]; ok {
		old.Wipe()
	}
	s.live[itemID+"\x00"+string(f)] = vault.NewSecret(v.InsecureRawBytes())
	s.version++
	return nil
}

// Closed reports whether the session has ended; its open tunnels then
// refuse every further request.
func (s *Session) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Report returns a copy of the session's report.
func (s *Session) Report() control.Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reportLocked()
}

func (s *Session) reportLocked() control.Report {
	r := s.report
	r.FilledFieldKinds = slices.Clone(r.FilledFieldKinds)
	r.CredentialWrites = slices.Clone(r.CredentialWrites)
	if r.OrderTotal != nil {
		t := *r.OrderTotal
		r.OrderTotal = &t
	}
	return r
}

func (s *Session) denied() {
	s.mu.Lock()
	s.report.DeniedCount++
	s.mu.Unlock()
}

// deniedAuthorize counts a refused authorize in the report: a call parked
// for the owner (approval_pending) is not a refusal, and a burst of
// rate_limited refusals counts once a minute, not once each.
func (ss *Sessions) deniedAuthorize(s *Session, err error) {
	switch agentvault.ErrorCode(err) {
	case agentvault.CodeApprovalPending:
		return
	case agentvault.CodeRateLimited:
		now := time.Now()
		if ss.Now != nil {
			now = ss.Now()
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.lastRateLimited.IsZero() && now.Sub(s.lastRateLimited) < time.Minute {
			return
		}
		s.lastRateLimited = now
		s.report.DeniedCount++
		return
	}
	s.denied()
}

func (s *Session) addKinds(kinds ...string) {
	for _, k := range kinds {
		if !slices.Contains(s.report.FilledFieldKinds, k) {
			s.report.FilledFieldKinds = append(s.report.FilledFieldKinds, k)
		}
	}
}

// Event records what the browser side observed.
func (s *Session) Event(ev control.EventRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch ev.Type {
	case control.EventConfirmation:
		s.report.ConfirmationDetected = true
		if ev.OrderTotal != nil {
			t := *ev.OrderTotal
			s.report.OrderTotal = &t
		}
	case control.EventFill:
		for _, k := range ev.Kinds {
			switch vault.Kind(k) {
			case vault.KindCard, vault.KindLogin, vault.KindIdentity, vault.KindAddress, vault.Kind(vault.FieldCVV):
			default:
				return agentvault.Errorf(agentvault.CodeInvalidInput, "unknown field kind")
			}
		}
		s.addKinds(ev.Kinds...)
	case control.EventCredential:
		if ev.Site != "" && !slices.Contains(s.report.CredentialWrites, ev.Site) {
			s.report.CredentialWrites = append(s.report.CredentialWrites, ev.Site)
		}
	default:
		return agentvault.Errorf(agentvault.CodeInvalidInput, "unknown event type")
	}
	return nil
}

// pageDestination extracts the host a page or frame URL sends its forms to
// and insists on https (a secret is never typed into a plain-http page).
func pageDestination(raw string) (Destination, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return Destination{}, agentvault.Errorf(agentvault.CodeInvalidInput, "page URL is not an absolute URL")
	}
	if u.Scheme != "https" {
		return Destination{}, agentvault.Errorf(agentvault.CodeInsecurePage, "the page is not served over https")
	}
	if u.User != nil {
		return Destination{}, agentvault.Errorf(agentvault.CodeDestinationUnauthorized, "page URL carries credentials")
	}
	return NormalizeDestination(u.Host, 443)
}

// ScopeAdmits reports whether item may be used on host: a card on any site
// when AnySite, else on one of its sites (or their subdomains); a login on
// its registrable domain and its subdomains (P2); identity and address data
// anywhere over https.
func ScopeAdmits(item vault.Item, host string) bool {
	switch item.Kind {
	case vault.KindCard:
		if item.Card == nil {
			return false
		}
		if item.Card.AnySite {
			return true
		}
		for _, site := range item.Card.Sites {
			if hostUnder(host, site) {
				return true
			}
		}
		return false
	case vault.KindLogin:
		if item.Login == nil || item.Login.Site == "" {
			return false
		}
		site, err := NormalizeDestination(item.Login.Site, 443)
		if err != nil {
			return false
		}
		reg, err := publicsuffix.EffectiveTLDPlusOne(host)
		if err != nil {
			return false
		}
		siteReg, err := publicsuffix.EffectiveTLDPlusOne(site.Host)
		if err != nil {
			return false
		}
		return reg == siteReg && hostUnder(host, siteReg)
	case vault.KindIdentity, vault.KindAddress:
		return true
	}
	return false
}

// keySees applies an API key's item scope (nil: every item).
func keySees(sc *tokens.Scope, it vault.Item) bool {
	if sc == nil {
		return true
	}
	switch it.Kind {
	case vault.KindCard:
		return sc.AllCards || slices.Contains(sc.CardIDs, it.ID)
	case vault.KindLogin:
		return sc.AllLogins || slices.Contains(sc.LoginIDs, it.ID)
	}
	return true
}

// hostUnder reports whether host is site or a subdomain of it, both
// normalised first.
func hostUnder(host, site string) bool {
	d, err := NormalizeDestination(site, 443)
	if err != nil {
		return false
	}
	return host == d.Host || strings.HasSuffix(host, "."+d.Host)
}

// Authorize binds a token to the destination of the page (or frame) about
// to be filled, releasing the value once (audited) to build its stand-in.
func (ss *Sessions) Authorize(ctx context.Context, s *Session, req control.AuthorizeRequest) (control.AuthorizeResponse, error) {
	var resp control.AuthorizeResponse
	err := ss.allow(s)
	if err == nil {
		resp, err = ss.authorize(ctx, s, req)
	}
	if err != nil {
		ss.deniedAuthorize(s, err)
	}
	return resp, err
}

// DeniedOnce counts a refusal decided outside authorize (the owner denied
// or let expire the approval a fill waited on) in the session's report,
// once per key however often it is reported. An unknown session is ignored.
func (ss *Sessions) DeniedOnce(sessionID, key string) {
	s, err := ss.Get(sessionID)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counted[key] {
		return
	}
	if s.counted == nil {
		s.counted = map[string]bool{}
	}
	s.counted[key] = true
	s.report.DeniedCount++
}

// allow spends one of the key's authorize calls (Limiter).
func (ss *Sessions) allow(s *Session) error {
	if ss.Limiter == nil {
		return nil
	}
	return ss.Limiter.Allow(s.Key.ID)
}

func (ss *Sessions) authorize(ctx context.Context, s *Session, req control.AuthorizeRequest) (control.AuthorizeResponse, error) {
	t, err := tokens.Parse(req.Token)
	if err != nil {
		return control.AuthorizeResponse{}, agentvault.Errorf(agentvault.CodeUnknownToken, "not a valid token")
	}
	tok := struct {
		kind  vault.Kind
		label string
		field vault.Field
	}{t.Kind, t.Label, t.Field}
	if t.Suffix != s.Key.Suffix {
		return control.AuthorizeResponse{}, agentvault.Errorf(agentvault.CodeUnknownToken, "the token does not belong to this API key")
	}
	target := req.PageURL
	if req.FrameURL != "" {
		target = req.FrameURL
	}
	dest, err := pageDestination(target)
	if err != nil {
		return control.AuthorizeResponse{}, err
	}
	if req.FrameURL != "" {
		// The top page must be https too.
		if _, err := pageDestination(req.PageURL); err != nil {
			return control.AuthorizeResponse{}, err
		}
	}
	item, err := ss.Vault.GetByLabel(ctx, s.Key.Org, tok.kind, tok.label)
	if err != nil {
		if agentvault.ErrorCode(err) == agentvault.CodeNotFound {
			return control.AuthorizeResponse{}, agentvault.Errorf(agentvault.CodeUnknownToken, "no item for this token")
		}
		return control.AuthorizeResponse{}, err
	}
	if !keySees(s.Key.Scope, item) {
		return control.AuthorizeResponse{}, agentvault.Errorf(agentvault.CodeScopeDenied, "this API key may not use this item")
	}
	live, hasLive := s.liveValue(item.ID, tok.field)
	liveCVV := isLiveCVV(item, tok.field)
	if liveCVV && ss.Decide != nil {
		// A live-CVV card stores no code: the owner types it per purchase.
		// Decide as if the field existed, so the policy asks for the entry
		// (cvv_entry approval); once the owner typed it, it is in the
		// session's memory.
		item.Fields = append(slices.Clone(item.Fields), tok.field)
	}
	if !item.Has(tok.field) {
		return control.AuthorizeResponse{}, agentvault.Errorf(agentvault.CodeUnknownToken, "the item has no such field")
	}
	if !ScopeAdmits(item, dest.Host) {
		return control.AuthorizeResponse{}, agentvault.Errorf(agentvault.CodeScopeDenied, "this item may not be used on this site")
	}
	var total *policy.Amount
	if req.OrderTotal != nil && item.Kind == vault.KindCard && tok.field == vault.FieldNumber {
		t, err := policy.ParseDecimal(req.OrderTotal.Amount, req.OrderTotal.Currency)
		if err != nil {
			return control.AuthorizeResponse{}, err
		}
		total = &t
	}
	if ss.Decide != nil {
		if err := ss.Decide(ctx, DecideArgs{Session: s.ID, Token: req.Token, Key: s.Key, Item: item, Field: tok.field, Destination: dest.Host, Total: req.OrderTotal}); err != nil {
			return control.AuthorizeResponse{}, err
		}
	}
	s.mu.Lock()
	closed := s.closed
	existing := s.bindings[req.Token]
	s.mu.Unlock()
	if closed {
		return control.AuthorizeResponse{}, agentvault.Errorf(agentvault.CodeSessionEnded, "session is closed")
	}
	if existing != nil {
		s.mu.Lock()
		if !slices.Contains(existing.hosts, dest.Host) {
			existing.hosts = append(existing.hosts, dest.Host)
			s.version++
		}
		if tok.field == vault.FieldNumber {
			existing.total = total
		}
		standIn := existing.standIn
		s.mu.Unlock()
		if standIn != "" {
			return control.AuthorizeResponse{Value: standIn, Kind: string(tok.kind), Field: string(tok.field), StandIn: true}, nil
		}
	}
	var real vault.Secret
	switch {
	case hasLive:
		real = vault.NewSecret(live.InsecureRawBytes())
		if err := ss.auditUse(ctx, s, item, tok.field, dest.Host, PurposeAuthorize, real); err != nil {
			real.Wipe()
			return control.AuthorizeResponse{}, err
		}
	case liveCVV:
		return control.AuthorizeResponse{}, agentvault.Errorf(agentvault.CodeCVVEntryRequired, "the owner has not typed this card's security code yet")
	default:
		real, err = ss.Vault.Release(ctx, ReleaseArgs{
			Org: s.Key.Org, ItemID: item.ID, Field: tok.field, Destination: dest.Host,
			Session: s.ID, Actor: s.Key.ID, Purpose: PurposeAuthorize,
		})
		if err != nil {
			return control.AuthorizeResponse{}, err
		}
	}
	out := control.AuthorizeResponse{Kind: string(tok.kind), Field: string(tok.field)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		real.Wipe()
		return control.AuthorizeResponse{}, agentvault.Errorf(agentvault.CodeSessionEnded, "session is closed")
	}
	b := s.bindings[req.Token]
	if b == nil {
		b = &binding{token: req.Token, item: item, field: tok.field, live: hasLive}
		s.bindings[req.Token] = b
	}
	if !slices.Contains(b.hosts, dest.Host) {
		b.hosts = append(b.hosts, dest.Host)
	}
	if tok.field == vault.FieldNumber {
		b.total = total
	}
	if tok.field.IsSecret() {
		if b.standIn == "" {
			si, err := uniqueStandIn(tok.field, real, func(c string) bool { return s.bindings[c] != nil })
			if err != nil {
				real.Wipe()
				return control.AuthorizeResponse{}, err
			}
			b.standIn = si
			s.bindings[si] = b
			s.released = append(s.released, released{real: real, standIn: si, kind: item.Kind})
		} else {
			real.Wipe()
		}
		out.Value, out.StandIn = b.standIn, true
	} else {
		out.Value = string(real.InsecureRawBytes())
		real.Wipe()
	}
	s.addKinds(string(item.Kind))
	if item.Kind == vault.KindCard && tok.field == vault.FieldCVV {
		// The report names a released security code on its own (seed 004:
		// ["identity","address","card","cvv"]).
		s.addKinds(string(vault.FieldCVV))
	}
	s.version++
	return out, nil
}

// wholeFieldLen is the length under which a token or stand-in (a CVV, a
// TOTP code) only matches as a whole field or between delimiters.
const wholeFieldLen = 7

// requestMatch is a session's request-side matcher: every token and
// stand-in, each pattern's ID the index of its binding. long holds only the
// long values, for the hidden-value check over decoded views.
type requestMatch struct {
	m, long  *tokens.Matcher
	bindings []*binding
}

// matchers returns the session's request matcher and response scrubber,
// rebuilt only when the bindings changed.
func (s *Session) matchers() (*requestMatch, *scrubber) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reqMatch != nil && s.cacheVer == s.version {
		return s.reqMatch, s.scrub
	}
	rm := &requestMatch{}
	var pats, long []tokens.Pattern
	seen := map[*binding]bool{}
	for _, b := range s.bindings {
		if seen[b] {
			continue
		}
		seen[b] = true
		id := len(rm.bindings)
		rm.bindings = append(rm.bindings, b)
		for _, n := range []string{b.token, b.standIn} {
			if n == "" {
				continue
			}
			p := tokens.Pattern{Value: []byte(n), ID: id, WholeField: len(n) < wholeFieldLen}
			pats = append(pats, p)
			if !p.WholeField {
				long = append(long, p)
			}
		}
	}
	rm.m, rm.long = tokens.NewMatcher(pats), tokens.NewMatcher(long)
	s.reqMatch, s.scrub, s.cacheVer = rm, newScrubber(s.released), s.version
	return s.reqMatch, s.scrub
}
