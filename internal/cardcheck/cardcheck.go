// Package cardcheck finds a card already in the vault before another copy
// is added, without ever comparing card numbers in the clear: each card's
// number is remembered as the vault's keyed HMAC (Vault.AuditHMAC, the same
// MAC audit records hold), sealed in a vault blob next to the item. The
// owner's CLI (internal/vaultcli) and the dashboard both ask it, so the rule
// has one home.
package cardcheck

import (
	"context"
	"crypto/hmac"
	"fmt"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/vault"
)

// Vault is what the check needs; *vault.Vault implements it.
type Vault interface {
	List(ctx context.Context, org string) ([]vault.Item, error)
	AuditHMAC(value vault.Secret) []byte
	SealBlob(ctx context.Context, name string, data []byte) error
	OpenBlob(ctx context.Context, name string) ([]byte, error)
}

func blobName(itemID string) string { return "card-number-hmac/" + itemID }

// Describe tells cards apart without a secret: label, brand, last 4 and
// expiry ("card 2: visa •••• 4242, exp 12/31").
func Describe(it vault.Item) string {
	if it.Card == nil {
		return "item " + it.Label
	}
	return fmt.Sprintf("card %s: %s •••• %s, exp %02d/%02d", it.Label, it.Card.Brand, it.Card.Last4, it.Card.ExpiryMonth, it.Card.ExpiryYear%100)
}

// Check refuses a number already in the vault (CodeConflict, naming the
// card it duplicates). A card added before fingerprints were kept cannot be
// compared; one with the same last 4 and expiry is returned as a warning
// for the owner to judge.
func Check(ctx context.Context, v Vault, org string, number vault.Secret, month, year int) (warning string, err error) {
	items, err := v.List(ctx, org)
	if err != nil {
		return "", err
	}
	mac := v.AuditHMAC(number)
	raw := number.InsecureRawBytes()
	last4 := ""
	if len(raw) >= 4 {
		last4 = string(raw[len(raw)-4:])
	}
	for _, it := range items {
		if it.Kind != vault.KindCard || it.Card == nil || it.Card.Last4 != last4 {
			continue
		}
		known, err := v.OpenBlob(ctx, blobName(it.ID))
		switch {
		case err == nil && hmac.Equal(known, mac):
			return "", agentvault.Errorf(agentvault.CodeConflict,
				"this card is already in the vault as %s; remove that one first, or change its sites and rules instead", Describe(it))
		case err == nil:
			// Same last 4, another number: a different card.
		case agentvault.ErrorCode(err) == agentvault.CodeNotFound:
			if it.Card.ExpiryMonth == month && it.Card.ExpiryYear == year {
				warning = fmt.Sprintf("%s may be this same card (same last 4 and expiry, added before duplicates were checked): if so, remove one", Describe(it))
			}
		default:
			return "", err
		}
	}
	return warning, nil
}

// Record remembers a newly added card's number by its keyed HMAC.
func Record(ctx context.Context, v Vault, it vault.Item, number vault.Secret) error {
	return v.SealBlob(ctx, blobName(it.ID), v.AuditHMAC(number))
}
