package proxyd

import (
	"context"

	"github.com/agentvault/agentvault/intercept"
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
		r := owner.FillRequest{KeyID: a.Key.ID, Session: a.Session, Item: a.Item,
			Field: a.Field, Destination: a.Destination, Total: total}
		return svc.Authorize(ctx, r)
	}
}
