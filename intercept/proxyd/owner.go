package proxyd

import (
	"context"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/intercept"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/vault"
	"golang.org/x/net/publicsuffix"
)

// ownerDecider decides an authorize with the owner's rules from the owner
// store: authorized sites, the key's scope, the card's pause, blocks and
// caps, and the session's approvals. A decision that needs the owner files
// an approval request (visible in the dashboard and `proxyd owner pending`)
// and refuses with its code now; the agent retries once the owner said yes.
// An allowed card charge is reserved in the ledger, once per session and
// token (P18, P20).
func ownerDecider(svc *owner.Service) intercept.Decider {
	eng := policy.NewEngine(policy.Rates{}, publicsuffix.EffectiveTLDPlusOne)
	return func(ctx context.Context, a intercept.DecideArgs) error {
		ki := policy.KeyInfo{ID: a.Key.ID, AllCards: true, AllLogins: true}
		if a.Key.ID != DefaultKeyID {
			var err error
			if ki, err = svc.KeyInfo(ctx, a.Key.ID); err != nil {
				return err
			}
		}
		args := policy.Args{APIKey: ki, Item: a.Item, Field: a.Field, Destination: a.Destination}
		if a.Total != nil {
			amt, err := policy.ParseDecimal(a.Total.Amount, a.Total.Currency)
			if err != nil {
				return err
			}
			args.Total = &amt
		}
		filled, err := svc.FillArgs(ctx, args, a.Session)
		if err != nil {
			return err
		}
		d := eng.Decide(ctx, filled)
		if d.Allow {
			if d.Charge != nil && a.Item.Kind == vault.KindCard {
				return svc.Reserve(ctx, a.Session+"/"+a.Token, a.Item.ID, *d.Charge)
			}
			return nil
		}
		if d.NeedsOwner {
			kind := owner.KindPurchase
			switch d.Reason {
			case policy.ReasonNewDestination:
				kind = owner.KindNewDestination
			case policy.ReasonCVVEntry:
				kind = owner.KindCVVEntry
			}
			req := owner.ApprovalRequest{Kind: kind, Reason: string(d.Reason), Site: a.Destination, Amount: args.Total,
				APIKeyID: a.Key.ID, Session: a.Session}
			if a.Item.Kind == vault.KindCard {
				req.CardID = a.Item.ID
			}
			if _, err := svc.RequestApproval(ctx, req); err != nil {
				return err
			}
			return agentvault.Errorf(d.Code, "%s; the owner has been asked", d.Message)
		}
		return d.Err()
	}
}
