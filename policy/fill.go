package policy

import (
	"context"

	"github.com/agentvault/agentvault/vault/item"
)

// Fill is one fill as the broker has resolved it: the session's key, the
// item and field its token names, and where the value would go. It is the
// one request of both questions an Authorizer answers, so the authorize of
// a grant and the recheck before each of its releases read the same facts.
type Fill struct {
	KeyID   string // the session's API key id (its state is read again)
	Session string
	Item    item.Item
	Field   item.Field
	// Destination is the normalised host the value would be typed on and
	// sent to, no port.
	Destination string
	// Page is the page the agent was filling as the owner may see it
	// (ShownPage): shown with an approval the fill raises. Authorize only.
	Page string
	// Total is the checkout total read at a card-number fill (nil when the
	// page showed none). Authorize only.
	Total *Amount
	// Purchase numbers this session's card grants for the item: a grant
	// spent on a purchase is followed by a new one, whose charge is counted
	// again (P18, P21). 0 is the first. Authorize only.
	Purchase int
	// CVVAgain: for a card's security code asked for after its
	// authorization was spent, how many times in this session that has
	// happened, counting this one (Args.CVVAgain); 0 otherwise. Authorize
	// only.
	CVVAgain int
}

// Authorizer answers whether a fill may happen under the owner's rules
// (owner.Service, over Engine). The broker consumes it and cannot run
// without one: there is no default that allows.
//
//   - Authorize decides a fill before its grant is made. It may queue a
//     question for the owner (an error with CodeApprovalPending) and, for a
//     card number with a total, reserve the charge.
//   - Recheck is asked before every release of a granted value on the wire
//     (P21): it reads the owner's current state (a revoked key, a paused
//     card, a removed site refuse), and queues and spends nothing.
type Authorizer interface {
	Authorize(ctx context.Context, f Fill) error
	Recheck(ctx context.Context, f Fill) error
}
