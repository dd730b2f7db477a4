package broker

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/vault"
)

// Sessions shared through a SessionStore (several proxyd replicas on one
// Postgres, or one proxyd that restarts on SQLite).
//
// The in-memory Session is a cache. A replica that does not hold a session
// loads it (and its grants) on first use; an authorize reads the session's
// grants again first and writes its grant through before it answers; a
// one-purchase grant is claimed in the Store for each request (ClaimGrant),
// so two replicas never both send it. Every change is announced on the
// Notifier: an ended session is dropped on every replica, a changed grant
// is reloaded where the session is held, a new recipient of a value is
// scrubbed on every replica (P10). When the Notifier lost its listener,
// each release asks the Store whether its session is still open until the
// listener is back (and re-read everything: EventResync).
//
// A claim whose request never settled (its replica died mid-request) is
// not given back when its lease runs out: the request may have reached the
// site, so the grant counts as used and the agent authorizes a new
// purchase, counted against the caps again (P18, P21). Refusing a retry
// costs one more fill; releasing the card twice could cost a second charge.
//
// What stays in one replica's memory: a live CVV the owner typed (the
// replica the dashboard reached keeps it; a request carrying its stand-in
// through another replica is refused: "the typed value is gone"), the
// session's report, a TOTP capture, the "security code owed" bookkeeping
// of a card (another replica asks the owner again: safe side).

// storeTimeout bounds a Store call made on a path without a context.
const storeTimeout = 5 * time.Second

func (ss *Broker) claimLease() time.Duration { return durationOr(ss.cfg.ClaimLease, 2*time.Minute) }

func (ss *Broker) replicaID() string {
	ss.idOnce.Do(func() { ss.id = randomID("b_", 8) })
	return ss.id
}

func storeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), storeTimeout)
}

// lookup returns the session held here, or loads it from the Store; nil
// when it is unknown or ended.
func (ss *Broker) lookup(id string) *Session {
	ss.mu.RLock()
	s := ss.byID[id]
	ss.mu.RUnlock()
	if s != nil || ss.cfg.Store == nil || id == "" {
		return s
	}
	ctx, cancel := storeCtx()
	defer cancel()
	rec, grants, err := ss.cfg.Store.GetSession(ctx, id)
	if err != nil || !rec.Ended.IsZero() {
		return nil
	}
	s = &Session{ID: rec.ID, Key: rec.Key, pwdHash: rec.PwdHash, created: rec.Created, broker: ss,
		bindings: map[string]*Grant{},
		report:   Report{FilledFieldKinds: []string{}, CredentialWrites: []string{}}}
	// Its last use as the replicas recorded it: a session idle everywhere
	// ends at its first use here (Alive), it is not revived by loading.
	s.lastUsed.Store(rec.LastUsed.UnixNano())
	s.storedUse.Store(rec.LastUsed.UnixNano())
	if err := ss.mergeGrants(ctx, s, grants); err != nil {
		return nil
	}
	if ss.cfg.SingleProcess && ss.cfg.UsesLost {
		// Loaded after a crash: the uses were held in memory, so a
		// one-purchase grant may have been in use when the process
		// stopped. It counts as used; the agent fills the card again.
		s.mu.Lock()
		for _, b := range s.bindings {
			if b.onePurchase {
				b.spent = true
			}
		}
		s.mu.Unlock()
	}
	ss.mu.Lock()
	if o := ss.byID[id]; o != nil {
		ss.mu.Unlock()
		return o
	}
	ss.byID[id] = s
	ss.mu.Unlock()
	for _, fn := range ss.onOpen {
		fn(s)
	}
	return s
}

func (ss *Broker) storeCreate(ctx context.Context, s *Session) error {
	if ss.cfg.Store == nil {
		return nil
	}
	now := time.Unix(0, s.lastUsed.Load())
	s.storedUse.Store(now.UnixNano())
	return ss.cfg.Store.CreateSession(ctx, SessionRecord{ID: s.ID, Key: s.Key, PwdHash: s.pwdHash, Created: s.created, LastUsed: now})
}

// storeEnd ends session id in the Store and tells the other replicas.
func (ss *Broker) storeEnd(id, reason string) error {
	if ss.cfg.Store == nil {
		return nil
	}
	ctx, cancel := storeCtx()
	defer cancel()
	if err := ss.cfg.Store.EndSession(ctx, id, reason, ss.now()); err != nil {
		return agentvault.Wrap(agentvault.CodeInternal, err, "the session could not be ended in the store")
	}
	ss.notify(ctx, Event{Type: EventSessionEnded, Session: id})
	return nil
}

// expire handles s past a limit of its own view and reports whether it
// ended. With a Store the idle limit is the Store's: a session idle here
// may be in use on another replica, whose uses reach the Store (storeUses).
func (ss *Broker) expire(s *Session, now time.Time) bool {
	reason := "idle"
	if now.Sub(s.created) > ss.sessionAge() {
		reason = "age"
	}
	if ss.cfg.Store != nil && reason == "idle" {
		ctx, cancel := storeCtx()
		rec, _, err := ss.cfg.Store.GetSession(ctx, s.ID)
		cancel()
		switch {
		case err != nil:
			ss.drop(s) // cannot tell: stop serving it here (fail closed)
			return true
		case !rec.Ended.IsZero():
			ss.drop(s)
			return true
		case now.Sub(rec.LastUsed) <= ss.sessionIdle():
			for {
				old := s.lastUsed.Load()
				if old >= rec.LastUsed.UnixNano() || s.lastUsed.CompareAndSwap(old, rec.LastUsed.UnixNano()) {
					break
				}
			}
			s.storedUse.Store(max(s.storedUse.Load(), rec.LastUsed.UnixNano()))
			return false
		}
	}
	_, _ = ss.end(s.ID, reason)
	return true
}

// storeUses writes each session's last use to the Store when it moved on
// by more than a fraction of the idle limit, so the replicas agree on
// when a session is idle.
func (ss *Broker) storeUses(all []*Session) {
	if ss.cfg.Store == nil {
		return
	}
	step := min(ss.sessionIdle()/4, 30*time.Second).Nanoseconds()
	for _, s := range all {
		used := s.lastUsed.Load()
		if used-s.storedUse.Load() < step {
			continue
		}
		ctx, cancel := storeCtx()
		if ss.cfg.Store.TouchSession(ctx, s.ID, time.Unix(0, used)) == nil {
			s.storedUse.Store(used)
		}
		cancel()
	}
}

// refresh reads s's shared state again: an ended session is dropped
// (CodeSessionEnded), its grants are merged into the cache.
func (ss *Broker) refresh(ctx context.Context, s *Session) error {
	if ss.cfg.Store == nil {
		return nil
	}
	s.stale.Store(false)
	rec, grants, err := ss.cfg.Store.GetSession(ctx, s.ID)
	if errors.Is(err, vault.ErrNotFound) || err == nil && !rec.Ended.IsZero() {
		ss.drop(s)
		return agentvault.Errorf(agentvault.CodeSessionEnded, "the session has ended")
	}
	if err != nil {
		s.stale.Store(true)
		return agentvault.Wrap(agentvault.CodeInternal, err, "the session could not be read from the store")
	}
	return ss.mergeGrants(ctx, s, grants)
}

// syncStale reads s again when another replica changed its grants.
func (s *Session) syncStale() {
	if ss := s.broker; ss != nil && s.stale.Load() {
		ctx, cancel := storeCtx()
		defer cancel()
		_ = ss.refresh(ctx, s) // a failure leaves it stale: tried again on the next request
	}
}

// mergeGrants adopts the Store's view of s's grants. The item of a grant
// new to this replica is read from the vault; a removed one is skipped.
func (ss *Broker) mergeGrants(ctx context.Context, s *Session, grants []GrantRecord) error {
	items := map[string]vault.Item{}
	s.mu.Lock()
	for _, g := range grants {
		if b := s.bindings[g.Token]; b != nil && b.item.ID == g.ItemID {
			items[g.ItemID] = b.item
		}
	}
	s.mu.Unlock()
	for _, g := range grants {
		if _, ok := items[g.ItemID]; ok {
			continue
		}
		it, err := ss.cfg.Vault.GetByLabel(ctx, s.Key.Org, g.Kind, g.Label)
		if err != nil {
			if agentvault.ErrorCode(err) == agentvault.CodeNotFound {
				continue
			}
			return err
		}
		if it.ID == g.ItemID {
			items[g.ItemID] = it
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return agentvault.Errorf(agentvault.CodeSessionEnded, "the session has ended")
	}
	for _, g := range grants {
		if it, ok := items[g.ItemID]; ok {
			s.mergeLocked(g, it)
		}
	}
	s.version++
	return nil
}

// mergeLocked adopts g into s's bindings; s.mu is held.
func (s *Session) mergeLocked(g GrantRecord, item vault.Item) {
	b := s.bindings[g.Token]
	if b == nil || b.item.ID != g.ItemID {
		b = &Grant{token: g.Token, item: item, field: g.Field, live: g.Live, onePurchase: g.OnePurchase}
		s.bindings[g.Token] = b
	}
	if g.StandIn != "" && b.standIn != g.StandIn {
		if b.standIn != "" && s.bindings[b.standIn] == b {
			delete(s.bindings, b.standIn)
		}
		b.standIn = g.StandIn
		s.bindings[g.StandIn] = b
	}
	if g.Purchase < b.purchase {
		return // this replica is ahead: its write is on the way
	}
	if g.Purchase != b.purchase {
		b.inFlight = false
	}
	b.purchase, b.spent = g.Purchase, g.Spent
	b.origins, b.site, b.sitePort = slices.Clone(g.Origins), g.Site, g.SitePort
	b.expires, b.total = g.Expires, g.Total
}

// writeGrant writes the grant an authorize just made or renewed through to
// the Store and adopts what the Store kept (another replica's stand-in for
// the same token wins). On failure the grant is unusable here and the
// authorize fails.
func (ss *Broker) writeGrant(ctx context.Context, s *Session, token string, resp Authorized) (Authorized, error) {
	if ss.cfg.Store == nil {
		return resp, nil
	}
	if ss.cfg.SingleProcess {
		ss.writeBehind(s, token)
		return resp, nil
	}
	s.mu.Lock()
	b := s.bindings[token]
	if b == nil || s.closed {
		s.mu.Unlock()
		return resp, nil
	}
	g := grantRecordLocked(s, token, b)
	item := b.item
	s.mu.Unlock()
	stored, err := ss.cfg.Store.PutGrant(ctx, g)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if b := s.bindings[token]; b != nil {
			b.expires = time.Time{}
			s.version++
		}
		if agentvault.ErrorCode(err) == agentvault.CodeSessionEnded {
			return Authorized{}, err
		}
		return Authorized{}, agentvault.Wrap(agentvault.CodeInternal, err, "the grant could not be stored")
	}
	s.mergeLocked(stored, item)
	s.version++
	if resp.StandIn {
		resp.Value = stored.StandIn
	}
	s.mu.Unlock()
	ss.notifyAndHear(ctx, Event{Type: EventGrant, Session: s.ID})
	s.mu.Lock()
	return resp, nil
}

// grantRecordLocked is b as the Store keeps it; s.mu must be held.
func grantRecordLocked(s *Session, token string, b *Grant) GrantRecord {
	return GrantRecord{Session: s.ID, Token: token, StandIn: b.standIn, ItemID: b.item.ID, Kind: b.item.Kind,
		Label: b.item.Label, Field: b.field, Live: b.live, Origins: slices.Clone(b.origins), Site: b.site,
		SitePort: b.sitePort, Expires: b.expires, OnePurchase: b.onePurchase, Purchase: b.purchase,
		Spent: b.spent, Total: b.total}
}

// writeBehind marks the grant of token in s to be written to the Store
// within GrantWriteBehind (SingleProcess). Nobody else reads the Store while
// this process runs: it holds the grants in memory, and the Store keeps
// them only for the next process. A grant that a crash keeps from being
// written is simply gone after the restart, and the agent fills the field
// again: it never lets a value go anywhere the memory copy would not (and
// after a crash a one-purchase grant counts as used anyway: UsesLost).
// A clean stop writes every grant still waiting (CloseAll).
func (ss *Broker) writeBehind(s *Session, token string) {
	ss.behindMu.Lock()
	defer ss.behindMu.Unlock()
	if ss.behind == nil {
		ss.behind = map[*Session]map[string]bool{}
	}
	toks := ss.behind[s]
	if toks == nil {
		toks = map[string]bool{}
		ss.behind[s] = toks
	}
	toks[token] = true
	if ss.behindTimer == nil {
		ss.behindTimer = time.AfterFunc(durationOr(ss.cfg.GrantWriteBehind, time.Second), ss.flushGrants)
	}
}

// flushGrants writes the grants waiting on writeBehind, as they are now,
// in one commit when the Store can (GrantBatchWriter). Flushes run one at
// a time, so a grant's later state is never overwritten by an earlier one.
// A grant of a session that has ended since is not written.
func (ss *Broker) flushGrants() {
	ss.flushMu.Lock()
	defer ss.flushMu.Unlock()
	ss.behindMu.Lock()
	pending := ss.behind
	ss.behind = nil
	if ss.behindTimer != nil {
		ss.behindTimer.Stop()
		ss.behindTimer = nil
	}
	ss.behindMu.Unlock()
	if len(pending) == 0 || ss.cfg.Store == nil {
		return
	}
	var recs []GrantRecord
	for s, toks := range pending {
		s.mu.Lock()
		if !s.closed {
			for tok := range toks {
				if b := s.bindings[tok]; b != nil {
					recs = append(recs, grantRecordLocked(s, tok, b))
				}
			}
		}
		s.mu.Unlock()
	}
	ctx, cancel := storeCtx()
	defer cancel()
	if bw, ok := ss.cfg.Store.(GrantBatchWriter); ok {
		_ = bw.PutGrants(ctx, recs)
		return
	}
	for _, g := range recs {
		_, _ = ss.cfg.Store.PutGrant(ctx, g)
	}
}

// An authorize waits for its EventGrant to be heard back and acknowledged,
// checking every echoWait for replicas that went silent, at most echoMax.
const (
	echoWait = 250 * time.Millisecond
	echoMax  = 5 * time.Second
)

// helloEvery is how often a listening replica says so; a replica not heard
// for peerGone is not waited for (it stopped, or lost its listener and
// re-reads everything when it is back: EventResync).
const (
	helloEvery = time.Second
	peerGone   = 3 * helloEvery
)

// echoWaiter is one authorize's wait: for its own event to come back and for
// every other listening replica to acknowledge it.
type echoWaiter struct {
	self    bool
	pending map[string]bool
	done    chan struct{}
}

func (w *echoWaiter) check() {
	if w.self && len(w.pending) == 0 && w.done != nil {
		close(w.done)
		w.done = nil
	}
}

// notifyAndHear sends ev and waits (at most echoWait) until this broker's
// own listener heard it back and every other replica heard lately
// acknowledged it (EventAck, sent after the replica marked the session to
// be read again). So when the authorize answers, the browser's request
// carrying the stand-in finds the grant on whichever replica it reaches.
// Without a listener it does not wait.
func (ss *Broker) notifyAndHear(ctx context.Context, ev Event) {
	if ss.cfg.Notifier == nil {
		return
	}
	if !ss.listening.Load() {
		ss.notify(ctx, ev)
		return
	}
	ev.Echo = randomID("e_", 8)
	done := make(chan struct{})
	w := &echoWaiter{pending: map[string]bool{}, done: done}
	now := time.Now()
	ss.echoMu.Lock()
	if ss.echoes == nil {
		ss.echoes = map[string]*echoWaiter{}
	}
	for id, at := range ss.peers {
		if now.Sub(at) < peerGone {
			w.pending[id] = true
		} else {
			delete(ss.peers, id)
		}
	}
	ss.echoes[ev.Echo] = w
	ss.echoMu.Unlock()
	defer func() {
		ss.echoMu.Lock()
		delete(ss.echoes, ev.Echo)
		ss.echoMu.Unlock()
	}()
	ss.notify(ctx, ev)
	// A replica that stays silent (no hello since peerGone) has stopped:
	// it is not waited for. One that is alive but slow is, up to echoMax;
	// past it the authorize answers anyway and the miss is counted.
	deadline := time.NewTimer(echoMax)
	defer deadline.Stop()
	tick := time.NewTicker(echoWait)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-deadline.C:
			ss.ackMisses.Add(1)
			return
		case <-tick.C:
			now := time.Now()
			ss.echoMu.Lock()
			for id := range w.pending {
				if now.Sub(ss.peers[id]) >= peerGone {
					delete(w.pending, id)
				}
			}
			w.check()
			ss.echoMu.Unlock()
		}
	}
}

// AckMisses counts the authorizes that answered before every listening
// replica acknowledged their grant (echoMax passed): a request carrying
// such a stand-in may reach a replica that does not know it yet.
func (ss *Broker) AckMisses() int64 { return ss.ackMisses.Load() }

// heard records that replica from is listening.
func (ss *Broker) heard(from string) {
	if from == "" {
		return
	}
	ss.echoMu.Lock()
	if ss.peers == nil {
		ss.peers = map[string]time.Time{}
	}
	ss.peers[from] = time.Now()
	ss.echoMu.Unlock()
}

// hello says this replica listens, every helloEvery until ctx ends.
func (ss *Broker) hello(ctx context.Context) {
	t := time.NewTicker(helloEvery)
	defer t.Stop()
	for {
		if ss.listening.Load() {
			ss.notify(ctx, Event{Type: EventHello})
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// claim takes one-purchase grant b for u in the Store; s.mu is held on
// entry and on return, released during the Store call.
func (ss *Broker) claim(ctx context.Context, u *Use, b *Grant, now time.Time) error {
	s := u.s
	purchase := b.purchase
	b.inFlight = true
	s.mu.Unlock()
	id := randomID("c_", 8)
	err := ss.cfg.Store.ClaimGrant(ctx, ClaimArgs{Session: s.ID, Token: b.token, Claim: id, Purchase: purchase,
		Now: now, Until: now.Add(ss.claimLease()), Spend: u.WS})
	s.mu.Lock()
	b.inFlight = false
	if err != nil {
		if agentvault.ErrorCode(err) == agentvault.CodeGrantUsed && b.purchase == purchase {
			b.spent = true
		}
		if agentvault.ErrorCode(err) == "" {
			err = agentvault.Wrap(agentvault.CodeInternal, err, "the card authorization could not be claimed")
		}
		return err
	}
	if s.closed {
		go ss.settle(s, []heldGrant{{b: b, claim: id}}, false)
		return agentvault.Errorf(agentvault.CodeSessionEnded, "the session has ended")
	}
	if u.WS {
		b.spent = true
		go ss.notify(context.Background(), Event{Type: EventGrant, Session: s.ID})
		return nil
	}
	b.inFlight = true
	u.held = append(u.held, heldGrant{b: b, claim: id})
	return nil
}

// settle ends the Store claims a request held: spent when the site
// accepted it. A settle that fails leaves the claim to its lease, after
// which the grant counts as used (fail closed).
func (ss *Broker) settle(s *Session, held []heldGrant, spent bool) {
	ctx, cancel := storeCtx()
	defer cancel()
	for _, h := range held {
		if h.claim == "" {
			continue
		}
		_ = ss.cfg.Store.SettleGrant(ctx, SettleArgs{Session: s.ID, Token: h.b.token, Claim: h.claim, Spent: spent})
	}
	if spent {
		ss.notify(ctx, Event{Type: EventGrant, Session: s.ID})
	}
}

func (ss *Broker) notify(ctx context.Context, ev Event) {
	if ss.cfg.Notifier == nil {
		return
	}
	ev.From = ss.replicaID()
	_ = ss.cfg.Notifier.Notify(ctx, ev) // a lost event is repaired by the receivers' resync
}

// notifyRecipient tells the other replicas that host was sent the value
// of (item, f), so they scrub it from host's responses too (P10). The
// record is durable already: the release was audited first.
func (ss *Broker) notifyRecipient(ctx context.Context, item vault.Item, f vault.Field, host string) {
	ss.notify(ctx, Event{Type: EventRecipient, Org: item.Org, ItemID: item.ID, Kind: string(item.Kind),
		Label: item.Label, Field: string(f), Host: host})
}

// Listen applies the other replicas' Events until ctx ends; ready is
// closed once the Notifier listens. Without a Notifier it returns at once.
func (ss *Broker) Listen(ctx context.Context, ready chan<- struct{}) {
	if ss.cfg.Notifier == nil {
		if ready != nil {
			close(ready)
		}
		return
	}
	if !ss.cfg.SingleProcess {
		// Alone on its store, there is nobody to tell.
		go ss.hello(ctx)
	}
	ss.cfg.Notifier.Listen(ctx, ready, ss.HandleEvent)
}

// HandleEvent applies one Event from another replica (or the Notifier's
// own EventResync and EventDisconnected).
func (ss *Broker) HandleEvent(ev Event) {
	if ev.From != "" && ev.From == ss.replicaID() {
		if ev.Echo != "" && ev.Type != EventAck {
			ss.echoMu.Lock()
			if w := ss.echoes[ev.Echo]; w != nil {
				w.self = true
				w.check()
			}
			ss.echoMu.Unlock()
		}
		return
	}
	ss.heard(ev.From)
	held := func(id string) *Session {
		ss.mu.RLock()
		defer ss.mu.RUnlock()
		return ss.byID[id]
	}
	ctx, cancel := storeCtx()
	defer cancel()
	switch ev.Type {
	case EventSessionEnded:
		if s := held(ev.Session); s != nil {
			ss.drop(s)
		}
	case EventGrant:
		// Marked at once, read on the session's next request or authorize:
		// the window in which a request here misses a grant made on another
		// replica is the notification's delivery, not a store read.
		if s := held(ev.Session); s != nil {
			s.stale.Store(true)
		}
		if ev.Echo != "" {
			// Marked: the sender's authorize may answer. Sent from its own
			// goroutine so the listener goes on with the next event.
			go ss.notify(context.Background(), Event{Type: EventAck, Echo: ev.Echo})
		}
	case EventAck:
		ss.echoMu.Lock()
		if w := ss.echoes[ev.Echo]; w != nil {
			delete(w.pending, ev.From)
			w.check()
		}
		ss.echoMu.Unlock()
	case EventHello:
		// heard above
	case EventRecipient:
		it, err := ss.cfg.Vault.GetByLabel(ctx, ev.Org, vault.Kind(ev.Kind), ev.Label)
		if err != nil || it.ID != ev.ItemID || ev.Host == "" {
			return // removed since: nothing to scrub with
		}
		f := vault.Field(ev.Field)
		ss.recipients.add(it, f, ev.Host, nil, isLiveCVV(it, f))
	case EventDisconnected:
		ss.listenDown.Store(true)
		ss.listening.Store(false)
	case EventResync:
		ss.mu.RLock()
		all := make([]*Session, 0, len(ss.byID))
		for _, s := range ss.byID {
			all = append(all, s)
		}
		ss.mu.RUnlock()
		for _, s := range all {
			if err := ss.refresh(ctx, s); err != nil && agentvault.ErrorCode(err) != agentvault.CodeSessionEnded {
				ss.drop(s)
			}
		}
		// Recipients: the audit log is read again on the next response.
		r := &ss.recipients
		r.mu.Lock()
		r.loaded = false
		r.mu.Unlock()
		ss.listenDown.Store(false)
		ss.listening.Store(true)
	}
}

// keepUses writes, for a process whose uses were held in memory
// (SingleProcess), which one-purchase grants of s are spent, so the next
// process does not release them again. A grant still in use counts as
// spent (the site may have it). Called at shutdown, before s is dropped.
func (ss *Broker) keepUses(s *Session) {
	if !ss.cfg.SingleProcess || ss.cfg.Store == nil {
		return
	}
	type use struct {
		token    string
		purchase int
	}
	var spent []use
	s.mu.Lock()
	seen := map[*Grant]bool{}
	for _, b := range s.bindings {
		if seen[b] || !b.onePurchase || !(b.spent || b.inFlight) {
			continue
		}
		seen[b] = true
		spent = append(spent, use{b.token, b.purchase})
	}
	s.mu.Unlock()
	ctx, cancel := storeCtx()
	defer cancel()
	now := ss.now()
	for _, u := range spent {
		_ = ss.cfg.Store.ClaimGrant(ctx, ClaimArgs{Session: s.ID, Token: u.token, Claim: randomID("c_", 8),
			Purchase: u.purchase, Now: now, Until: now, Spend: true})
	}
}
