package proxyd_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/proxyd"
)

// TestSeed004_ClientSideEncryptionDeclaredByOwnerReachesMCPD: the control
// API serves mcpd the owner's policy.payment_integrations with the shipped
// list, so a client_side_encryption frame the owner declared is recognised
// the way mcpd compiles it (mcpserver/cse.go refuses the fill).
func TestSeed004_ClientSideEncryptionDeclaredByOwnerReachesMCPD(t *testing.T) {
	m, _ := startMain(t, "", func(c *proxyd.Config) {
		c.Policy.PaymentIntegrations = []policy.Integration{
			{Name: "owner-cse", Frames: []string{"pay.ownercse.example/fields/*"}, ClientSideEncryption: true},
		}
	})
	c := control.NewClient("http://"+m.ControlAddr.String(), m.ControlToken, nil)
	raw, err := c.PaymentIntegrations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var list []policy.Integration
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatal(err)
	}
	in, err := policy.TrustedIntegrations(list)
	if err != nil {
		t.Fatal(err)
	}
	for url, cse := range map[string]bool{
		"https://pay.ownercse.example/fields/card.html":                                                        true,
		"https://checkoutshopper-live.adyen.com/checkoutshopper/securedfields/live_K/5.0.0/securedFields.html": true,
	} {
		got, ok := in.Match(url)
		if !ok || got.ClientSideEncryption != cse {
			t.Errorf("%s: matched %v, client_side_encryption %v, want %v", url, ok, got.ClientSideEncryption, cse)
		}
	}
}
