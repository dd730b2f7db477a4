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

// ownerDecider decides an authorize with owner.Service.Authorize: the
// owner's authorized sites, the key's scope (re-read, so a revocation
// applies at once), the card's pause, blocks and caps, and the session's
// approvals. A decision that needs the owner queues an approval and fails
// with approval_pending; the control API answers it with 202 and the agent
// waits on /v1/waits/{id}. An allowed card charge is reserved once per
// session, card and total (P18, P20).
func ownerDecider(svc *owner.Service) intercept.Decider {
	return func(ctx context.Context, a intercept.DecideArgs) error {
		var total *policy.Amount
		if a.Total != nil {
			t, err := policy.ParseDecimal(a.Total.Amount, a.Total.Currency)
			if err != nil {
				return err
			}
			total = &t
		}
		keyID := a.Key.ID
		if keyID == DefaultKeyID {
			// The default key lives in a file, not in the owner store: decide
			// with an all-items key of that id.
			return defaultKeyDecide(ctx, svc, a, total)
		}
		return svc.Authorize(ctx, owner.FillRequest{KeyID: keyID, Session: a.Session, Item: a.Item,
			Field: a.Field, Destination: a.Destination, Total: total})
	}
}

// defaultKeyDecide runs the engine for the file-based default key with the
// owner's rules filled in from the store.
func defaultKeyDecide(ctx context.Context, svc *owner.Service, a intercept.DecideArgs, total *policy.Amount) error {
	eng := policy.NewEngine(policy.Rates{}, publicsuffix.EffectiveTLDPlusOne)
	args := policy.Args{APIKey: policy.KeyInfo{ID: a.Key.ID, AllCards: true, AllLogins: true},
		Item: a.Item, Field: a.Field, Destination: a.Destination, Total: total}
	filled, err := svc.FillArgs(ctx, args, a.Session)
	if err != nil {
		return err
	}
	d := eng.Decide(ctx, filled)
	if d.Allow {
		if d.Charge != nil && a.Item.Kind == vault.KindCard {
			return svc.Reserve(ctx, a.Session+"/"+a.Item.ID, a.Item.ID, *d.Charge)
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
		req := owner.ApprovalRequest{Kind: kind, Reason: string(d.Reason), Site: a.Destination, Amount: total,
			APIKeyID: a.Key.ID, Session: a.Session}
		if a.Item.Kind == vault.KindCard {
			req.CardID = a.Item.ID
		}
		ap, err := svc.RequestApproval(ctx, req)
		if err != nil {
			return err
		}
		return agentvault.Wrap(agentvault.CodeApprovalPending, &owner.Pending{Approval: ap, Code: d.Code}, "waiting for the owner (%s)", d.Reason)
	}
	return d.Err()
}
