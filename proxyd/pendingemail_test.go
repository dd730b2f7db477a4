package proxyd_test

import (
	"context"
	"testing"

	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/proxyd"
	"github.com/agentvault/agentvault/vault"
)

// TestPendingSaysWhetherAnEmailGoesOut: a fill waiting on the owner tells
// mcpd whether the owner is emailed about it: only when the config sets up
// SMTP (and the owner left email on), so the agent never sends the user
// looking for an email that does not exist (issue 26).
func TestPendingSaysWhetherAnEmailGoesOut(t *testing.T) {
	for _, smtp := range []bool{false, true} {
		m, _ := startMain(t, "", func(c *proxyd.Config) {
			if smtp {
				c.Notify.SMTP = proxyd.SMTPConfig{Host: "127.0.0.1", Port: 1, From: "av@example.com", To: []string{"owner@example.com"}}
			}
		})
		ctx := context.Background()
		if _, err := m.Vault.AddCard(ctx, proxyd.DefaultOrg, "owner", vault.CardInput{Number: vault.NewSecret([]byte("4242424242424242")),
			CVV: vault.NewSecret([]byte("737")), ExpiryMonth: 12, ExpiryYear: 2031, AnySite: true}); err != nil {
			t.Fatal(err)
		}
		c := control.NewClient("http://"+m.ControlAddr.String(), m.ControlToken, nil)
		s, err := c.CreateSession(ctx, m.APIKey)
		if err != nil {
			t.Fatal(err)
		}
		cat, _ := c.Catalog(ctx, m.APIKey, "")
		_, err = c.Authorize(ctx, s.ID, control.AuthorizeRequest{Token: tokenOf(t, cat, "av_card_1_number_"), PageURL: "https://shop.example/checkout"})
		p, ok := control.PendingOf(err)
		if !ok {
			t.Fatalf("smtp %v: authorize on a new site: %v, want pending", smtp, err)
		}
		if p.Email != smtp {
			t.Errorf("smtp configured %v: pending says email %v", smtp, p.Email)
		}
	}
}
