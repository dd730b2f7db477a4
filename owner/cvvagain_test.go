package owner_test

import (
	"context"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/vault"
)

// TestP18_SpentCVVNeedsASecondApproval (seed 004): a security code asked
// for again after its authorization was spent queues a purchase approval
// (reason cvv_again) on the same card and session; the owner's yes lets
// that one fill through, a third ask needs a new yes (not deduplicated
// against the approved one), and a no refuses with approval_denied.
func TestP18_SpentCVVNeedsASecondApproval(t *testing.T) {
	ctx := context.Background()
	s, k := deciding(t, openStore(t), owner.Scope{AllCards: true})
	if err := s.AuthorizeSite(ctx, "shop.example", "owner"); err != nil {
		t.Fatal(err)
	}
	card := vault.Item{ID: "itm_c", Kind: vault.KindCard, Fields: []vault.Field{vault.FieldNumber, vault.FieldCVV}, Card: &vault.CardMeta{AnySite: true}}
	fill := policy.Fill{KeyID: k.ID, Session: "s_1", Item: card, Field: vault.FieldCVV, Destination: "pay.shop.example"}
	if err := s.Authorize(ctx, fill); err != nil {
		t.Fatalf("the code right after its number: %v", err)
	}
	pending := func(n int) owner.Approval {
		t.Helper()
		f := fill
		f.CVVAgain = n
		err := s.Authorize(ctx, f)
		p, ok := owner.PendingOf(err)
		if agentvault.ErrorCode(err) != agentvault.CodeApprovalPending || !ok || p.Kind != owner.KindPurchase ||
			p.Reason != string(policy.ReasonCVVAgain) || p.CardID != card.ID || p.Session != "s_1" || p.Site != "shop.example" {
			t.Fatalf("CVV asked again (%d): %v %+v", n, err, p)
		}
		return p
	}
	first := pending(1)
	if again := pending(1); again.ID != first.ID {
		t.Fatal("a retried call queued a second approval")
	}
	if _, err := s.Decide(ctx, first.ID, true, "owner"); err != nil {
		t.Fatal(err)
	}
	f := fill
	f.CVVAgain = 1
	if err := s.Authorize(ctx, f); err != nil {
		t.Fatalf("after the owner's second yes: %v", err)
	}
	// Spent once more: one more yes, asked anew.
	second := pending(2)
	if second.ID == first.ID {
		t.Fatal("the third ask reused the approved request")
	}
	if _, err := s.Decide(ctx, second.ID, false, "owner"); err != nil {
		t.Fatal(err)
	}
	if a, _ := s.Approval(ctx, second.ID); agentvault.ErrorCode(a.Outcome()) != agentvault.CodeApprovalDenied {
		t.Fatalf("a no: %v", a.Outcome())
	}
	// Another session's yes does not count here.
	other := fill
	other.Session, other.CVVAgain = "s_2", 1
	if _, ok := owner.PendingOf(s.Authorize(ctx, other)); !ok {
		t.Fatal("another session's approval covered this one")
	}
}
