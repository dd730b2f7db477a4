package proxyd_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
)

// TestP18_SpentCVVNeedsASecondOwnerApproval (seed 004, "Card order"):
// through a real Main, the number authorizes its security code once. A
// code asked for again after the purchase spent its grant, or after mcpd
// saw an action spend the number's authorization (cvvSpent), waits for the
// owner to approve the same purchase a second time (a purchase approval,
// reason cvv_again); the yes lets that fill through, and each later spend
// asks anew. A code right after a fresh number needs nothing more.
func TestP18_SpentCVVNeedsASecondOwnerApproval(t *testing.T) {
	f := newGrantFixture(t)
	ctx := context.Background()
	cvvTok := strings.Replace(f.token, "_number_", "_cvv_", 1)
	auth := func(tok string, spent bool) (string, error) {
		a, err := f.c.Authorize(ctx, f.s.ID, control.AuthorizeRequest{Token: tok, PageURL: f.page, CVVSpent: spent})
		return a.Value, err
	}
	mustAuth := func(tok string, spent bool) string {
		t.Helper()
		v, err := auth(tok, spent)
		if err != nil {
			t.Fatalf("authorize %s: %v", tok[:12], err)
		}
		return v
	}
	pendingAgain := func(spent bool) string {
		t.Helper()
		_, err := auth(cvvTok, spent)
		p, ok := control.PendingOf(err)
		if agentvault.ErrorCode(err) != agentvault.CodeApprovalPending || !ok || p.Kind != "purchase" || p.Reason != "cvv_again" || p.Site != "shop.test" {
			t.Fatalf("the code asked for again: %v %+v", err, p)
		}
		return p.WaitID
	}
	num := mustAuth(f.token, false)
	cvv := mustAuth(cvvTok, false)
	resp, err := f.hc.Post(f.page, "application/x-www-form-urlencoded", strings.NewReader("cc="+num+"&cvc="+cvv))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if c := resp.Header.Get("X-Agentvault-Code"); c != "" {
		t.Fatalf("the purchase was refused: %s", c)
	}
	if b := f.rec.all(); len(b) != 1 || !strings.Contains(b[0], "737") {
		t.Fatalf("the site did not get the code: %d requests", len(b))
	}
	// The purchase spent the code's grant: asking for it alone again waits.
	first := pendingAgain(false)
	if again := pendingAgain(false); again != first {
		t.Fatal("a retried call queued another approval")
	}
	if _, err := f.m.Owner.Decide(ctx, first, true, "owner@example.org"); err != nil {
		t.Fatal(err)
	}
	if w, err := f.c.Wait(ctx, first, 0); err != nil || w.Status != "approved" {
		t.Fatalf("wait: %+v %v", w, err)
	}
	mustAuth(cvvTok, false)
	// A fresh number, then an action before its code (mcpd says so): the
	// owner is asked again, with a new request.
	mustAuth(f.token, false)
	second := pendingAgain(true)
	if second == first {
		t.Fatal("the second spend reused the approved request")
	}
	if _, err := f.m.Owner.Decide(ctx, second, false, "owner@example.org"); err != nil {
		t.Fatal(err)
	}
	if w, _ := f.c.Wait(ctx, second, 0); w.Status != "denied" || w.Code != string(agentvault.CodeApprovalDenied) {
		t.Fatalf("the owner's no: %+v", w)
	}
	// A fresh number and its code right after: no owner needed.
	mustAuth(f.token, false)
	mustAuth(cvvTok, false)
}
