package mcpserver

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/policy"
)

// TestClientSideEncryptionRefusal: the shipped Adyen secured-fields frame is
// refused with client_side_encryption; plain-posting integrations and other
// pages are not.
func TestClientSideEncryptionRefusal(t *testing.T) {
	s := &Server{integrationOf: policy.PaymentIntegration}
	for url, want := range map[string]agentvault.Code{
		"https://checkoutshopper-live.adyen.com/checkoutshopper/securedfields/live_K/5.0.0/securedFields.html": agentvault.CodeClientSideEncryption,
		"https://js.stripe.com/v3/elements-inner-payment-1.html":                                               "",
		"https://checkout.shopifycs.com/number?identifier=1":                                                   "",
		"https://shop.example/checkout":                                                                        "",
	} {
		err := s.refuseClientSideEncryption(url)
		if agentvault.ErrorCode(err) != want {
			t.Errorf("%s: code %q, want %q", url, agentvault.ErrorCode(err), want)
		}
		if err != nil && !strings.Contains(agentvault.ErrorMessage(err), "encrypts the card") {
			t.Errorf("message %q does not say why", agentvault.ErrorMessage(err))
		}
	}
}

// TestToolsClientSideEncryptionFrameTypesNothing drives fill_checkout in
// real Chromium against a card frame recognised as a client-side-encryption
// integration: the whole batch is refused before authorize and before the
// first keystroke, so even the fields outside the frame stay empty.
func TestToolsClientSideEncryptionFrameTypesNothing(t *testing.T) {
	h := newHarness(t)
	h.srv.integrationOf = func(u string) (policy.Integration, bool) {
		if strings.HasSuffix(u, "/card") {
			return policy.Integration{Name: "test-cse", ClientSideEncryption: true}, true
		}
		return policy.Integration{}, false
	}
	h.ok("open_page", map[string]any{"url": h.site.CheckoutURL()})
	h.ok("wait_for_selector", map[string]any{"selector": "#number", "frame": payFrame, "timeout": 30000})
	txt := h.refused("fill_checkout", map[string]any{"fields": []map[string]any{
		{"selector": "#first", "value": "Jane"},
		{"selector": "#number", "frame": payFrame, "value": num1},
		{"selector": "#cvc", "frame": payFrame, "value": cvv1},
	}}, agentvault.CodeClientSideEncryption)
	if !strings.HasPrefix(txt, "status=error code=client_side_encryption filled=0/3") || !strings.Contains(txt, "test-cse") {
		t.Fatalf("refusal %q", txt)
	}
	if len(h.ctl.auths) != 0 {
		t.Fatalf("%d authorizations for a client-side-encryption frame", len(h.ctl.auths))
	}
	// No token reached the page: the snapshot gate, closed before the
	// first token is typed, is still open.
	if snap := h.ok("snapshot_page", nil); !strings.HasPrefix(snap, "status=ok") {
		t.Fatalf("snapshot after the refusal: %.80q", snap)
	}
	obs := h.ok("fill_checkout", map[string]any{"fields": []map[string]any{{"selector": "#first", "value": "Jane"}}})
	if !strings.HasPrefix(obs, "status=ok filled=1/1") {
		t.Fatalf("a batch outside the frame is refused too: %q", obs)
	}
	// A batch of literals substitutes nothing, so the frame's encryption
	// takes nothing from it: it goes in, and no authorization is asked for.
	lit := h.ok("fill_checkout", map[string]any{"fields": []map[string]any{{"selector": "#cvc", "frame": payFrame, "value": "12"}}})
	if !strings.HasPrefix(lit, "status=ok filled=1/1") || len(h.ctl.auths) != 0 {
		t.Fatalf("literal batch into the frame: %q (%d authorizations)", lit, len(h.ctl.auths))
	}
}

// ownerIntegrations is a Control that also serves proxyd's list of payment
// integrations (control.IntegrationsPath), as control.Client does.
type ownerIntegrations struct {
	standInControl
	list  string
	calls int
}

func (o *ownerIntegrations) PaymentIntegrations(context.Context) (json.RawMessage, error) {
	o.calls++
	return json.RawMessage(o.list), nil
}

// TestSeed004_ClientSideEncryptionDeclaredByOwnerIsRefused: a frame the
// owner lists in policy.payment_integrations with client_side_encryption
// counts the same as the shipped list; one the owner lists without it is
// filled as before, and the shipped list still counts.
func TestSeed004_ClientSideEncryptionDeclaredByOwnerIsRefused(t *testing.T) {
	ctl := &ownerIntegrations{list: `[
		{"name":"owner-cse","frames":["pay.ownercse.example/fields/*"],"client_side_encryption":true},
		{"name":"owner-plain","frames":["pay.ownerplain.example/fields/*"],"posts_to":["https://api.ownerplain.example"]}]`}
	s, err := New(Config{Control: ctl, APIKey: "avk_test"})
	if err != nil {
		t.Fatal(err)
	}
	for url, want := range map[string]agentvault.Code{
		"https://pay.ownercse.example/fields/card.html":                                                        agentvault.CodeClientSideEncryption,
		"https://pay.ownerplain.example/fields/card.html":                                                      "",
		"https://checkoutshopper-live.adyen.com/checkoutshopper/securedfields/live_K/5.0.0/securedFields.html": agentvault.CodeClientSideEncryption,
		"https://shop.example/checkout":                                                                        "",
	} {
		err := s.refuseClientSideEncryption(url)
		if agentvault.ErrorCode(err) != want {
			t.Errorf("%s: code %q, want %q", url, agentvault.ErrorCode(err), want)
		}
		if want != "" && !strings.Contains(agentvault.ErrorMessage(err), "encrypts the card") {
			t.Errorf("message %q does not say why", agentvault.ErrorMessage(err))
		}
	}
	if ctl.calls != 1 {
		t.Errorf("the proxy's list was read %d times for four fills, want once (cached)", ctl.calls)
	}
}
