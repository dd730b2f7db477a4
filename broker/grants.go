package broker

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/hostname"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/vault"
)

// Use is one request's (or one WebSocket's) use of grants: the card
// grants it holds in flight until Done settles them on the site's answer.
type Use struct {
	s    *Session
	held []heldGrant
	// WS: the request became a WebSocket; a card grant used in one of its
	// messages is spent at once (a message has no answer to settle on).
	WS bool
}

// heldGrant is a grant a request holds, with its claim in the Store.
type heldGrant struct {
	b     *Grant
	claim string
}

// NewUse starts a request's use of s's grants.
func (s *Session) NewUse() *Use { return &Use{s: s} }

// Done settles the grants the request used: a site that accepted the
// request (2xx or 3xx) spent each card grant on it; any other answer, or
// none (status 0), leaves the grant for a retry until it expires (P21).
func (u *Use) Done(status int) {
	if u == nil || len(u.held) == 0 {
		return
	}
	accepted := status >= 200 && status < 400
	u.s.mu.Lock()
	for _, h := range u.held {
		h.b.inFlight = false
		if accepted {
			h.b.spent = true
		}
	}
	u.s.mu.Unlock()
	if ss := u.s.broker; ss != nil && ss.cfg.Store != nil && !ss.cfg.SingleProcess {
		ss.settle(u.s, u.held, accepted)
	}
	u.held = nil
}

// useGrant checks that b may go to dest now, by its origins, expiry and
// use rule (P21), and holds a one-purchase grant for u until Done.
func (ss *Broker) useGrant(ctx context.Context, u *Use, b *Grant, dest hostname.Origin) error {
	s := u.s
	now := ss.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return agentvault.Errorf(agentvault.CodeSessionEnded, "the session has ended")
	}
	if !b.admits(dest, ss.policy().RegistrableDomain) {
		return agentvault.Errorf(agentvault.CodeDestinationUnauthorized, "this token is not authorized for this destination")
	}
	if now.After(b.expires) {
		return agentvault.Errorf(agentvault.CodeGrantExpired, "the authorization for this value has expired: fill the field again")
	}
	if !b.onePurchase {
		return nil
	}
	if b.spent {
		return agentvault.Errorf(agentvault.CodeGrantUsed, "this card authorization was used for a purchase already: fill the card again for a new one")
	}
	if b.inFlight {
		return agentvault.Errorf(agentvault.CodeGrantInUse, "another request is using this card authorization")
	}
	if ss.cfg.Store != nil && !ss.cfg.SingleProcess {
		// The claim is the Store's: two replicas never both hold it.
		return ss.claim(ctx, u, b, now)
	}
	if u.WS {
		b.spent = true
		return nil
	}
	b.inFlight = true
	u.held = append(u.held, heldGrant{b: b})
	return nil
}

// renewedElsewhere reports, for a grant refused by what this replica holds
// (spent, expired, not for this origin), whether the Store says otherwise:
// an authorize on another replica renews a grant in place, and this
// replica may not have heard of it yet. It re-reads the session once.
func (ss *Broker) renewedElsewhere(ctx context.Context, s *Session, err error) bool {
	if ss.cfg.Store == nil || ss.cfg.SingleProcess {
		return false
	}
	switch agentvault.ErrorCode(err) {
	case agentvault.CodeGrantUsed, agentvault.CodeGrantExpired, agentvault.CodeDestinationUnauthorized:
	default:
		return false
	}
	return ss.refresh(ctx, s) == nil
}

// WireField is one field of the request a release is for, as the proxy's
// body walk visited it (policy.WireField: the wire amount check reads it).
type WireField = policy.WireField

// WireFields reads the fields of the request a release is for: its query
// and body (decompressed), walked by the same function over the same bytes
// as its substitution. Release calls it at most when a card number with an
// approved total is released, so a request that releases none is not
// walked for it. nil: the message has no fields (a WebSocket message).
type WireFields func() ([]WireField, error)

// WireWants reports whether the wire amount check can read anything from
// f (policy.WireRules.Wants): the proxy keeps only those fields.
func (ss *Broker) WireWants(f WireField) bool { return ss.wire.Wants(f) }

// Release is the only way a real value goes on the wire. It checks, in this
// order, and refuses at the first that fails:
//
//   - the grant (P21): its origin, expiry and use rule;
//   - the item as it is now (removed, or its sites edited) and the one
//     scope rule (P2);
//   - the owner's current state (Config.Authorizer's Recheck: a revoked
//     key, a paused card, a removed site);
//   - for a card number authorized for a checkout total, the amounts the
//     request carries (wire, P18): none may exceed the total;
//
// then it releases the value, audited before it is returned (P12), and
// records dest's host as one of its recipients (P10). A refusal writes no
// audit record: nothing was released. The caller wipes the returned bytes.
func (ss *Broker) Release(ctx context.Context, u *Use, b *Grant, dest hostname.Origin, wire WireFields) ([]byte, error) {
	// One decision: the store's read cache is checked once for all of it
	// (vault.ReadScope); a release that starts after the owner's revoke
	// still reads it.
	ctx = vault.WithReadScope(ctx)
	s := u.s
	if ss.listenDown.Load() {
		// Ends on other replicas may have been missed: ask the Store.
		if err := ss.refresh(ctx, s); err != nil {
			return nil, err
		}
	}
	if err := ss.useGrant(ctx, u, b, dest); err != nil {
		if !ss.renewedElsewhere(ctx, s, err) {
			return nil, err
		}
		// Another replica may have renewed the grant (a new authorize)
		// since this one read it: the Store's view decides.
		if err := ss.useGrant(ctx, u, b, dest); err != nil {
			return nil, err
		}
	}
	item, err := ss.cfg.Vault.GetByLabel(ctx, s.Key.Org, b.item.Kind, b.item.Label)
	if err != nil || item.ID != b.item.ID {
		return nil, agentvault.Errorf(agentvault.CodeDestinationUnauthorized, "this value is no longer in the vault")
	}
	if !ss.policy().ScopeAdmits(item, dest.Host) {
		return nil, agentvault.Errorf(agentvault.CodeScopeDenied, "this item may not be used on this destination")
	}
	if err := ss.cfg.Authorizer.Recheck(ctx, policy.Fill{KeyID: s.Key.ID, Session: s.ID, Item: item,
		Field: b.field, Destination: dest.Host}); err != nil {
		return nil, err
	}
	if err := ss.checkWire(s, b, wire); err != nil {
		return nil, err
	}
	var raw []byte
	if b.live {
		v, ok := s.liveValue(b.item.ID, b.field)
		if !ok {
			return nil, agentvault.Errorf(agentvault.CodeSessionEnded, "the typed value is gone")
		}
		if err := ss.auditUse(ctx, s, b.item, b.field, dest.Host, PurposeSubstitute, v); err != nil {
			return nil, err
		}
		raw = append([]byte(nil), v.InsecureRawBytes()...)
	} else {
		sec, err := ss.cfg.Vault.Release(ctx, ReleaseArgs{
			Org: s.Key.Org, ItemID: b.item.ID, Field: b.field, Destination: dest.Host,
			Session: s.ID, Actor: s.Key.ID, Purpose: PurposeSubstitute,
		})
		if err != nil {
			if agentvault.ErrorCode(err) == agentvault.CodeInternal {
				return nil, agentvault.Wrap(agentvault.CodeAuditUnavailable, err, "the release could not be audited")
			}
			return nil, err
		}
		raw = append([]byte(nil), sec.InsecureRawBytes()...)
		sec.Wipe()
	}
	if ss.recipients.add(b.item, b.field, dest.Host, raw, b.live) {
		ss.notifyRecipient(ctx, b.item, b.field, dest.Host)
	}
	if b.field == vault.FieldPassword {
		s.markSignedIn(b.item.ID)
	}
	return raw, nil
}

// checkWire is the wire amount check of a card number's release (P18,
// policy.Engine.CheckWire): the amounts among the request's fields may not
// exceed the total the number's last authorize was decided for. A number
// authorized without a total has nothing to compare with.
func (ss *Broker) checkWire(s *Session, b *Grant, wire WireFields) error {
	if b.item.Kind != vault.KindCard || b.field != vault.FieldNumber {
		return nil
	}
	s.mu.Lock()
	total := b.total
	s.mu.Unlock()
	if total == nil || wire == nil {
		return nil
	}
	fields, err := wire()
	if err != nil {
		return err
	}
	carried := [][]byte{[]byte(b.token)}
	if b.standIn != "" {
		carried = append(carried, []byte(b.standIn))
	}
	return ss.policy().CheckWire(ss.wire, *total, fields, carried...)
}

// recipients is the record, per vault value, of every host it was sent to
// (P10, no oracle): a response is scrubbed of exactly the values its host
// was sent, in any session, so nothing a host gets back depends on a secret
// it never received. The record is durable through the audit log (each
// release on the wire is audited with its destination before it leaves);
// the values themselves are held in memory, re-read from the vault (audited,
// purpose "scrub") after a restart when a recipient host answers.
type recipients struct {
	mu     sync.RWMutex
	loaded bool
	byKey  map[string]*recipient // item id + field
	ver    atomic.Int64
}

type recipient struct {
	item  vault.Item
	field vault.Field
	hosts map[string]bool
	real  vault.Secret // zero until known
	// live values (a CVV the owner typed) are not in the vault: they are
	// kept only while known and cannot be re-read after a restart.
	live bool
}

func recipKey(itemID string, f vault.Field) string { return itemID + "\x00" + string(f) }

// Recipient is one (value, host) pair from the durable record.
type Recipient struct {
	Item  vault.Item
	Field vault.Field
	Host  string
}

// RecipientLister is the durable record of where values went: proxyd's
// vault adapter reads it from the audit log. A Vault without it keeps the
// record in memory only.
type RecipientLister interface {
	Recipients(ctx context.Context, org string) ([]Recipient, error)
}

// add records that host was sent the value of (item, field), and reports
// whether host is a new recipient of it. TOTP codes change every step and
// are not kept (the seed never leaves the vault). raw nil: the value is
// not known here (another replica released it).
func (r *recipients) add(item vault.Item, f vault.Field, host string, raw []byte, live bool) bool {
	if f == vault.FieldTOTP {
		return false
	}
	k := recipKey(item.ID, f)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byKey == nil {
		r.byKey = map[string]*recipient{}
	}
	rc := r.byKey[k]
	if rc == nil {
		rc = &recipient{item: item, field: f, hosts: map[string]bool{}, live: live}
		r.byKey[k] = rc
	}
	changed, newHost := false, false
	if !rc.hosts[host] {
		rc.hosts[host] = true
		changed, newHost = true, true
	}
	if rc.real.IsZero() && raw != nil {
		rc.real = vault.NewSecret(raw)
		changed = true
	}
	if changed {
		r.ver.Add(1)
	}
	return newHost
}

// load reads the durable record once.
func (ss *Broker) loadRecipients(ctx context.Context, org string) {
	r := &ss.recipients
	r.mu.RLock()
	done := r.loaded
	r.mu.RUnlock()
	if done {
		return
	}
	rl, ok := ss.cfg.Vault.(RecipientLister)
	var list []Recipient
	if ok {
		var err error
		if list, err = rl.Recipients(ctx, org); err != nil {
			return // tried again on the next response
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.loaded {
		return
	}
	r.loaded = true
	if r.byKey == nil {
		r.byKey = map[string]*recipient{}
	}
	for _, x := range list {
		if x.Field == vault.FieldTOTP {
			continue
		}
		k := recipKey(x.Item.ID, x.Field)
		rc := r.byKey[k]
		if rc == nil {
			rc = &recipient{item: x.Item, field: x.Field, hosts: map[string]bool{}}
			r.byKey[k] = rc
		}
		rc.hosts[x.Host] = true
	}
	r.ver.Add(1)
}

// ScrubKey changes whenever the values a session must scrub for any host
// may have: the proxy caches a host's scrubber under it.
type ScrubKey struct{ session, recipients int64 }

// ScrubKey returns s's current key, reading the durable recipient record
// once first.
func (ss *Broker) ScrubKey(ctx context.Context, s *Session) ScrubKey {
	ss.loadRecipients(ctx, s.Key.Org)
	s.mu.Lock()
	v := s.version
	s.mu.Unlock()
	return ScrubKey{session: int64(v), recipients: ss.recipients.ver.Load()}
}

// ScrubValue is a real value a response must not carry back, with the
// stand-in the session shows for it.
type ScrubValue struct {
	Real    vault.Secret
	StandIn string
	Kind    vault.Kind
}

// ScrubSet lists what responses from host must not carry back in session
// s: every value that host was ever sent (in any session), each with this
// session's stand-in for it; none when the host was sent nothing, so its
// responses pass byte for byte (P10: no oracle). The Secrets are the
// broker's: the caller copies what it keeps and never wipes them.
func (ss *Broker) ScrubSet(ctx context.Context, s *Session, host string) []ScrubValue {
	ss.loadRecipients(ctx, s.Key.Org)

	// The values this host was sent; any not yet in memory (after a
	// restart) are read again from the vault, audited.
	type want struct {
		rc   *recipient
		real vault.Secret
	}
	var wants []want
	ss.recipients.mu.RLock()
	var missing []*recipient
	for _, rc := range ss.recipients.byKey {
		if !rc.hosts[host] || rc.item.Org != "" && rc.item.Org != s.Key.Org {
			continue
		}
		if rc.real.IsZero() {
			if !rc.live {
				missing = append(missing, rc)
			}
			continue
		}
		wants = append(wants, want{rc, rc.real})
	}
	ss.recipients.mu.RUnlock()
	for _, rc := range missing {
		sec, err := ss.cfg.Vault.Release(ctx, ReleaseArgs{Org: s.Key.Org, ItemID: rc.item.ID, Field: rc.field,
			Destination: host, Session: s.ID, Actor: s.Key.ID, Purpose: PurposeScrub})
		if err != nil {
			continue // removed from the vault, or the audit is down: nothing to scrub with
		}
		ss.recipients.mu.Lock()
		if rc.real.IsZero() {
			rc.real = sec
			ss.recipients.ver.Add(1)
		} else {
			sec.Wipe()
		}
		wants = append(wants, want{rc, rc.real})
		ss.recipients.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	standIns := map[string]string{}
	for _, b := range s.bindings {
		if b.standIn != "" {
			standIns[recipKey(b.item.ID, b.field)] = b.standIn
		}
	}
	var out []ScrubValue
	for _, w := range wants {
		k := recipKey(w.rc.item.ID, w.rc.field)
		si := standIns[k]
		if si == "" {
			si = s.scrubStandIns[k]
		}
		if si == "" {
			var err error
			si, err = uniqueStandIn(w.rc.field, w.real, func(c string) bool { return s.bindings[c] != nil })
			if err != nil {
				continue
			}
			if s.scrubStandIns == nil {
				s.scrubStandIns = map[string]string{}
			}
			s.scrubStandIns[k] = si
		}
		out = append(out, ScrubValue{Real: w.real, StandIn: si, Kind: w.rc.item.Kind})
	}
	return out
}
