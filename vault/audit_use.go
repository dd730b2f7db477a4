package vault

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"

	"github.com/agentvault/agentvault"
)

// AuditUsed is the audit action of a value used on the wire that the vault
// does not store (a live CVV the owner typed for one purchase).
const AuditUsed = "use"

// AuditUse records the use of a value the vault does not hold, tied to the
// item and field it stands for: an HMAC of value, never value. The item must
// exist in a.Org. The caller must not use value when this fails (P12).
func (v *Vault) AuditUse(ctx context.Context, a ReleaseArgs, value Secret) error {
	if a.Org == "" || a.ItemID == "" || a.Field == "" {
		return invalid("audit needs org, item and field")
	}
	rec, err := v.store.GetItem(ctx, a.Org, a.ItemID)
	if err != nil {
		return err
	}
	mac := hmac.New(sha256.New, v.auditKey)
	mac.Write(value.InsecureRawBytes())
	if _, err := v.store.AppendAudit(ctx, AuditRecord{
		Time: v.now().UTC(), Action: AuditUsed, Org: rec.Org, ItemID: rec.ID, Kind: rec.Kind, Field: a.Field,
		Destination: a.Destination, Session: a.Session, Actor: a.Actor, Purpose: a.Purpose,
		ValueHMAC: mac.Sum(nil),
	}); err != nil {
		return agentvault.Wrap(agentvault.CodeAuditUnavailable, err, "audit log unavailable; value not used")
	}
	return nil
}
