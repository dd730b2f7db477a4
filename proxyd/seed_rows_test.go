package proxyd_test

import (
	"context"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/control"
	"github.com/agentvault/agentvault/proxyd"
	"github.com/agentvault/agentvault/vault"
)

// TestSeed004_UnknownKeyReadsNoCatalog: a key the deployment never issued,
// whether it looks like one of its keys or not, reads no catalog over the
// control API: it is refused invalid_api_key and gets no token, while the
// deployment's own key reads the card in the same vault.
func TestSeed004_UnknownKeyReadsNoCatalog(t *testing.T) {
	m, _ := startMain(t, "", nil)
	ctx := context.Background()
	if _, err := m.Vault.AddCard(ctx, proxyd.DefaultOrg, "owner", vault.CardInput{
		Number: vault.NewSecret([]byte("4242424242424242")), CVV: vault.NewSecret([]byte("737")), ExpiryMonth: 12, ExpiryYear: 2031, AnySite: true,
	}); err != nil {
		t.Fatal(err)
	}
	c := control.NewClient("http://"+m.ControlAddr.String(), m.ControlToken, nil)
	if cat, err := c.Catalog(ctx, m.APIKey, ""); err != nil || len(cat) == 0 {
		t.Fatalf("the deployment's own key: %v", err)
	}
	for name, key := range map[string]string{
		"a well-formed key never issued":       "avk_" + "0123456789abcdef0123456789abcdef",
		"the real key with one more character": m.APIKey + "x",
		"not a key at all":                     "hello",
	} {
		t.Run(name, func(t *testing.T) {
			cat, err := c.Catalog(ctx, key, "")
			if agentvault.ErrorCode(err) != agentvault.CodeInvalidAPIKey {
				t.Fatalf("catalog: %v, want invalid_api_key", err)
			}
			if len(cat) != 0 {
				t.Fatalf("a refused read answered a catalog: %s", cat)
			}
		})
	}
}
