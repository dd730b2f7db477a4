package notify_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/owner/notify"
	"github.com/agentvault/agentvault/policy"
)

func event() owner.Event {
	amt := policy.MustAmount("80.00 EUR")
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	return owner.Event{Type: owner.EventApprovalRequested, DashboardURL: "https://127.0.0.1:7703/",
		Approval: owner.Approval{ID: "apr_1", Kind: owner.KindPurchase, Reason: "over_threshold", Site: "shop.example",
			Amount: &amt, Status: owner.StatusPending, Created: t0, Expires: t0.Add(15 * time.Minute)}}
}

// TestWebhookSignatureVerified posts to a real TLS receiver that checks the
// signature with the shared secret, and finds no secret in the body.
func TestWebhookSignatureVerified(t *testing.T) {
	secret := []byte("whsec-test-0123456789")
	got := make(chan notify.Payload, 1)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !notify.Verify(secret, body, r.Header.Get(notify.SignatureHeader)) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		if strings.Contains(string(body), string(secret)) {
			t.Errorf("the webhook body holds the secret")
		}
		var p notify.Payload
		if err := json.Unmarshal(body, &p); err != nil {
			t.Errorf("body: %v", err)
		}
		got <- p
	}))
	defer srv.Close()
	w := &notify.Webhook{URL: srv.URL + "/hook", Secret: secret, Client: srv.Client(), Timeout: 5 * time.Second}
	if err := w.Notify(context.Background(), event()); err != nil {
		t.Fatal(err)
	}
	p := <-got
	if p.ApprovalID != "apr_1" || p.Kind != "purchase" || p.Site != "shop.example" || p.Amount == nil || p.Amount.String() != "80.00 EUR" || p.Event != owner.EventApprovalRequested {
		t.Fatalf("payload: %+v", p)
	}
	// A receiver with another secret refuses, and the sender reports it.
	bad := &notify.Webhook{URL: srv.URL, Secret: []byte("other"), Client: srv.Client()}
	err := bad.Notify(context.Background(), event())
	if agentvault.ErrorCode(err) != agentvault.CodeUpstream || strings.Contains(err.Error(), "other") {
		t.Fatalf("wrong secret: %v", err)
	}
}

func TestMessageHasNoHeaderInjection(t *testing.T) {
	e := event()
	e.Approval.Site = "shop.example\r\nBcc: evil@example.com"
	msg := string(notify.Message("av@example.com", []string{"me@example.com"}, e))
	head, _, _ := strings.Cut(msg, "\r\n\r\n")
	if strings.Contains(head, "\r\nBcc:") {
		t.Fatalf("header injected:\n%s", head)
	}
	if !strings.Contains(msg, "80.00 EUR") || !strings.Contains(msg, "apr_1") {
		t.Fatalf("message lacks the facts:\n%s", msg)
	}
}

type countNotifier struct{ got []string }

func (c *countNotifier) Notify(_ context.Context, e owner.Event) error {
	c.got = append(c.got, e.Type)
	return nil
}

// TestNotif_RouterFollowsTheOwnersSwitches: each channel goes only while
// it is on; a hand-off only while the seed's challenge switch is on; and a
// hand-off's payload and mail name the step, the site and the live view.
func TestNotif_RouterFollowsTheOwnersSwitches(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	ho := owner.Event{Type: owner.EventHandoffRequested, DashboardURL: "https://127.0.0.1:7703/handoffs/ho_1",
		Handoff: &owner.Handoff{ID: "ho_1", ChallengeType: "otp", Site: "bank.example", Created: t0, Expires: t0.Add(10 * time.Minute)}}
	for _, tc := range []struct {
		name          string
		prefs         owner.NotifyPrefs
		e             owner.Event
		hooks, emails int
	}{
		{"all on, approval", owner.DefaultNotifyPrefs, event(), 1, 1},
		{"all on, hand-off", owner.DefaultNotifyPrefs, ho, 1, 1},
		{"challenges off, hand-off", owner.NotifyPrefs{Webhook: true, Email: true}, ho, 0, 0},
		{"challenges off, approval", owner.NotifyPrefs{Webhook: true, Email: true}, event(), 1, 1},
		{"email only", owner.NotifyPrefs{Email: true, Challenges: true}, ho, 0, 1},
		{"all off", owner.NotifyPrefs{}, event(), 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, m := &countNotifier{}, &countNotifier{}
			r := &notify.Router{Prefs: func() owner.NotifyPrefs { return tc.prefs }, Webhook: w, Email: m}
			if err := r.Notify(context.Background(), tc.e); err != nil {
				t.Fatal(err)
			}
			if len(w.got) != tc.hooks || len(m.got) != tc.emails {
				t.Fatalf("webhook %d, email %d; want %d, %d", len(w.got), len(m.got), tc.hooks, tc.emails)
			}
		})
	}
	p := notify.PayloadOf(ho)
	if p.HandoffID != "ho_1" || p.Kind != notify.KindChallengeHandoff || p.Reason != "otp" || p.ApprovalID != "" {
		t.Errorf("hand-off payload: %+v", p)
	}
	msg := string(notify.Message("av@example.com", []string{"me@example.com"}, ho))
	if !strings.Contains(msg, "a checkout needs you to clear a bank or verification step") || !strings.Contains(msg, "/handoffs/ho_1") {
		t.Errorf("hand-off mail:\n%s", msg)
	}
}
