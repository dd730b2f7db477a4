package proxyd

import (
	"context"

	"github.com/agentvault/agentvault/broker"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/policy"
)

// ownerDecider decides an authorize with owner.Service.Authorize: the
// owner's authorized sites, the key's scope (re-read, so a revocation
// applies at once), the card's pause, blocks and caps, and the session's
// approvals. A decision that needs the owner queues an approval and fails
// with approval_pending; the control API answers it with 202 and the agent
// waits on /v1/waits/{id}. An allowed card charge is reserved once per
// session, card and total (P18, P20).
func ownerDecider(svc *owner.Service) broker.Decider {
	return func(ctx context.Context, a broker.DecideArgs) error {
		var total *policy.Amount
		if a.Total != nil {
			t, err := policy.ParseDecimal(a.Total.Amount, a.Total.Currency)
			if err != nil {
				return err
			}
			total = &t
		}
		r := fillRequest(a)
		r.Total = total
		return svc.Authorize(ctx, r)
	}
}

// ownerRechecker asks owner.Service.Recheck before every release of a
// granted value on the wire (P21): the owner's revoke, pause, block or
// removal of a site ends the grant at its next use.
func ownerRechecker(svc *owner.Service) broker.Decider {
	return func(ctx context.Context, a broker.DecideArgs) error {
		return svc.Recheck(ctx, fillRequest(a))
	}
}

func fillRequest(a broker.DecideArgs) owner.FillRequest {
	return owner.FillRequest{KeyID: a.Key.ID, Session: a.Session, Item: a.Item,
		Field: a.Field, Destination: a.Destination, Page: a.Page, Purchase: a.Purchase, CVVAgain: a.CVVAgain}
}
