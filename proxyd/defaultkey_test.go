package proxyd_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/owner"
	"github.com/agentvault/agentvault/proxyd"
	"github.com/agentvault/agentvault/vault"
)

// TestP21_RevokedDefaultKeyCreatesNoSession: the api-key file's key is
// registered in the owner store at first start (listed as key_default, hash
// only), and once the owner revokes it, it can neither open a session nor
// read the catalog, and a session it opened before fails its next fill.
func TestP21_RevokedDefaultKeyCreatesNoSession(t *testing.T) {
	m, _ := startMain(t, "", func(c *proxyd.Config) { c.Policy.AuthorizedDestinations = []string{"shop.example"} })
	ctx := context.Background()
	if _, err := m.Vault.AddCard(ctx, proxyd.DefaultOrg, "owner", vault.CardInput{
		Number: vault.NewSecret([]byte("4242424242424242")), CVV: vault.NewSecret([]byte("737")), ExpiryMonth: 12, ExpiryYear: 2031, AnySite: true,
	}); err != nil {
		t.Fatal(err)
	}
	keys, err := m.Owner.APIKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(keys, func(k owner.APIKey) bool { return k.ID == proxyd.DefaultKeyID })
	if i < 0 || !keys[i].Scope.AllCards || !keys[i].Scope.AllLogins || keys[i].Revoked() {
		t.Fatalf("key_default not registered with every card and login: %+v", keys)
	}
	c := control.NewClient("http://"+m.ControlAddr.String(), m.ControlToken, nil)
	s, err := c.CreateSession(ctx, m.APIKey)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := c.Catalog(ctx, m.APIKey, "")
	if err != nil {
		t.Fatal(err)
	}
	j := strings.Index(string(cat), "av_card_")
	if j < 0 {
		t.Fatalf("no card token in %s", cat)
	}
	tok := string(cat)[j:]
	tok = tok[:strings.IndexByte(tok, '"')]
	req := control.AuthorizeRequest{Token: tok, PageURL: "https://shop.example/pay"}
	if _, err := c.Authorize(ctx, s.ID, req); err != nil {
		t.Fatalf("before revoking: %v", err)
	}

	if err := m.Owner.Revoke(ctx, proxyd.DefaultKeyID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSession(ctx, m.APIKey); agentvault.ErrorCode(err) != agentvault.CodeKeyRevoked {
		t.Fatalf("session with a revoked default key: %v, want key_revoked", err)
	}
	if _, err := c.Catalog(ctx, m.APIKey, ""); agentvault.ErrorCode(err) != agentvault.CodeKeyRevoked {
		t.Fatalf("catalog with a revoked default key: %v, want key_revoked", err)
	}
	if _, err := c.Authorize(ctx, s.ID, req); agentvault.ErrorCode(err) != agentvault.CodeKeyRevoked {
		t.Fatalf("fill on an open session after revoking: %v, want key_revoked", err)
	}
}
