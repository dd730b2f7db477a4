package vault

import (
	"context"
	"encoding/json"

	agentvault "github.com/agentvault/agentvault"
)

// CardUpdate changes what a card may be used for and who it belongs to.
// A nil field is left as it is. The number, CVV and expiry cannot change:
// a new card is added as a new item.
type CardUpdate struct {
	// Sites, when non-nil, replaces the card's site list; a non-empty list
	// also turns any-site off (unless AnySite says otherwise, which is
	// then refused).
	Sites []string
	// AnySite, when set, turns any-site on (clearing the site list when
	// Sites is nil) or off (then Sites must give the list).
	AnySite *bool
	// Holder replaces the holder name (metadata and the holder field); ""
	// removes it.
	Holder *string
	// Billing replaces the billing address; ClearBilling removes it.
	Billing      *AddressMeta
	ClearBilling bool
	// Actor is who made the change, for the audit record ("owner:...").
	Actor string
}

// UpdateCard applies u to the card id: the item's metadata (and the holder
// field when it changes) are sealed again under the item's data key and the
// item is stored in one PutItem; the number and CVV ciphertexts are kept as
// they are. The change is audited (action "update"). A concurrent Remove of
// the same card can be undone by an update that read the card before it:
// the owner's dashboard is the only writer, one form at a time.
func (v *Vault) UpdateCard(ctx context.Context, org, id string, u CardUpdate) (Item, error) {
	return v.updateItem(ctx, org, id, KindCard, u.Actor, func(it *Item) ([]value, error) {
		if it.Card == nil {
			return nil, errCorrupt
		}
		m := *it.Card
		it.Card = &m
		anySite, sites := m.AnySite, m.Sites
		switch {
		case u.AnySite != nil && u.Sites == nil:
			anySite = *u.AnySite
			if anySite {
				sites = nil
			}
		case u.AnySite != nil:
			anySite, sites = *u.AnySite, u.Sites
		case u.Sites != nil:
			anySite, sites = len(u.Sites) == 0 && m.AnySite, u.Sites
		}
		var err error
		if m.Sites, err = checkSites(anySite, sites); err != nil {
			return nil, err
		}
		m.AnySite = anySite
		if u.Holder != nil {
			if err := checkHolder(*u.Holder); err != nil {
				return nil, err
			}
			m.HolderName = *u.Holder
		}
		switch {
		case u.Billing != nil && u.ClearBilling:
			return nil, invalid("give a billing address or clear it, not both")
		case u.Billing != nil:
			if err := validateAddress(*u.Billing); err != nil {
				return nil, err
			}
			b := *u.Billing
			m.Billing = &b
		case u.ClearBilling:
			m.Billing = nil
		}
		if u.Holder == nil {
			return nil, nil
		}
		var holder []byte // nil: the holder field goes
		if m.HolderName != "" {
			holder = []byte(m.HolderName)
		}
		return []value{{FieldHolder, holder}}, nil
	})
}

// fieldOrder is the order of an item's fields in ItemRecord.Fields, by kind
// (the order the add calls seal them in).
var fieldOrder = map[Kind][]Field{
	KindCard:  {FieldNumber, FieldCVV, FieldHolder},
	KindLogin: {FieldEmail, FieldUsername, FieldPassword, FieldTOTP},
}

// updateItem is the one read-modify-write of a stored item (UpdateCard,
// UpdateLogin): it opens item id, which must be of kind, and lets change
// edit it and say which values to seal again (a nil value removes the
// field). The metadata and those values are sealed under the item's data
// key, the other ciphertexts kept, and the item stored in one PutItem
// (putRewrapping) and audited as an update by actor.
func (v *Vault) updateItem(ctx context.Context, org, id string, kind Kind, actor string, change func(it *Item) ([]value, error)) (Item, error) {
	v.rotMu.RLock()
	defer v.rotMu.RUnlock()
	rec, err := v.store.GetItem(ctx, org, id)
	if err != nil {
		return Item{}, err
	}
	if rec.Kind != kind {
		return Item{}, ErrNotFound
	}
	it, err := v.openItem(rec)
	if err != nil {
		return Item{}, err
	}
	values, err := change(&it)
	defer func() {
		for _, val := range values {
			wipe(val.b)
		}
	}()
	if err != nil {
		return Item{}, err
	}

	dek, err := v.dataKey(rec)
	if err != nil {
		return Item{}, err
	}
	defer wipe(dek)
	mj, err := json.Marshal(itemMeta{Card: it.Card, Login: it.Login})
	if err != nil {
		return Item{}, agentvault.Wrap(agentvault.CodeInternal, err, "cannot encode item metadata")
	}
	defer wipe(mj)
	if rec.Meta, err = seal(dek, "", mj, fieldAAD(org, id, metaField())); err != nil {
		return Item{}, err
	}
	for _, val := range values {
		if val.b == nil {
			delete(rec.Values, val.field)
			continue
		}
		ct, err := seal(dek, "", val.b, fieldAAD(org, id, val.field))
		if err != nil {
			return Item{}, err
		}
		rec.Values[val.field] = ct
	}
	if len(values) > 0 {
		rec.Fields = rec.Fields[:0]
		for _, f := range fieldOrder[kind] {
			if _, ok := rec.Values[f]; ok {
				rec.Fields = append(rec.Fields, f)
			}
		}
	}
	now := v.now().UTC()
	rec.Updated = now
	if err := v.putRewrapping(ctx, &rec); err != nil {
		return Item{}, err
	}
	it.Updated, it.Fields = now, append([]Field(nil), rec.Fields...)
	if _, err := v.store.AppendAudit(ctx, AuditRecord{Time: now, Action: AuditUpdate, Org: org, ItemID: id, Kind: kind, Actor: actor}); err != nil {
		return it, agentvault.Wrap(agentvault.CodeAuditUnavailable, err, "%s updated, but the audit log could not be written", kind)
	}
	return it, nil
}

// putRewrapping stores rec; when the write conflicts because another
// process rotated the master key, it adopts the new key, re-wraps rec's
// data key and tries again (a few times at most).
func (v *Vault) putRewrapping(ctx context.Context, rec *ItemRecord) error {
	for tries := 0; ; tries++ {
		err := v.store.PutItem(ctx, *rec)
		if err == nil {
			return nil
		}
		if agentvault.ErrorCode(err) != agentvault.CodeConflict || tries >= 3 {
			return err
		}
		changed, rerr := v.refreshActive(ctx)
		if rerr != nil {
			return rerr
		}
		if !changed {
			return err
		}
		if err := v.rewrap(rec); err != nil {
			return err
		}
	}
}
