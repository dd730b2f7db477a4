package proxyd_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/proxyd"
	"github.com/agentvault/agentvault/vault"
)

// TestP24_AgentsOwnKeyReachesItsOwnSessionsOnly: an agent that drives its
// own browser calls the control API with its own API key as the bearer
// (docs/byob.md). It opens a session (the key named in the body, when
// given, must be its own), reads its catalog, authorizes, waits on its own
// approval, reads its report and closes its session. Another key's session
// or wait reads as unknown, every call the flow does not need (the ones
// only mcpd makes) is refused saying so, and a key that is wrong, unknown
// or revoked gets nothing.
func TestP24_AgentsOwnKeyReachesItsOwnSessionsOnly(t *testing.T) {
	m, _ := startMain(t, "", func(c *proxyd.Config) { c.Policy.AuthorizedDestinations = []string{"shop.example"} })
	ctx := context.Background()
	if _, err := m.Vault.AddCard(ctx, proxyd.DefaultOrg, "owner", vault.CardInput{Number: vault.NewSecret([]byte("4242424242424242")),
		CVV: vault.NewSecret([]byte("737")), ExpiryMonth: 12, ExpiryYear: 2031, AnySite: true}); err != nil {
		t.Fatal(err)
	}
	base := "http://" + m.ControlAddr.String()
	_, otherKey, err := m.Owner.CreateAPIKey(ctx, "another agent", owner.Scope{AllCards: true})
	if err != nil {
		t.Fatal(err)
	}
	mine := control.NewClient(base, m.APIKey, nil)  // the agent itself, its key as the bearer
	other := control.NewClient(base, otherKey, nil) // another agent, the same way
	mcpd := control.NewClient(base, m.ControlToken, nil)

	s, err := mine.CreateSession(ctx, "") // no key in the body: the bearer's
	if err != nil {
		t.Fatalf("open a session with the own key: %v", err)
	}
	if _, err := mine.CreateSession(ctx, otherKey); agentvault.ErrorCode(err) != agentvault.CodeForbidden {
		t.Errorf("a session for another key with this key as the bearer: %v, want forbidden", err)
	}
	cat, err := mine.Catalog(ctx, "", "https://shop.example/checkout")
	if err != nil || !strings.Contains(string(cat), "av_card_1_number_") {
		t.Fatalf("catalog with the own key: %v", err)
	}
	i := strings.Index(string(cat), "av_card_1_number_")
	token := string(cat)[i : i+len("av_card_1_number_")+5]
	total := &control.OrderTotal{Amount: "12.00", Currency: "EUR"}
	a, err := mine.Authorize(ctx, s.ID, control.AuthorizeRequest{Token: token, PageURL: "https://shop.example/checkout", OrderTotal: total})
	if err != nil || !a.StandIn {
		t.Fatalf("authorize with the own key: %v", err)
	}
	// A site the owner has not authorized: the fill waits, and the wait is
	// the key's own.
	_, err = mine.Authorize(ctx, s.ID, control.AuthorizeRequest{Token: token, PageURL: "https://elsewhere.example/pay", OrderTotal: total})
	p, ok := control.PendingOf(err)
	if !ok {
		t.Fatalf("authorize on a site not authorized: %v, want pending", err)
	}
	if w, err := mine.Wait(ctx, p.WaitID, 10*time.Millisecond); err != nil || w.Status != "pending" {
		t.Errorf("own wait: %+v %v", w, err)
	}
	if err := mine.Event(ctx, s.ID, control.EventRequest{Type: control.EventConfirmation, OrderTotal: total}); err != nil {
		t.Errorf("event with the own key: %v", err)
	}
	if rep, err := mine.Report(ctx, s.ID); err != nil || len(rep.FilledFieldKinds) != 1 || !rep.ConfirmationDetected {
		t.Errorf("own report: %+v %v", rep, err)
	}

	// Another key: the same session and wait read as unknown.
	theirs, err := other.CreateSession(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	notFound := func(what string, err error) {
		t.Helper()
		if agentvault.ErrorCode(err) != agentvault.CodeNotFound {
			t.Errorf("%s: %v, want not_found", what, err)
		}
	}
	_, err = other.Authorize(ctx, s.ID, control.AuthorizeRequest{Token: token, PageURL: "https://shop.example/checkout", OrderTotal: total})
	notFound("authorize on another key's session", err)
	notFound("event on another key's session", other.Event(ctx, s.ID, control.EventRequest{Type: control.EventConfirmation}))
	_, err = other.Report(ctx, s.ID)
	notFound("report of another key's session", err)
	_, err = other.CloseSession(ctx, s.ID)
	notFound("close another key's session", err)
	_, err = other.Wait(ctx, p.WaitID, 10*time.Millisecond)
	notFound("wait on another key's approval", err)
	_, err = mine.Report(ctx, theirs.ID)
	notFound("report of the other key's session", err)
	// mcpd (the control token) still reaches every session.
	if _, err := mcpd.Report(ctx, theirs.ID); err != nil {
		t.Errorf("mcpd's report of a session: %v", err)
	}

	// The calls only mcpd makes.
	if _, err := mine.AuthenticateKey(ctx, m.APIKey); agentvault.ErrorCode(err) != agentvault.CodeForbidden ||
		!strings.Contains(agentvault.ErrorMessage(err), "through mcpd") {
		t.Errorf("check a key with the own key: %v, want forbidden through mcpd", err)
	}
	if _, err := mine.PaymentIntegrations(ctx); agentvault.ErrorCode(err) != agentvault.CodeForbidden {
		t.Errorf("payment integrations with the own key: %v, want forbidden", err)
	}

	// Closing: the final report, once; afterwards the ended session is
	// still the key's (its report is kept) and still not the other's.
	if rep, err := mine.CloseSession(ctx, s.ID); err != nil || rep.Status != "Session closed" {
		t.Fatalf("close with the own key: %+v %v", rep, err)
	}
	if _, err := mine.Report(ctx, s.ID); err != nil {
		t.Errorf("the ended session's report with the own key: %v", err)
	}
	_, err = other.Report(ctx, s.ID)
	notFound("the ended session's report with another key", err)

	// Keys that are not good.
	for what, bearer := range map[string]string{
		"an unknown key":     "avk_" + strings.Repeat("0", 16) + "_" + strings.Repeat("ab", 16),
		"a malformed key":    "avk_nope",
		"not a key or token": "hello",
		"no bearer":          "",
	} {
		_, err := control.NewClient(base, bearer, nil).CreateSession(ctx, "")
		if c := agentvault.ErrorCode(err); c != agentvault.CodeUnauthorized && c != agentvault.CodeInvalidAPIKey {
			t.Errorf("%s: %v, want unauthorized or invalid_api_key", what, err)
		}
	}
	k, err := m.Owner.AuthenticateKey(ctx, otherKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Owner.Revoke(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Report(ctx, theirs.ID); agentvault.ErrorCode(err) != agentvault.CodeKeyRevoked {
		t.Errorf("a revoked key's call: %v, want key_revoked", err)
	}
}
