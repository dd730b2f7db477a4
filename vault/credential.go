package vault

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"

	agentvault "github.com/agentvault/agentvault"
)

// Portal credentials (seed 003): values a skill's runtime fetches through a
// one-time URL (an ERP's username and password, an API key). They are items
// of their own kind, sealed like every other item (a per-item data key
// wrapped by the master key, AAD binding org, item and field, so key
// rotation re-wraps them and a value copied to another org or item does not
// open). Package credentials owns who may use them; the vault only seals,
// opens and audits. List never returns them: they are not fillable tokens.

// KindCredential is a portal credential's values.
const KindCredential Kind = "credential"

// AuditCredentialUse is the audit action of a credential value handed to a
// skill's runtime. It differs from AuditRelease so the proxy's recipients
// (who must be scrubbed of what) never count it as a wire release.
const AuditCredentialUse = "credential_use"

// CredentialValue is one field of a credential and its value. Field names
// are chosen by whoever requests the credential; package credentials checks
// their grammar before they come here.
type CredentialValue struct {
	Field Field
	Value Secret
}

// PutCredential seals values as the credential item id of org (a new item
// when id is empty) and returns its metadata. An existing id must be a
// credential of org; its values are replaced entirely under a fresh data
// key. owner is who typed the values, for the audit log.
func (v *Vault) PutCredential(ctx context.Context, org, owner, id string, values []CredentialValue) (Item, error) {
	if err := checkOrgOwner(org, owner); err != nil {
		return Item{}, err
	}
	if len(values) == 0 {
		return Item{}, invalid("a credential needs at least one value")
	}
	seen := map[Field]bool{}
	vals := make([]value, 0, len(values))
	for _, cv := range values {
		if cv.Field == "" || cv.Field == metaField() || !plainText(string(cv.Field), 64) || seen[cv.Field] {
			return Item{}, invalid("credential field names must be distinct single lines")
		}
		seen[cv.Field] = true
		vals = append(vals, value{cv.Field, clone(cv.Value.InsecureRawBytes())})
	}
	v.rotMu.RLock()
	defer v.rotMu.RUnlock()
	action := AuditUpdate
	now := v.now().UTC()
	it := Item{Org: org, Owner: owner, Kind: KindCredential, Updated: now, Created: now}
	if id == "" {
		var err error
		if it.ID, err = newItemID(); err != nil {
			return Item{}, err
		}
		action = AuditAdd
	} else {
		old, err := v.store.GetItem(ctx, org, id)
		if err != nil {
			return Item{}, err
		}
		if old.Kind != KindCredential {
			return Item{}, ErrNotFound
		}
		it.ID, it.Created = id, old.Created
	}
	it.Label = it.ID
	for _, val := range vals {
		it.Fields = append(it.Fields, val.field)
	}
	for tries := 0; ; tries++ {
		valsCopy := make([]value, len(vals))
		for i, val := range vals {
			valsCopy[i] = value{val.field, clone(val.b)}
		}
		rec, err := v.sealItem(it, itemMeta{}, valsCopy)
		if err != nil {
			return Item{}, err
		}
		err = v.store.PutItem(ctx, rec)
		if err == nil {
			break
		}
		if agentvault.ErrorCode(err) != agentvault.CodeConflict || tries > 0 {
			return Item{}, err
		}
		// A master key another process retired under us: adopt the new one.
		if changed, rerr := v.refreshActive(ctx); rerr != nil {
			return Item{}, rerr
		} else if !changed {
			return Item{}, err
		}
	}
	for _, val := range vals {
		wipe(val.b)
	}
	if _, err := v.store.AppendAudit(ctx, AuditRecord{Time: now, Action: action, Org: org, ItemID: it.ID, Kind: KindCredential, Actor: owner, Purpose: "credential"}); err != nil {
		return it, agentvault.Wrap(agentvault.CodeAuditUnavailable, err, "credential stored, but the audit log could not be written")
	}
	return it, nil
}

// GetCredential returns a credential item's metadata (its fields, never a
// value).
func (v *Vault) GetCredential(ctx context.Context, org, id string) (Item, error) {
	rec, err := v.store.GetItem(ctx, org, id)
	if err != nil {
		return Item{}, err
	}
	if rec.Kind != KindCredential {
		return Item{}, ErrNotFound
	}
	return v.openItem(rec)
}

// ReleaseCredential opens every value of the credential item a.ItemID and
// returns them only after one audit record per field (an HMAC of the value,
// never the value; action AuditCredentialUse) is stored. When any audit
// write fails, every value is wiped and CodeAuditUnavailable returned (P12).
func (v *Vault) ReleaseCredential(ctx context.Context, a ReleaseArgs) ([]CredentialValue, error) {
	if a.Org == "" || a.ItemID == "" {
		return nil, invalid("release needs org and item")
	}
	rec, err := v.store.GetItem(ctx, a.Org, a.ItemID)
	if err != nil {
		return nil, err
	}
	if rec.Kind != KindCredential {
		return nil, ErrNotFound
	}
	dek, err := v.dataKey(rec)
	if err != nil {
		return nil, err
	}
	defer wipe(dek)
	out := make([]CredentialValue, 0, len(rec.Fields))
	fail := func(err error) ([]CredentialValue, error) {
		for _, cv := range out {
			cv.Value.Wipe()
		}
		return nil, err
	}
	for _, f := range rec.Fields {
		ct, ok := rec.Values[f]
		if !ok {
			return fail(errCorrupt)
		}
		pt, err := open(dekLookup(dek), ct, fieldAAD(rec.Org, rec.ID, f))
		if err != nil {
			return fail(err)
		}
		out = append(out, CredentialValue{Field: f, Value: takeSecret(pt)})
	}
	now := v.now().UTC()
	for _, cv := range out {
		mac := hmac.New(sha256.New, v.auditKey)
		mac.Write(cv.Value.InsecureRawBytes())
		_, err := v.store.AppendAudit(ctx, AuditRecord{
			Time: now, Action: AuditCredentialUse, Org: rec.Org, ItemID: rec.ID, Kind: rec.Kind, Field: cv.Field,
			Destination: a.Destination, Session: a.Session, Actor: a.Actor, Purpose: a.Purpose,
			ValueHMAC: mac.Sum(nil),
		})
		if err != nil {
			return fail(agentvault.Wrap(agentvault.CodeAuditUnavailable, err, "audit log unavailable; credential not released"))
		}
	}
	return out, nil
}

// RemoveCredential deletes a credential item (audited). A missing item is
// not an error: the credential may never have had values.
func (v *Vault) RemoveCredential(ctx context.Context, org, id, actor string) error {
	rec, err := v.store.GetItem(ctx, org, id)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if rec.Kind != KindCredential {
		return ErrNotFound
	}
	if err := v.store.DeleteItem(ctx, org, id); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	if _, err := v.store.AppendAudit(ctx, AuditRecord{Time: v.now().UTC(), Action: AuditRemove, Org: org, ItemID: id, Kind: KindCredential, Actor: actor, Purpose: "credential"}); err != nil {
		return agentvault.Wrap(agentvault.CodeAuditUnavailable, err, "credential removed, but the audit log could not be written")
	}
	return nil
}
