package owner

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/vault"
)

// Authorize decides a fill end to end (policy.Authorizer, asked by the
// broker before it makes a grant): it re-reads the key (a revocation or a scope change applies at
// once), loads the owner's rules, destinations, spending and this session's
// approvals, asks the engine, and then
//
//   - on Allow, for a card number with a charge, reserves the charge in the
//     ledger (once per session, card and total: a retried call is decided
//     without its own charge and spends nothing more) and returns nil;
//   - on NeedsOwner, queues (or finds) the approval and returns an error
//     with CodeApprovalPending whose chain holds a *Pending (PendingOf);
//   - otherwise returns the engine's refusal.
func (s *Service) Authorize(ctx context.Context, r policy.Fill) error {
	args, err := s.fillRequestArgs(ctx, r, false)
	if err != nil {
		return err
	}
	d := s.engine.Decide(ctx, args)
	if !d.Allow && !d.NeedsOwner && r.Field == vault.FieldNumber && r.Total != nil {
		// Perhaps a retried call, whose charge is already in the ledger:
		// decide as the first call did, without counting it against
		// itself. The spending only enters the decision through the caps,
		// and less spent never turns an allowed purchase into a refusal,
		// so only a refusal needs the ledger's entry (one read fewer on
		// every purchase).
		prev, err := s.st.GetReservation(ctx, ReservationID(reservationScope(r), r.Item.ID, *r.Total))
		switch {
		case err == nil && prev.Amount.Currency == args.SpentToday.Currency:
			args.SpentToday.Minor = max(args.SpentToday.Minor-prev.Amount.Minor, 0)
			args.SpentMonth.Minor = max(args.SpentMonth.Minor-prev.Amount.Minor, 0)
			d = s.engine.Decide(ctx, args)
		case err != nil && !errors.Is(err, vault.ErrNotFound):
			return err
		}
	}
	switch {
	case d.Allow:
		if r.Field == vault.FieldNumber && d.Charge != nil && r.Total != nil && r.Item.Kind == vault.KindCard {
			if err := s.reserve(ctx, ReservationID(reservationScope(r), r.Item.ID, *r.Total), r.Item.ID, *d.Charge, args.Card); err != nil {
				s.refused(ctx, r, d.Site, err)
				return err
			}
		}
		return nil
	case !d.NeedsOwner:
		err := d.Err()
		s.refused(ctx, r, d.Site, err)
		return err
	}
	req := ApprovalRequest{Reason: string(d.Reason), Site: d.Site, APIKeyID: r.KeyID, Session: r.Session,
		ItemID: r.Item.ID, Page: r.Page}
	switch d.Reason {
	case policy.ReasonNewDestination:
		req.Kind = KindNewDestination
	case policy.ReasonCVVEntry:
		req.Kind, req.CardID = KindCVVEntry, r.Item.ID
	default:
		req.Kind, req.CardID, req.Amount = KindPurchase, r.Item.ID, r.Total
	}
	a, err := s.RequestApproval(ctx, req)
	if err != nil {
		return err
	}
	return agentvault.Wrap(agentvault.CodeApprovalPending, &Pending{Approval: a, Code: d.Code}, "waiting for the owner (%s)", d.Reason)
}

// fillRequestArgs reads the key (a revocation or a scope change applies at
// once) and completes the engine's arguments from the store, for Authorize
// and Recheck; without an engine there is nothing to decide with.
func (s *Service) fillRequestArgs(ctx context.Context, r policy.Fill, recheck bool) (policy.Args, error) {
	if s.engine == nil {
		return policy.Args{}, agentvault.Errorf(agentvault.CodeInternal, "no policy engine configured")
	}
	key, err := s.KeyInfo(ctx, r.KeyID)
	if err != nil {
		return policy.Args{}, err
	}
	return s.fillArgs(ctx, policy.Args{APIKey: key, Item: r.Item, Field: r.Field, Destination: r.Destination, Total: r.Total, CVVAgain: r.CVVAgain}, r.Session, recheck)
}

// Recheck is asked before every release of a granted value on the wire
// (policy.Authorizer, P21): the key must still be valid and see the item, the card not paused
// or blocked for the merchant, and the destination still authorized. It
// reads the owner's current state, so a revoke, a pause or a removed site
// stops the very next release. It queues nothing and spends nothing.
func (s *Service) Recheck(ctx context.Context, r policy.Fill) error {
	args, err := s.fillRequestArgs(ctx, r, true)
	if err != nil {
		return err
	}
	return s.engine.Recheck(args)
}

// reservationScope is the part of a reservation id that names the grant:
// the session, and after the first purchase its number.
func reservationScope(r policy.Fill) string {
	if r.Purchase == 0 {
		return r.Session
	}
	return r.Session + "#" + strconv.Itoa(r.Purchase)
}

// ReservationID names the authorization a charge belongs to: one session,
// one card, one checkout total (as the page showed it).
func ReservationID(session, cardID string, charge policy.Amount) string {
	return session + "|" + cardID + "|" + charge.Decimal() + " " + charge.Currency
}

// Pending is the cause inside a CodeApprovalPending error.
type Pending struct {
	Approval Approval
	// Code is the refusal the fill gets if the owner does not say yes in
	// time (policy.Decision.Code).
	Code agentvault.Code
}

func (p *Pending) Error() string { return "waiting for approval " + p.Approval.ID }

// PendingOf finds the approval a refused fill waits on.
func PendingOf(err error) (Approval, bool) {
	var p *Pending
	if !errors.As(err, &p) {
		return Approval{}, false
	}
	return p.Approval, true
}

// refused records a refusal for the Activity page. The refusal stands
// whether or not the record is written; a failed write is logged.
func (s *Service) refused(ctx context.Context, r policy.Fill, site string, cause error) {
	code := agentvault.ErrorCode(cause)
	if code == agentvault.CodeInternal || code == agentvault.CodeTimeout {
		return // not a rule's refusal
	}
	if site == "" {
		site = r.Destination
	}
	err := s.st.AppendRefusal(ctx, Refusal{Org: s.org, Time: s.now().UTC(), APIKeyID: r.KeyID, Session: r.Session, ItemID: r.Item.ID,
		Kind: string(r.Item.Kind), Field: string(r.Field), Site: site, Code: string(code)})
	if err != nil {
		s.log.Warn("could not record a refusal", "code", string(agentvault.ErrorCode(err)))
	}
}

// Refusals lists refused fills since a time, newest first.
func (s *Service) Refusals(ctx context.Context, since time.Time, limit int) ([]Refusal, error) {
	return s.st.ListRefusals(ctx, s.org, since, limit)
}

var _ policy.Authorizer = (*Service)(nil)
