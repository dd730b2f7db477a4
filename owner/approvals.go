package owner

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/hostname"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/vault"
)

// ApprovalRequest asks the owner a question. Kind and Site are required;
// CardID for purchase and CVV entry; Amount when a total is known; ItemID
// and Page when a fill raised it.
type ApprovalRequest struct {
	Kind   ApprovalKind
	Reason string // policy.Reason for fills ("new_destination", "over_threshold", ...)
	Site   string
	Amount *policy.Amount
	CardID string
	// ItemID and Page say what the fill was about (Approval.ItemID,
	// Approval.Page). They are shown, never part of the dedupe key.
	ItemID   string
	Page     string
	APIKeyID string
	Session  string
	// TTL overrides the service's approval lifetime (bounded by it).
	TTL time.Duration
	// Subject names what a signup approval is about (its signup request):
	// two requests for one site are two questions (seed 004: a second
	// create_login opens a second, unrelated request). For a TOTP
	// replacement it names the capture.
	Subject string
}

// dedupeKey names a request: an identical pending request returns the same
// approval instead of asking the owner twice. A new site is one question
// whoever asks, with whatever item, from whatever page: approving it
// authorizes the site for every item, so a second fill of the site by
// another card or login waits on the same approval, which shows the item
// and page of the fill that raised it. A purchase or a CVV entry belongs to
// its session and card. ItemID and Page are never part of the key.
func (r ApprovalRequest) dedupeKey(org string) string {
	amount := ""
	if r.Amount != nil {
		amount = strconv.FormatInt(r.Amount.Minor, 10) + " " + r.Amount.Currency
	}
	parts := []string{org, string(r.Kind), r.Site}
	switch r.Kind {
	case KindNewDestination:
	case KindSignup:
		parts = append(parts, r.Subject)
	case KindTOTPReplace:
		parts = append(parts, r.ItemID, r.Subject)
	default:
		parts = append(parts, r.Reason, amount, r.CardID, r.APIKeyID, r.Session)
	}
	return strings.Join(parts, "\x1f")
}

// RequestApproval queues a question for the owner, or returns the pending
// one an identical request already queued. A new approval is announced to
// the Notifier in the background.
func (s *Service) RequestApproval(ctx context.Context, r ApprovalRequest) (Approval, error) {
	if !r.Kind.Valid() {
		return Approval{}, agentvault.Errorf(agentvault.CodeInvalidInput, "unknown approval kind")
	}
	site, err := hostname.Site(r.Site)
	if err != nil {
		return Approval{}, err
	}
	r.Site = site
	if (r.Kind == KindPurchase || r.Kind == KindCVVEntry) && r.CardID == "" {
		return Approval{}, agentvault.Errorf(agentvault.CodeInvalidInput, "a purchase or CVV approval names its card")
	}
	if r.Kind == KindTOTPReplace && r.ItemID == "" {
		return Approval{}, agentvault.Errorf(agentvault.CodeInvalidInput, "a TOTP replacement names its login")
	}
	if r.Reason == "" {
		r.Reason = string(r.Kind)
	}
	// Whoever asks, a query or fragment never reaches the store.
	r.Page = policy.ShownPage(r.Page)
	if len(r.Reason) > 64 {
		return Approval{}, agentvault.Errorf(agentvault.CodeInvalidInput, "reason too long")
	}
	ttl := s.ttl
	if r.TTL > 0 && r.TTL < ttl {
		ttl = r.TTL
	}
	now := s.now().UTC()
	a := Approval{
		ID: "apr_" + randomHex(8), Org: s.org, Kind: r.Kind, Reason: r.Reason, Site: r.Site, Amount: r.Amount,
		CardID: r.CardID, ItemID: r.ItemID, Page: r.Page, APIKeyID: r.APIKeyID, Session: r.Session, Created: now, Expires: now.Add(ttl), Status: StatusPending,
	}
	got, created, err := s.st.CreateApproval(ctx, a, r.dedupeKey(s.org), now)
	if err != nil {
		return Approval{}, err
	}
	if created {
		s.log.Info("approval requested", "approval", got.ID, "kind", string(got.Kind), "reason", got.Reason)
		s.notify(EventApprovalRequested, got)
	}
	return got, nil
}

// notify tells the Notifier in the background: a slow webhook must not hold
// up an agent's call, and a failed one is logged (the banner still shows).
func (s *Service) notify(typ string, a Approval) {
	if s.notifier == nil {
		return
	}
	e := Event{Type: typ, Approval: a, DashboardURL: s.dashURL}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
		defer cancel()
		if err := s.notifier.Notify(ctx, e); err != nil {
			s.log.Warn("owner notification failed", "approval", a.ID, "code", string(agentvault.ErrorCode(err)), "err", agentvault.ErrorMessage(err))
		}
	}()
}

// Approval reads one approval, expiring it first when its time has passed.
func (s *Service) Approval(ctx context.Context, id string) (Approval, error) {
	a, err := s.st.GetApproval(ctx, id)
	if err != nil {
		return Approval{}, err
	}
	if a.Org != s.org {
		return Approval{}, agentvault.Errorf(agentvault.CodeNotFound, "no such approval")
	}
	if a.Status == StatusPending && !s.now().Before(a.Expires) {
		if _, err := s.SweepExpired(ctx); err != nil {
			return Approval{}, err
		}
		return s.st.GetApproval(ctx, id)
	}
	return a, nil
}

// Pending lists the approvals waiting for the owner, newest first.
func (s *Service) Pending(ctx context.Context) ([]Approval, error) {
	if _, err := s.SweepExpired(ctx); err != nil {
		return nil, err
	}
	return s.st.ListApprovals(ctx, ApprovalFilter{Org: s.org, Status: StatusPending})
}

// Approvals lists approvals by filter (the org is always the service's).
func (s *Service) Approvals(ctx context.Context, f ApprovalFilter) ([]Approval, error) {
	f.Org = s.org
	return s.st.ListApprovals(ctx, f)
}

// Decide records the owner's answer. Approving a new destination also
// authorizes the site for later fills (in the store's transaction). Waiters in this process wake at once;
// waiters in other processes see it at their next re-read.
func (s *Service) Decide(ctx context.Context, id string, approve bool, by string) (Approval, error) {
	cur, err := s.st.GetApproval(ctx, id)
	if err != nil {
		return Approval{}, err
	}
	if cur.Org != s.org {
		return Approval{}, agentvault.Errorf(agentvault.CodeNotFound, "no such approval")
	}
	status := StatusDenied
	if approve {
		status = StatusApproved
	}
	a, err := s.st.DecideApproval(ctx, id, status, by, s.now().UTC())
	if err == nil && a.Kind == KindTOTPReplace {
		// The staged seed goes in (a yes) or away (a no) before anyone
		// waiting on the answer hears it.
		s.settleStaged(ctx, a)
	}
	s.wake(id)
	if err != nil {
		return a, err
	}
	s.log.Info("approval decided", "approval", a.ID, "kind", string(a.Kind), "status", string(a.Status))
	s.notify(EventApprovalDecided, a)
	return a, nil
}

// SweepExpired marks overdue pending approvals expired and wakes their
// waiters. It returns how many it expired.
func (s *Service) SweepExpired(ctx context.Context) (int, error) {
	exp, err := s.st.ExpireApprovals(ctx, s.now().UTC())
	if err != nil {
		return 0, err
	}
	for _, a := range exp {
		s.wake(a.ID)
	}
	return len(exp), nil
}

// RunSweeper sweeps every interval until ctx ends.
func (s *Service) RunSweeper(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Sweep(ctx)
		}
	}
}

// Sweep expires the approvals past their time and the staged seeds past
// theirs, once (RunSweeper, or a caller's own timer).
func (s *Service) Sweep(ctx context.Context) {
	if _, err := s.SweepExpired(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn("approval sweep failed", "code", string(agentvault.ErrorCode(err)))
	}
	s.sweepStaged(ctx)
}

func (s *Service) subscribe(id string) chan struct{} {
	ch := make(chan struct{})
	s.mu.Lock()
	if s.waiters[id] == nil {
		s.waiters[id] = map[chan struct{}]struct{}{}
	}
	s.waiters[id][ch] = struct{}{}
	s.mu.Unlock()
	return ch
}

func (s *Service) unsubscribe(id string, ch chan struct{}) {
	s.mu.Lock()
	if w := s.waiters[id]; w != nil {
		if _, ok := w[ch]; ok {
			delete(w, ch)
			close(ch)
		}
		if len(w) == 0 {
			delete(s.waiters, id)
		}
	}
	s.mu.Unlock()
}

func (s *Service) wake(id string) {
	s.mu.Lock()
	w := s.waiters[id]
	delete(s.waiters, id)
	s.mu.Unlock()
	for ch := range w {
		close(ch)
	}
}

// WaitApproval returns the approval once it is decided or expired, or as it
// is (still pending) when maxWait passes. A decision in this process wakes
// it through a channel; the store is also re-read every PollEvery so a
// decision taken by another process (or a replica) is seen. ctx ending
// returns the approval as last read with the context's error.
func (s *Service) WaitApproval(ctx context.Context, id string, maxWait time.Duration) (Approval, error) {
	timeout := time.NewTimer(maxWait)
	defer timeout.Stop()
	poll := time.NewTicker(s.poll)
	defer poll.Stop()
	for {
		ch := s.subscribe(id)
		a, err := s.Approval(ctx, id)
		if err != nil || a.Done() {
			s.unsubscribe(id, ch)
			return a, err
		}
		// Wake when the approval expires, too.
		untilExpiry := time.NewTimer(max(a.Expires.Sub(s.now()), 0) + time.Millisecond)
		select {
		case <-ch:
		case <-poll.C:
		case <-untilExpiry.C:
		case <-timeout.C:
			untilExpiry.Stop()
			s.unsubscribe(id, ch)
			return s.Approval(ctx, id)
		case <-ctx.Done():
			untilExpiry.Stop()
			s.unsubscribe(id, ch)
			return a, agentvault.Wrap(agentvault.CodeTimeout, ctx.Err(), "stopped waiting for the owner")
		}
		untilExpiry.Stop()
		s.unsubscribe(id, ch)
	}
}

// Outcome turns a finished approval into the refusal the agent gets, or nil
// when it was approved. Kind-specific codes follow policy.Decision's: a new
// site not approved is destination_unauthorized, a CVV not typed is
// cvv_entry_required, a purchase denied is approval_denied.
func (a Approval) Outcome() error {
	switch a.Status {
	case StatusApproved:
		return nil
	case StatusPending:
		return agentvault.Errorf(agentvault.CodeTimeout, "the owner has not answered yet")
	}
	switch a.Kind {
	case KindNewDestination:
		return agentvault.Errorf(agentvault.CodeDestinationUnauthorized, "the owner did not authorize %s", a.Site)
	case KindCVVEntry:
		return agentvault.Errorf(agentvault.CodeCVVEntryRequired, "the owner did not enter the security code")
	case KindSignup:
		return agentvault.Errorf(agentvault.CodeSignupNotEnabled, "the owner did not approve this signup")
	case KindTOTPReplace:
		if a.Status == StatusDenied {
			return agentvault.Errorf(agentvault.CodeApprovalDenied, "the owner did not approve replacing this login's authenticator secret: the stored one is kept and the new one discarded")
		}
		return agentvault.Errorf(agentvault.CodeApprovalExpired, "the owner did not answer in time: this login's stored authenticator secret is kept and the new one discarded")
	}
	if a.Status == StatusDenied {
		return agentvault.Errorf(agentvault.CodeApprovalDenied, "the owner denied this purchase")
	}
	return agentvault.Errorf(agentvault.CodeApprovalExpired, "the owner did not answer in time")
}

// ---- what a fill decision needs ----

// Grants returns the approved purchase and CVV approvals of one session
// (and key), and its approved destinations, as policy.Args.Approvals.
func (s *Service) Grants(ctx context.Context, apiKeyID, session string) ([]policy.Approval, error) {
	if session == "" {
		return nil, nil
	}
	as, err := s.st.ListApprovals(ctx, ApprovalFilter{Org: s.org, Status: StatusApproved, APIKeyID: apiKeyID, Session: session})
	if err != nil {
		return nil, err
	}
	var out []policy.Approval
	for _, a := range as {
		if g, ok := a.Grant(); ok {
			out = append(out, g)
		}
	}
	return out, nil
}

// Day and Month are the ledger's calendar keys for t in the owner's zone.
func (s *Service) Day(t time.Time) string   { return t.In(s.loc).Format("2006-01-02") }
func (s *Service) Month(t time.Time) string { return t.In(s.loc).Format("2006-01") }

// FillArgs completes a decision's arguments from the store: the authorized
// destinations, the card's rules and spending so far, and the session's
// approvals. The caller sets APIKey, Item, Field, Destination and Total.
func (s *Service) FillArgs(ctx context.Context, a policy.Args, session string) (policy.Args, error) {
	return s.fillArgs(ctx, a, session, false)
}

// fillArgs is FillArgs; for a recheck it reads only what
// policy.Engine.Recheck decides on: no spending (the grant holds its
// reservation), and no destinations or approvals for a login (its gate is
// its scope and the key).
func (s *Service) fillArgs(ctx context.Context, a policy.Args, session string, recheck bool) (policy.Args, error) {
	var err error
	if !recheck || a.Item.Kind != vault.KindLogin {
		if a.AuthorizedDestinations, err = s.AuthorizedDestinations(ctx); err != nil {
			return a, err
		}
		if a.Approvals, err = s.Grants(ctx, a.APIKey.ID, session); err != nil {
			return a, err
		}
	}
	if a.Item.Kind == vault.KindCard {
		p, err := s.CardPolicy(ctx, a.Item.ID)
		if err != nil {
			return a, err
		}
		a.Card = p.Rules
		if p.Currency != "" && !recheck {
			now := s.now()
			if a.SpentToday, a.SpentMonth, err = s.st.Spent(ctx, a.Item.ID, s.Day(now), s.Month(now), p.Currency); err != nil {
				return a, err
			}
		}
	}
	return a, nil
}

// Reserve counts an allowed card charge (policy.Decision.Charge) in the
// ledger under the card's caps. id names the authorization (the session and
// token, or the approval id): reserving it again counts nothing (P18, P20).
func (s *Service) Reserve(ctx context.Context, id, cardID string, charge policy.Amount) error {
	p, err := s.CardPolicy(ctx, cardID)
	if err != nil {
		return err
	}
	return s.reserve(ctx, id, cardID, charge, p.Rules)
}

// reserve is Reserve under the card's rules as the caller just read them.
func (s *Service) reserve(ctx context.Context, id, cardID string, charge policy.Amount, rules policy.CardPolicy) error {
	now := s.now()
	r := policy.Reservation{ID: id, CardID: cardID, Amount: charge, Day: s.Day(now), Month: s.Month(now),
		Caps: policy.Caps{PerPurchase: rules.PerPurchaseCap, Daily: rules.DailyCap, Monthly: rules.MonthlyCap}}
	return s.st.Reserve(ctx, r)
}
