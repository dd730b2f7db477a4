package intercept

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/vault"
)

// useGrant checks that b may go to the request's destination now, by its
// origins, expiry and use rule (P21), and holds a one-purchase grant for
// the request until substitution.done settles it.
func (ss *Sessions) useGrant(sb *substitution, b *binding) error {
	s := sb.sess
	now := ss.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return agentvault.Errorf(agentvault.CodeSessionEnded, "the session has ended")
	}
	if !b.admits(sb.dest, ss.policy().RegistrableDomain) {
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
	if sb.ws {
		// A WebSocket message has no answer to settle on: the grant is
		// spent by the connection that first carries it.
		b.spent = true
		return nil
	}
	b.inFlight = true
	sb.held = append(sb.held, b)
	return nil
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

// add records that host was sent the value of (item, field). TOTP codes
// change every step and are not kept (the seed never leaves the vault).
func (r *recipients) add(item vault.Item, f vault.Field, host string, raw []byte, live bool) {
	if f == vault.FieldTOTP {
		return
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
	changed := false
	if !rc.hosts[host] {
		rc.hosts[host] = true
		changed = true
	}
	if rc.real.IsZero() {
		rc.real = vault.NewSecret(raw)
		changed = true
	}
	if changed {
		r.ver.Add(1)
	}
}

// load reads the durable record once.
func (ss *Sessions) loadRecipients(ctx context.Context, org string) {
	r := &ss.recipients
	r.mu.RLock()
	done := r.loaded
	r.mu.RUnlock()
	if done {
		return
	}
	rl, ok := ss.Vault.(RecipientLister)
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

// released is a real value with the stand-in a session shows for it.
type released struct {
	real    vault.Secret
	standIn string
	kind    vault.Kind
}

// hostScrub is a session's cached scrubber for one upstream host.
type hostScrub struct {
	sessVer, recVer int64
	sc              *scrubber
}

// scrubberFor returns the scrubber for responses from host in session s:
// every value that host was ever sent (in any session), each replaced by
// this session's stand-in for it; nil when the host was sent nothing, so
// its responses pass byte for byte (P10: no oracle).
func (ss *Sessions) scrubberFor(ctx context.Context, s *Session, host string) *scrubber {
	ss.loadRecipients(ctx, s.Key.Org)
	recVer := ss.recipients.ver.Load()
	s.mu.Lock()
	if c, ok := s.scrubs[host]; ok && c.sessVer == int64(s.version) && c.recVer == recVer {
		s.mu.Unlock()
		return c.sc
	}
	s.mu.Unlock()

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
		sec, err := ss.Vault.Release(ctx, ReleaseArgs{Org: s.Key.Org, ItemID: rc.item.ID, Field: rc.field,
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
	recVer = ss.recipients.ver.Load()

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
	var rel []released
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
		rel = append(rel, released{real: w.real, standIn: si, kind: w.rc.item.Kind})
	}
	sc := newScrubber(rel)
	if s.scrubs == nil {
		s.scrubs = map[string]hostScrub{}
	}
	s.scrubs[host] = hostScrub{sessVer: int64(s.version), recVer: recVer, sc: sc}
	return sc
}
