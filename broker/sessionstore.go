package broker

import (
	"context"
	"github.com/agentvault/agentvault"
	"sync"
	"time"

	"github.com/agentvault/agentvault/hostname"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/vault"
)

// SessionStore keeps proxy sessions and their grants where every proxyd
// replica sees them (store/postgres; store/sqlite so a restarted proxyd
// keeps its sessions). The broker's in-memory Session is a cache of it:
// a replica that does not hold a session loads it on first use, so a
// browser moved to another replica keeps its grants. Contract:
// broker/sessionstoretest.
//
// Never stored: a live CVV the owner typed (it stays in the memory of the
// replica that received it), the session's report, its TOTP capture.
type SessionStore interface {
	// CreateSession records a new session (CodeConflict for a known id).
	CreateSession(ctx context.Context, r SessionRecord) error
	// GetSession returns a session, ended or not, with the grants of an
	// open one; vault.ErrNotFound for an unknown id.
	GetSession(ctx context.Context, id string) (SessionRecord, []GrantRecord, error)
	// EndSession marks a session ended (the first end and its reason are
	// kept) and drops its grants. Ending an ended session is not an error.
	EndSession(ctx context.Context, id, reason string, at time.Time) error
	// TouchSession raises the session's last use to at (never lowers it).
	TouchSession(ctx context.Context, id string, at time.Time) error
	// PutGrant writes an authorize's grant and returns it as stored. A
	// grant of the same purchase keeps its stand-in (the first writer's),
	// spent flag and claim; a higher purchase number starts a fresh use
	// (not spent, not claimed); a lower one (a replica's stale view) never
	// rolls the stored purchase back. CodeSessionEnded for an ended or
	// unknown session.
	PutGrant(ctx context.Context, g GrantRecord) (GrantRecord, error)
	// ClaimGrant takes a one-purchase grant for one request, atomically
	// across replicas (the use rule, P21): CodeGrantInUse while another
	// claim's lease runs; CodeGrantUsed when it is spent, when its purchase
	// is not a.Purchase any more, or when a claim's lease ran out without
	// a settle (the request may have reached the site: the outcome is
	// unknown, so the grant is never released again); CodeSessionEnded for
	// an ended session or a grant that is gone.
	ClaimGrant(ctx context.Context, a ClaimArgs) error
	// SettleGrant ends claim a.Claim: spent (the site accepted the request)
	// or free again for a retry. A claim that is not current changes
	// nothing.
	SettleGrant(ctx context.Context, a SettleArgs) error
	// PurgeSessions deletes, with their grants, the sessions that ended
	// before a.EndedBefore, were last used before a.UsedBefore or were
	// created before a.CreatedBefore, and says how many went. The broker
	// only passes times past which no session can be served again, so a
	// purged id reads as unknown exactly where it read as ended.
	PurgeSessions(ctx context.Context, a PurgeArgs) (int64, error)
	// CountOpenSessions counts the sessions of API key keyID that have not
	// ended, were last used at or after usedSince and created at or after
	// createdSince: the key's open sessions on every replica.
	CountOpenSessions(ctx context.Context, keyID string, usedSince, createdSince time.Time) (int, error)
}

// PurgeArgs are PurgeSessions's cut-offs.
type PurgeArgs struct {
	EndedBefore, UsedBefore, CreatedBefore time.Time
}

// SessionRecord is a session as the store keeps it: the proxy password
// only as its SHA-256.
type SessionRecord struct {
	ID       string
	Key      APIKey
	PwdHash  [32]byte
	Created  time.Time
	LastUsed time.Time
	// Ended is zero while the session is open.
	Ended     time.Time
	EndReason string
}

// GrantRecord is a grant as the store keeps it. The item is named by id,
// kind and label; a replica loading the grant reads it again from the
// vault (a removed item drops the grant).
type GrantRecord struct {
	Session     string
	Token       string
	StandIn     string
	ItemID      string
	Kind        vault.Kind
	Label       string
	Field       vault.Field
	Live        bool
	Origins     []hostname.Origin
	Site        string
	SitePort    int
	Expires     time.Time
	OnePurchase bool
	Purchase    int
	Spent       bool
	Total       *policy.Amount
}

// ClaimArgs names one request's claim of a one-purchase grant. Now is the
// broker's clock; the claim's lease runs until Until. Spend (a WebSocket
// message: no answer to settle on) spends the grant at once.
type ClaimArgs struct {
	Session, Token, Claim string
	Purchase              int
	Now, Until            time.Time
	Spend                 bool
}

// SettleArgs ends a claim.
type SettleArgs struct {
	Session, Token, Claim string
	Spent                 bool
}

// Event tells the other replicas that shared session state changed. It
// carries names only, never a value.
type Event struct {
	Type EventType `json:"t"`
	From string    `json:"f,omitempty"` // the sending broker
	// Echo names an event its sender waits to hear back (EventGrant).
	Echo    string `json:"e,omitempty"`
	Session string `json:"s,omitempty"`
	// A new recipient (EventRecipient): the item, field and host.
	Org    string `json:"o,omitempty"`
	ItemID string `json:"i,omitempty"`
	Kind   string `json:"k,omitempty"`
	Label  string `json:"l,omitempty"`
	Field  string `json:"d,omitempty"`
	Host   string `json:"h,omitempty"`
}

// EventType says what changed.
type EventType string

const (
	// EventSessionEnded: the session ended; drop it and its grants.
	EventSessionEnded EventType = "end"
	// EventGrant: a grant of the session changed; reload it.
	EventGrant EventType = "grant"
	// EventRecipient: a value went to a host (P10): scrub it from there.
	EventRecipient EventType = "recipient"
	// EventResync is delivered by a Notifier after it (re)connected: events
	// may have been missed, so re-read everything shared.
	EventResync EventType = "resync"
	// EventDisconnected is delivered when the Notifier lost its listener:
	// until the next EventResync the broker checks the store before every
	// release instead of trusting its cache.
	EventDisconnected EventType = "disconnected"
	// EventAck: a replica applied the EventGrant whose Echo it names.
	EventAck EventType = "ack"
	// EventHello: a replica is listening (sent every helloEvery), so an
	// authorize knows whose acknowledgements to wait for.
	EventHello EventType = "hello"
)

// Notifier carries Events between replicas (Postgres LISTEN/NOTIFY; in
// one process, LocalNotifier).
type Notifier interface {
	Notify(ctx context.Context, ev Event) error
	// Listen delivers events until ctx ends, reconnecting as needed: an
	// EventResync after each (re)connection, EventDisconnected when it
	// lost one. ready is closed once the first connection listens.
	Listen(ctx context.Context, ready chan<- struct{}, fn func(Event))
}

// LocalNotifier fans events out to every listener in this process (one
// SQLite file served by one proxyd; tests running several brokers).
type LocalNotifier struct {
	mu   sync.Mutex
	subs map[int]func(Event)
	next int
}

// Notify delivers ev to every listener before returning.
func (n *LocalNotifier) Notify(_ context.Context, ev Event) error {
	n.mu.Lock()
	fns := make([]func(Event), 0, len(n.subs))
	for _, fn := range n.subs {
		fns = append(fns, fn)
	}
	n.mu.Unlock()
	for _, fn := range fns {
		fn(ev)
	}
	return nil
}

// Listen delivers events until ctx ends.
func (n *LocalNotifier) Listen(ctx context.Context, ready chan<- struct{}, fn func(Event)) {
	n.mu.Lock()
	if n.subs == nil {
		n.subs = map[int]func(Event){}
	}
	id := n.next
	n.next++
	n.subs[id] = fn
	n.mu.Unlock()
	if ready != nil {
		close(ready)
	}
	<-ctx.Done()
	n.mu.Lock()
	delete(n.subs, id)
	n.mu.Unlock()
}

var _ Notifier = (*LocalNotifier)(nil)

// The use rule's transitions (P21), one home for every SessionStore: a
// store reads a grant's state, applies these and writes the result in one
// transaction.

// GrantBatchWriter is a SessionStore that writes many grants in one
// durable commit. A SingleProcess broker writes its grants behind the
// authorizes that made them, in batches, through it when the Store has it.
type GrantBatchWriter interface {
	PutGrants(ctx context.Context, gs []GrantRecord) error
}

// NextGrant is what PutGrant stores when in is written over old (nil: no
// grant yet), and whether the grant's claim is cleared (a new purchase).
func NextGrant(old *GrantRecord, in GrantRecord) (out GrantRecord, newUse bool) {
	if old == nil {
		in.Spent = false
		return in, true
	}
	switch {
	case in.Purchase < old.Purchase:
		return *old, false // a stale view never rolls a purchase back
	case in.Purchase > old.Purchase:
		in.Spent, newUse = false, true
	default:
		in.Spent = old.Spent
	}
	if old.StandIn != "" {
		in.StandIn = old.StandIn // the first writer's stand-in: the one typed
	}
	return in, newUse
}

// ClaimState is a one-purchase grant's use state in a store.
type ClaimState struct {
	Purchase int
	Spent    bool
	Claim    string
	Until    time.Time
}

// Decide decides a ClaimGrant over st and returns the state to store (even
// with an error: a lease that ran out marks the grant spent).
func (st ClaimState) Decide(a ClaimArgs) (ClaimState, error) {
	if st.Spent || st.Purchase != a.Purchase {
		return st, errGrantUsed()
	}
	if st.Claim != "" {
		if a.Now.Before(st.Until) {
			return st, agentvault.Errorf(agentvault.CodeGrantInUse, "another request is using this card authorization")
		}
		// The request that claimed it may have reached the site.
		st.Spent = true
		return st, errGrantUsed()
	}
	if a.Spend {
		st.Spent = true
		return st, nil
	}
	st.Claim, st.Until = a.Claim, a.Until
	return st, nil
}

// Settle ends claim a.Claim; another claim is left as it is.
func (st ClaimState) Settle(a SettleArgs) ClaimState {
	if st.Claim == "" || st.Claim != a.Claim {
		return st
	}
	st.Claim, st.Until = "", time.Time{}
	st.Spent = st.Spent || a.Spent
	return st
}

func errGrantUsed() error {
	return agentvault.Errorf(agentvault.CodeGrantUsed, "this card authorization was used for a purchase already: fill the card again for a new one")
}
