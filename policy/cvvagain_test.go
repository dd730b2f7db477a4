package policy

import (
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/vault/item"
	"golang.org/x/net/publicsuffix"
)

// TestP18_SpentCVVAsksTheOwnerAgain (seed 004, "Card order"): filling the
// number authorizes the security code that follows it exactly once; asked
// for again after it was spent, the code needs the owner to approve the
// same purchase a second time: one yes per spent authorization. That yes
// approves no card number, and a paused card or a blocked merchant still
// refuses first.
func TestP18_SpentCVVAsksTheOwnerAgain(t *testing.T) {
	e := NewEngine(Rates{}, publicsuffix.EffectiveTLDPlusOne)
	again := Approval{Kind: ApprovalPurchase, Reason: ReasonCVVAgain, Site: "example.com", ItemID: "itm_card1"}
	cvv := func(n int, aps ...Approval) Args {
		a := baseArgs()
		a.Field, a.CVVAgain, a.Approvals = item.FieldCVV, n, aps
		return a
	}
	ask := want{needsOwner: true, code: agentvault.CodeApprovalExpired, reason: ReasonCVVAgain}
	check(t, e, cvv(0), want{allow: true})
	check(t, e, cvv(1), ask)
	check(t, e, cvv(1, again), want{allow: true})
	check(t, e, cvv(2, again), ask)
	check(t, e, cvv(2, again, again), want{allow: true})
	// A yes for another card, or a plain purchase approval, does not count.
	other := again
	other.ItemID = "itm_card2"
	check(t, e, cvv(1, other, Approval{Kind: ApprovalPurchase, Site: "example.com", ItemID: "itm_card1"}), ask)
	paused := cvv(1)
	paused.Card.Paused = true
	check(t, e, paused, want{code: agentvault.CodeCardPaused})
	// The yes to re-use a code approves no number over the threshold.
	num := baseArgs()
	num.Card.ApprovalThreshold = amt("10.00 EUR")
	num.Total = amt("80.00 EUR")
	num.Approvals = []Approval{{Kind: ApprovalPurchase, Reason: ReasonCVVAgain, Site: "example.com", ItemID: "itm_card1", Amount: amt("80.00 EUR")}}
	check(t, e, num, want{needsOwner: true, code: agentvault.CodeApprovalExpired, reason: ReasonOverThreshold})
	// A live CVV asked for again needs both: the second yes, then the code.
	live := cvv(1, again, Approval{Kind: ApprovalCVV, Site: "example.com", ItemID: "itm_card1"})
	live.Card.LiveCVV = true
	check(t, e, live, want{allow: true})
	live.Approvals = live.Approvals[1:]
	live.Card.LiveCVV = true
	check(t, e, live, ask)
}
