package broker

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/hostname"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/tokens"
	"github.com/agentvault/agentvault/vault"
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
func (ss *Broker) auditUse(ctx context.Context, s *Session, item vault.Item, f vault.Field, host, purpose string, v vault.Secret) error {
	au, ok := ss.cfg.Vault.(UseAuditor)
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
	// Scope is the cards and logins the key may use (the catalog lists and
	// authorize admits only those); the zero value sees none.
	Scope policy.KeyScope
}

// KeyLookup resolves the API key an agent presents.
type KeyLookup func(ctx context.Context, apiKey string) (APIKey, error)

// Release purposes recorded in the audit log.
const (
	PurposeAuthorize  = "authorize"
	PurposeSubstitute = "substitute"
	// PurposeScrub reads a value back after a restart to scrub it from a
	// host that was sent it before (P10).
	PurposeScrub = "scrub"
)

// Grant is one grant of a session (P21): an authorized token and its
// stand-in, both naming one item's field, usable only on the grant's
// origins, until it expires, and by its use rule. The fields after live are
// guarded by the session's mu; origins is copy-on-write.
type Grant struct {
	token   string
	standIn string // empty for non-secret fields (their real value is typed)
	item    vault.Item
	field   vault.Field
	live    bool // the value is in the session's memory (a live CVV), not the vault

	// origins are the exact origins (https, host, port) the grant may go
	// to: the filled frame's and its payment integration's.
	origins []hostname.Origin
	// site and sitePort widen a login's origins to every host of the filled
	// page's registrable domain on the same port (www. posting to
	// accounts.), each still checked by the item's scope and the owner's
	// destinations at release. Empty for a card.
	site     string
	sitePort int
	expires  time.Time
	// onePurchase: a card number or CVV grant covers one purchase. Once a
	// request carrying it was accepted (2xx or 3xx), it is spent.
	onePurchase bool
	spent       bool
	inFlight    bool
	purchase    int // the grant's number among this session's grants for the item
	// total is the checkout total the last authorize of a card number was
	// decided for (nil when the page showed none); an amount on the wire
	// next to the number may not exceed it (wire_amount.go).
	total *policy.Amount
}

// Token is the mock token the grant was made for.
func (b *Grant) Token() string { return b.token }

// StandIn is the value typed in its place, empty for a non-secret field.
// Set when the grant is made and never changed.
func (b *Grant) StandIn() string { return b.standIn }

// Item is the vault item as it was when the grant was made (a release reads
// it again).
func (b *Grant) Item() vault.Item { return b.item }

// Field is the item's field the grant is for.
func (b *Grant) Field() vault.Field { return b.field }

// admits reports whether d is one of the grant's origins. Locked by caller.
func (b *Grant) admits(d hostname.Origin, siteOf func(string) (string, error)) bool {
	if slices.Contains(b.origins, d) {
		return true
	}
	if b.site == "" || d.Port != b.sitePort {
		return false
	}
	reg, err := siteOf(d.Host)
	return err == nil && reg == b.site
}

// Session is one browser session: its proxy credential, API key, bindings
// and report.
type Session struct {
	ID      string
	Key     APIKey
	pwdHash [32]byte

	created  time.Time
	lastUsed atomic.Int64 // unix nanoseconds of the last authorize, CONNECT or request

	mu       sync.Mutex
	closed   bool
	bindings map[string]*Grant       // by token and by stand-in
	live     map[string]vault.Secret // item id + field → value the owner typed
	version  int                     // bumps when bindings change
	// scrubStandIns are the stand-ins this session shows for values it
	// never authorized but a host echoes (item id + field → stand-in).
	scrubStandIns map[string]string
	report        Report
	// counted names refusals already in DeniedCount that can be reported
	// more than once (an approval the owner denied, seen by each wait).
	counted map[string]bool
	// lastRateLimited is when a rate_limited refusal was last counted in
	// the report: a burst counts once a minute.
	lastRateLimited time.Time
	// cvvOwed names the cards whose number was authorized and whose
	// security code has not been granted since: the number authorizes the
	// code that follows it once (seed 004, "Card order").
	cvvOwed map[string]bool
	// cvvAgain counts, per card, the security codes granted after their
	// authorization was spent (each needed the owner's yes).
	cvvAgain map[string]int
	// signedIn lists the logins whose password this session released;
	// capture is an armed TOTP enrolment capture (totp_capture.go).
	signedIn map[string]bool
	capture  *totpCapture

	// broker is the session's broker (a Use settles through its store);
	// storedUse is the last use written to the store (unix nanoseconds).
	broker    *Broker
	storedUse atomic.Int64
	// stale: another replica changed the session's grants since it was
	// read (EventGrant); its next request reads them again.
	stale atomic.Bool
}

// Config is what a Broker runs on. Vault, LookupKey and Authorizer are
// required: New refuses a Config without one, so no decision is ever taken
// by a missing part (there is no default that allows).
type Config struct {
	// Vault holds the values; every release goes through it, audited.
	Vault Vault
	// LookupKey resolves the API key an agent presents.
	LookupKey KeyLookup
	// Authorizer decides each authorize under the owner's rules after the
	// item's own scope admitted the destination, and rechecks the owner's
	// current state before every release on the wire (owner.Service): a
	// revoked key, a paused card or a removed site ends the grant at its
	// next use (P21).
	Authorizer policy.Authorizer

	// Limiter, when set, bounds authorize calls per API key (rate_limited
	// with a retry time).
	Limiter *policy.RateLimiter
	// Now is the clock for grants, session limits and report counting;
	// nil means time.Now.
	Now func() time.Time
	// Policy holds the one scope rule (policy.Engine.ScopeAdmits), the
	// registrable-domain lookup and the rate table the wire amount check
	// converts with. nil: an engine over the public suffix list, no rates.
	Policy *policy.Engine
	// WireAmount adds field names to the wire amount check
	// (policy.WireAmountConfig); the zero value reads the common names.
	WireAmount policy.WireAmountConfig
	// PaymentOrigins lists the origins a card frame's payment integration
	// posts the card to (policy's integration list); nil: none.
	PaymentOrigins func(frameURL string) []hostname.Origin

	// GrantTTL is how long a grant lasts after its authorize (default 5
	// minutes). SessionIdle and SessionMaxAge end a session that saw no use
	// for that long, or that is that old (defaults 30 minutes and 8 hours).
	// MaxSessionsPerKey caps the open sessions of one API key (default 64).
	GrantTTL          time.Duration
	SessionIdle       time.Duration
	SessionMaxAge     time.Duration
	MaxSessionsPerKey int

	// Store, when set, shares sessions and grants between replicas and
	// across restarts (sessionstore.go, shared.go); Notifier then tells the
	// other replicas what changed. nil: sessions live in this process only.
	Store    SessionStore
	Notifier Notifier
	// ClaimLease bounds how long a request may hold a one-purchase grant
	// claimed in the Store without settling it (default 2 minutes); after
	// it the grant counts as used (shared.go).
	ClaimLease time.Duration
	// SingleProcess says the Store is this process's alone (SQLite: one
	// proxyd per file). Its cache is then authoritative: an authorize does
	// not read the session again, and a one-purchase grant's use is held
	// in memory, not claimed and settled in the Store. A session loaded
	// after a restart counts its one-purchase grants as used, since one
	// may have been in use when the process stopped.
	SingleProcess bool
	// UsesLost (with SingleProcess) says the previous process stopped
	// without CloseAll: whether a one-purchase grant was in use then is
	// unknown, so a session loaded now counts its one-purchase grants as
	// used (the agent fills the card again).
	UsesLost bool
	// GrantWriteBehind (with SingleProcess) is how long the grants that
	// authorizes made may wait to be written to the Store, together
	// (default 1 s; shared.go, writeBehind).
	GrantWriteBehind time.Duration
}

// Broker is the one home of release decisions: it owns the proxy sessions
// and their grants, decides every authorize (with policy and the owner's
// rules), and releases a granted value on the wire only after checking the
// grant and the owner's current state (P21), auditing it first (P12) and
// recording its recipient (P10).
type Broker struct {
	cfg  Config
	wire *policy.WireRules // from cfg.WireAmount

	mu      sync.RWMutex
	byID    map[string]*Session
	onClose []func(*Session)
	onOpen  []func(*Session)

	recipients recipients

	idOnce     sync.Once
	id         string      // this broker's name in Events
	listenDown atomic.Bool // the Notifier lost its listener (shared.go)
	listening  atomic.Bool // the Notifier listens (it sent EventResync)
	echoMu     sync.Mutex
	echoes     map[string]*echoWaiter // EventGrant echoes awaited
	peers      map[string]time.Time   // other replicas, by when last heard
	ackMisses  atomic.Int64

	// Grants written behind (SingleProcess, shared.go).
	behindMu    sync.Mutex
	behind      map[*Session]map[string]bool
	behindTimer *time.Timer
	flushMu     sync.Mutex

	lastPurge atomic.Int64 // unix nanoseconds of the last purge started
	purged    atomic.Int64
}

// OnClose registers fn to run after a session ends (the proxy drops what it
// cached for it). Register before serving.
func (ss *Broker) OnClose(fn func(*Session)) { ss.onClose = append(ss.onClose, fn) }

// OnOpen registers fn to run when a session starts being served by this
// broker: created here, or loaded from the Store. Register before serving.
func (ss *Broker) OnOpen(fn func(*Session)) { ss.onOpen = append(ss.onOpen, fn) }

func (ss *Broker) now() time.Time {
	if ss.cfg.Now != nil {
		return ss.cfg.Now()
	}
	return time.Now()
}

func (ss *Broker) policy() *policy.Engine {
	if ss.cfg.Policy != nil {
		return ss.cfg.Policy
	}
	return defaultPolicy
}

var defaultPolicy = policy.NewEngine(policy.Rates{}, hostname.Registrable)

func durationOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func (ss *Broker) grantTTL() time.Duration    { return durationOr(ss.cfg.GrantTTL, 5*time.Minute) }
func (ss *Broker) sessionIdle() time.Duration { return durationOr(ss.cfg.SessionIdle, 30*time.Minute) }
func (ss *Broker) sessionAge() time.Duration  { return durationOr(ss.cfg.SessionMaxAge, 8*time.Hour) }

// touch records a use of s (an authorize, a CONNECT, a proxied request).
func (ss *Broker) Touch(s *Session) { s.lastUsed.Store(ss.now().UnixNano()) }

// expired reports whether s is past its idle or age limit.
func (ss *Broker) expired(s *Session, now time.Time) bool {
	return now.Sub(time.Unix(0, s.lastUsed.Load())) > ss.sessionIdle() || now.Sub(s.created) > ss.sessionAge()
}

// Alive reports whether s may still be used, and ends it when it is past
// its limits. Every CONNECT and every request inside a tunnel asks.
func (ss *Broker) Alive(s *Session) bool {
	if s.Closed() {
		return false
	}
	if now := ss.now(); ss.expired(s, now) {
		return !ss.expire(s, now)
	}
	return true
}

// Sweep ends every session past its idle or age limit, wiping its values.
// proxyd runs it every second.
func (ss *Broker) Sweep() {
	now := ss.now()
	ss.mu.RLock()
	var old, all []*Session
	for _, s := range ss.byID {
		if ss.expired(s, now) {
			old = append(old, s)
		}
		all = append(all, s)
	}
	ss.mu.RUnlock()
	for _, s := range old {
		ss.expire(s, now)
	}
	ss.storeUses(all)
	ss.purge(now)
}

// purgeEvery is how often Sweep asks the Store to drop the sessions that
// can never be served again; purgeGrace is how long past that point a
// session stays (an ended one is still read as ended by a replica that
// missed the end, for that long).
const (
	purgeEvery = 10 * time.Minute
	purgeGrace = time.Hour
)

// purge drops, at most every purgeEvery and in the background, the
// Store's sessions that ended, went idle or aged out more than purgeGrace
// ago: without it every session ever opened stays in the Store.
func (ss *Broker) purge(now time.Time) {
	if ss.cfg.Store == nil {
		return
	}
	last := ss.lastPurge.Load()
	if last != 0 && now.Sub(time.Unix(0, last)) < purgeEvery || !ss.lastPurge.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	a := PurgeArgs{EndedBefore: now.Add(-purgeGrace), UsedBefore: now.Add(-ss.sessionIdle() - purgeGrace),
		CreatedBefore: now.Add(-ss.sessionAge() - purgeGrace)}
	go func() {
		ctx, cancel := storeCtx()
		defer cancel()
		n, err := ss.cfg.Store.PurgeSessions(ctx, a)
		if err == nil {
			ss.purged.Add(n)
		}
	}()
}

// Purged is how many sessions this broker's purges dropped from the Store.
func (ss *Broker) Purged() int64 { return ss.purged.Load() }

// New returns a broker with no sessions. A Config without its vault, its
// key lookup or its authorizer is refused.
func New(cfg Config) (*Broker, error) {
	switch {
	case cfg.Vault == nil:
		return nil, agentvault.Errorf(agentvault.CodeInternal, "the broker needs a vault")
	case cfg.LookupKey == nil:
		return nil, agentvault.Errorf(agentvault.CodeInternal, "the broker needs an API key lookup")
	case cfg.Authorizer == nil:
		return nil, agentvault.Errorf(agentvault.CodeInternal, "the broker needs an authorizer (the owner's rules)")
	}
	return &Broker{cfg: cfg, wire: policy.NewWireRules(cfg.WireAmount), byID: map[string]*Session{}}, nil
}

// LookupKey resolves the API key an agent presents (Config.LookupKey).
func (ss *Broker) LookupKey(ctx context.Context, apiKey string) (APIKey, error) {
	return ss.cfg.LookupKey(ctx, apiKey)
}

// SessionMaxAge is the age at which a session ends.
func (ss *Broker) SessionMaxAge() time.Duration { return ss.sessionAge() }

func randomID(prefix string, n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// Create opens a session under apiKey and returns it with its proxy
// password (shown once; only its hash is kept).
func (ss *Broker) Create(ctx context.Context, apiKey string) (*Session, string, error) {
	key, err := ss.cfg.LookupKey(ctx, apiKey)
	if err != nil {
		return nil, "", err
	}
	ss.Sweep()
	pwd := make([]byte, 24)
	_, _ = rand.Read(pwd)
	password := base64.RawURLEncoding.EncodeToString(pwd)
	s := &Session{
		ID:       randomID("s_", 12),
		Key:      key,
		pwdHash:  sha256.Sum256([]byte(password)),
		created:  ss.now(),
		bindings: map[string]*Grant{},
		report:   Report{FilledFieldKinds: []string{}, CredentialWrites: []string{}},
		broker:   ss,
	}
	ss.Touch(s)
	limit := ss.cfg.MaxSessionsPerKey
	if limit <= 0 {
		limit = 64
	}
	if err := ss.storeCreate(ctx, s); err != nil {
		return nil, "", err
	}
	tooMany := func() (*Session, string, error) {
		ss.storeEnd(s.ID, "refused: too many sessions")
		return nil, "", agentvault.Errorf(agentvault.CodeTooManySessions, "this API key has too many open sessions: close one first")
	}
	if ss.cfg.Store != nil && !ss.cfg.SingleProcess {
		// The key's open sessions on every replica, this one included (it
		// is written first: two replicas creating at once may both refuse,
		// never both admit past the cap). The store's last use lags by up
		// to half a minute, so a minute more of idleness still counts.
		now := ss.now()
		n, err := ss.cfg.Store.CountOpenSessions(ctx, key.ID, now.Add(-ss.sessionIdle()-time.Minute), now.Add(-ss.sessionAge()))
		if err != nil {
			ss.storeEnd(s.ID, "refused: sessions not counted")
			return nil, "", agentvault.Wrap(agentvault.CodeInternal, err, "the key's open sessions could not be counted")
		}
		if n > limit {
			return tooMany()
		}
	}
	ss.mu.Lock()
	n := 0
	for _, o := range ss.byID {
		if o.Key.ID == key.ID {
			n++
		}
	}
	if n >= limit {
		ss.mu.Unlock()
		return tooMany()
	}
	ss.byID[s.ID] = s
	ss.mu.Unlock()
	for _, fn := range ss.onOpen {
		fn(s)
	}
	return s, password, nil
}

// Get returns a live session: held here, or loaded from the Store.
func (ss *Broker) Get(id string) (*Session, error) {
	s := ss.lookup(id)
	if s == nil {
		return nil, agentvault.Errorf(agentvault.CodeNotFound, "no such session")
	}
	return s, nil
}

// Authenticate checks a proxy credential (user = session id).
func (ss *Broker) Authenticate(user, password string) (*Session, bool) {
	s := ss.lookup(user)
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
	if !ss.Alive(s) {
		return s, false
	}
	ss.Touch(s)
	return s, true
}

// Close ends a session: its credential stops working (on every replica
// sharing the Store), its released values are wiped, and its final report
// (what this replica saw) is returned.
func (ss *Broker) Close(id string) (Report, error) {
	return ss.end(id, "closed")
}

// end ends session id everywhere: in the Store (the other replicas are
// told), then here.
func (ss *Broker) end(id, reason string) (Report, error) {
	s := ss.lookup(id)
	if s == nil {
		return Report{}, agentvault.Errorf(agentvault.CodeNotFound, "no such session")
	}
	err := ss.storeEnd(id, reason)
	rep, ok := ss.drop(s)
	if !ok {
		return Report{}, agentvault.Errorf(agentvault.CodeNotFound, "no such session")
	}
	return rep, err
}

// drop ends s in this process only: it leaves the cache, its values are
// wiped, the OnClose hooks run. False when it was dropped already.
func (ss *Broker) drop(s *Session) (Report, bool) {
	ss.mu.Lock()
	held := ss.byID[s.ID] == s
	if held {
		delete(ss.byID, s.ID)
	}
	ss.mu.Unlock()
	if !held {
		return Report{}, false
	}
	for _, fn := range ss.onClose {
		defer fn(s)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, v := range s.live {
		v.Wipe()
	}
	s.live = nil
	if c := s.capture; c != nil {
		c.seed.Wipe()
		s.capture = nil
	}
	s.bindings = map[string]*Grant{}
	s.scrubStandIns = nil
	s.version++
	return s.reportLocked(), true
}

// CloseAll ends every session this process holds (shutdown), wiping its
// values. With a Store the sessions stay open there: another replica, or
// this one restarted, serves them on.
func (ss *Broker) CloseAll() {
	ss.mu.RLock()
	all := make([]*Session, 0, len(ss.byID))
	for _, s := range ss.byID {
		all = append(all, s)
	}
	ss.mu.RUnlock()
	ss.flushGrants()
	for _, s := range all {
		if ss.cfg.Store != nil {
			ss.keepUses(s)
			ss.drop(s)
		} else {
			_, _ = ss.Close(s.ID)
		}
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
func (ss *Broker) SetLiveValue(sessionID, itemID string, f vault.Field, v vault.Secret) error {
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

// Grants lists the session's grants with a version that changes whenever
// they do, so the proxy can cache what it builds from them.
func (s *Session) Grants() (int, []*Grant) {
	s.syncStale()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Grant, 0, len(s.bindings)/2+1)
	seen := map[*Grant]bool{}
	for _, b := range s.bindings {
		if !seen[b] {
			seen[b] = true
			out = append(out, b)
		}
	}
	return s.version, out
}

// Closed reports whether the session has ended; its open tunnels then
// refuse every further request.
func (s *Session) Closed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Report returns a copy of the session's report.
func (s *Session) Report() Report {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reportLocked()
}

func (s *Session) reportLocked() Report {
	r := s.report
	r.FilledFieldKinds = slices.Clone(r.FilledFieldKinds)
	r.CredentialWrites = slices.Clone(r.CredentialWrites)
	if r.OrderTotal != nil {
		t := *r.OrderTotal
		r.OrderTotal = &t
	}
	return r
}

// Denied counts a refused request in the session's report.
func (s *Session) Denied() {
	s.mu.Lock()
	s.report.DeniedCount++
	s.mu.Unlock()
}

// deniedAuthorize counts a refused authorize in the report: a call parked
// for the owner (approval_pending) is not a refusal, and a burst of
// rate_limited refusals counts once a minute, not once each.
func (ss *Broker) deniedAuthorize(s *Session, err error) {
	switch agentvault.ErrorCode(err) {
	case agentvault.CodeApprovalPending:
		return
	case agentvault.CodeRateLimited:
		now := time.Now()
		if ss.cfg.Now != nil {
			now = ss.cfg.Now()
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
	s.Denied()
}

func (s *Session) addKinds(kinds ...string) {
	for _, k := range kinds {
		if !slices.Contains(s.report.FilledFieldKinds, k) {
			s.report.FilledFieldKinds = append(s.report.FilledFieldKinds, k)
		}
	}
}

// Confirmed records that the browser saw an order confirmation, with the
// total it showed (nil when none).
func (s *Session) Confirmed(total *ShownTotal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.report.ConfirmationDetected = true
	if total != nil {
		t := *total
		s.report.OrderTotal = &t
	}
}

// Filled records the kinds of fields the browser filled with values it
// types itself (identity, address); an unknown kind is refused.
func (s *Session) Filled(kinds []string) error {
	for _, k := range kinds {
		switch vault.Kind(k) {
		case vault.KindCard, vault.KindLogin, vault.KindIdentity, vault.KindAddress, vault.Kind(vault.FieldCVV):
		default:
			return agentvault.Errorf(agentvault.CodeInvalidInput, "unknown field kind")
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.addKinds(kinds...)
	return nil
}

// CredentialWritten records a login written for site (its registrable
// domain, or the change a stored login saw).
func (s *Session) CredentialWritten(site string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if site != "" && !slices.Contains(s.report.CredentialWrites, site) {
		s.report.CredentialWrites = append(s.report.CredentialWrites, site)
	}
}

// pageDestination extracts the host a page or frame URL sends its forms to
// and insists on https (a secret is never typed into a plain-http page).
func pageDestination(raw string) (hostname.Origin, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return hostname.Origin{}, agentvault.Errorf(agentvault.CodeInvalidInput, "page URL is not an absolute URL")
	}
	if u.Scheme != "https" {
		return hostname.Origin{}, agentvault.Errorf(agentvault.CodeInsecurePage, "the page is not served over https")
	}
	if u.User != nil {
		return hostname.Origin{}, agentvault.Errorf(agentvault.CodeDestinationUnauthorized, "page URL carries credentials")
	}
	return hostname.Parse(u.Host, 443)
}

// Authorize binds a token to the destination of the page (or frame) about
// to be filled, releasing the value once (audited) to build its stand-in.
func (ss *Broker) Authorize(ctx context.Context, s *Session, req AuthorizeRequest) (Authorized, error) {
	// One decision: the store's read cache is checked once for all of it.
	ctx = vault.WithReadScope(ctx)
	var resp Authorized
	err := ss.allow(s)
	if err == nil && !ss.cfg.SingleProcess {
		// The grant's shared state first (spent or renewed on another
		// replica), and the grant written through before the answer.
		err = ss.refresh(ctx, s)
	}
	if err == nil {
		resp, err = ss.authorize(ctx, s, req)
	}
	if err == nil {
		resp, err = ss.writeGrant(ctx, s, req.Token, resp)
	}
	if err != nil {
		ss.deniedAuthorize(s, err)
	}
	return resp, err
}

// DeniedOnce counts a refusal decided outside authorize (the owner denied
// or let expire the approval a fill waited on) in the session's report,
// once per key however often it is reported. An unknown session is ignored.
func (ss *Broker) DeniedOnce(sessionID, key string) {
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
func (ss *Broker) allow(s *Session) error {
	if ss.cfg.Limiter == nil {
		return nil
	}
	return ss.cfg.Limiter.Allow(s.Key.ID)
}

func (ss *Broker) authorize(ctx context.Context, s *Session, req AuthorizeRequest) (Authorized, error) {
	if !ss.Alive(s) {
		return Authorized{}, agentvault.Errorf(agentvault.CodeSessionEnded, "session is closed")
	}
	ss.Touch(s)
	t, err := tokens.Parse(req.Token)
	if err != nil {
		return Authorized{}, agentvault.Errorf(agentvault.CodeUnknownToken, "not a valid token")
	}
	if t.Suffix != s.Key.Suffix {
		return Authorized{}, agentvault.Errorf(agentvault.CodeUnknownToken, "the token does not belong to this API key")
	}
	target := req.PageURL
	if req.FrameURL != "" {
		target = req.FrameURL
	}
	dest, err := pageDestination(target)
	if err != nil {
		return Authorized{}, err
	}
	if req.FrameURL != "" {
		// The top page must be https too.
		if _, err := pageDestination(req.PageURL); err != nil {
			return Authorized{}, err
		}
	}
	item, err := ss.cfg.Vault.GetByLabel(ctx, s.Key.Org, t.Kind, t.Label)
	if err != nil {
		if agentvault.ErrorCode(err) == agentvault.CodeNotFound {
			return Authorized{}, agentvault.Errorf(agentvault.CodeUnknownToken, "no item for this token")
		}
		return Authorized{}, err
	}
	if !s.Key.Scope.Sees(item) {
		return Authorized{}, agentvault.Errorf(agentvault.CodeScopeDenied, "this API key may not use this item")
	}
	field := t.Field
	live, hasLive := s.liveValue(item.ID, field)
	liveCVV := isLiveCVV(item, field)
	if liveCVV {
		// A live-CVV card stores no code: the owner types it per purchase.
		// Authorize as if the field existed, so the policy asks for the entry
		// (cvv_entry approval); once the owner typed it, it is in the
		// session's memory.
		item.Fields = append(slices.Clone(item.Fields), field)
	}
	if !item.Has(field) {
		return Authorized{}, agentvault.Errorf(agentvault.CodeUnknownToken, "the item has no such field")
	}
	pol := ss.policy()
	if !pol.ScopeAdmits(item, dest.Host) {
		return Authorized{}, agentvault.Errorf(agentvault.CodeScopeDenied, "this item may not be used on this site")
	}
	// The checkout total the page shows: decided on for a card number (and
	// named in a purchase approval a security code asks for); a copy, as
	// the grant keeps it.
	var total *policy.Amount
	if req.Total != nil {
		t := *req.Total
		total = &t
	}
	now := ss.now()
	onePurchase := item.Kind == vault.KindCard && (field == vault.FieldNumber || field == vault.FieldCVV)
	// A grant that is spent or past its time is followed by a new one: a
	// new purchase, which the ledger counts again (P18, P21).
	s.mu.Lock()
	purchase := 0
	prev := s.bindings[req.Token]
	if prev != nil {
		purchase = prev.purchase
		if prev.spent || now.After(prev.expires) {
			purchase++
		}
	}
	// The security code's authorization is spent when mcpd saw an action
	// between the number and the code, or when its grant was spent on a
	// purchase (or lapsed) with no new number authorized since. The owner
	// then approves the same purchase again (policy.ReasonCVVAgain).
	cvvAgain := 0
	if item.Kind == vault.KindCard && field == vault.FieldCVV {
		if req.CVVSpent || (!s.cvvOwed[item.ID] && prev != nil && (prev.spent || now.After(prev.expires))) {
			cvvAgain = s.cvvAgain[item.ID] + 1
		}
	}
	s.mu.Unlock()
	if err := ss.cfg.Authorizer.Authorize(ctx, policy.Fill{KeyID: s.Key.ID, Session: s.ID, Item: item, Field: field,
		Destination: dest.Host, Page: policy.ShownPage(target), Total: total, Purchase: purchase, CVVAgain: cvvAgain}); err != nil {
		return Authorized{}, err
	}
	// The grant's origins: the filled frame's, and for a card the origins
	// its payment integration posts to, each admitted by the item's scope.
	origins := []hostname.Origin{dest}
	if item.Kind == vault.KindCard && req.FrameURL != "" && ss.cfg.PaymentOrigins != nil {
		for _, o := range ss.cfg.PaymentOrigins(req.FrameURL) {
			if pol.ScopeAdmits(item, o.Host) && !slices.Contains(origins, o) {
				origins = append(origins, o)
			}
		}
	}
	// A login may go to any host of its page's registrable domain on the
	// same port (a sign-in page on www. posting to accounts.): its scope is
	// that domain anyway. A card goes only to the exact origins above.
	site := ""
	if item.Kind != vault.KindCard {
		site, _ = pol.RegistrableDomain(dest.Host)
	}
	// settleCVV records a granted number (its code is owed) or code (the
	// number's authorization of it is used); s.mu must be held.
	settleCVV := func() {
		if item.Kind != vault.KindCard {
			return
		}
		if s.cvvOwed == nil {
			s.cvvOwed, s.cvvAgain = map[string]bool{}, map[string]int{}
		}
		switch field {
		case vault.FieldNumber:
			s.cvvOwed[item.ID] = true
		case vault.FieldCVV:
			delete(s.cvvOwed, item.ID)
			s.cvvAgain[item.ID] = max(s.cvvAgain[item.ID], cvvAgain)
		}
	}
	renew := func(b *Grant) {
		if b.purchase != purchase {
			b.purchase, b.spent, b.inFlight = purchase, false, false
		}
		o := slices.Clone(b.origins)
		if now.After(b.expires) {
			o = nil // an expired grant keeps none of its old origins
		}
		for _, d := range origins {
			if !slices.Contains(o, d) {
				o = append(o, d)
			}
		}
		b.origins, b.site, b.sitePort = o, site, dest.Port
		b.expires = now.Add(ss.grantTTL())
		if field == vault.FieldNumber {
			b.total = total
		}
		s.version++
	}
	s.mu.Lock()
	closed := s.closed
	if existing := s.bindings[req.Token]; existing != nil && !closed {
		renew(existing)
		if existing.standIn != "" {
			settleCVV()
			standIn := existing.standIn
			s.mu.Unlock()
			return Authorized{Value: standIn, Kind: t.Kind, Field: field, StandIn: true}, nil
		}
	}
	s.mu.Unlock()
	if closed {
		return Authorized{}, agentvault.Errorf(agentvault.CodeSessionEnded, "session is closed")
	}
	var real vault.Secret
	switch {
	case hasLive:
		real = vault.NewSecret(live.InsecureRawBytes())
		if err := ss.auditUse(ctx, s, item, field, dest.Host, PurposeAuthorize, real); err != nil {
			real.Wipe()
			return Authorized{}, err
		}
	case liveCVV:
		return Authorized{}, agentvault.Errorf(agentvault.CodeCVVEntryRequired, "the owner has not typed this card's security code yet")
	default:
		real, err = ss.cfg.Vault.Release(ctx, ReleaseArgs{
			Org: s.Key.Org, ItemID: item.ID, Field: field, Destination: dest.Host,
			Session: s.ID, Actor: s.Key.ID, Purpose: PurposeAuthorize,
		})
		if err != nil {
			return Authorized{}, err
		}
	}
	defer real.Wipe()
	out := Authorized{Kind: t.Kind, Field: field}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Authorized{}, agentvault.Errorf(agentvault.CodeSessionEnded, "session is closed")
	}
	b := s.bindings[req.Token]
	if b == nil {
		b = &Grant{token: req.Token, item: item, field: field, live: hasLive, onePurchase: onePurchase}
		s.bindings[req.Token] = b
	}
	renew(b)
	if field.IsSecret() {
		if b.standIn == "" {
			si := s.scrubStandIns[item.ID+"\x00"+string(field)]
			if si == "" || s.bindings[si] != nil {
				si, err = uniqueStandIn(field, real, func(c string) bool { return s.bindings[c] != nil })
				if err != nil {
					return Authorized{}, err
				}
			}
			b.standIn = si
			s.bindings[si] = b
		}
		out.Value, out.StandIn = b.standIn, true
	} else {
		out.Value = string(real.InsecureRawBytes())
	}
	s.addKinds(string(item.Kind))
	settleCVV()
	if item.Kind == vault.KindCard && field == vault.FieldCVV {
		// The report names a released security code on its own (seed 004:
		// ["identity","address","card","cvv"]).
		s.addKinds(string(vault.FieldCVV))
	}
	return out, nil
}
