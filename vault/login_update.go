package vault

import (
	"context"
	"encoding/json"

	agentvault "github.com/agentvault/agentvault"
)

// LoginUpdate changes a login. A nil or zero field is left as it is.
type LoginUpdate struct {
	// Username sets the login's handle ("" is refused: a handle is set,
	// never cleared, by this call).
	Username *string
	// Password replaces the password. With Generated it is a password the
	// vault generated (rotate_login_password); without, the owner typed
	// it and the login becomes owner-managed.
	Password  Secret
	Generated *PasswordPolicy
	// TOTP stores an authenticator seed (base32 or an otpauth:// URI).
	TOTP Secret
	// Actor is who made the change, for the audit record.
	Actor string
}

// UpdateLogin applies u to the login id: the metadata and each changed
// value are sealed again under the item's data key and stored in one
// PutItem; the other ciphertexts are kept. Audited as an update.
func (v *Vault) UpdateLogin(ctx context.Context, org, id string, u LoginUpdate) (Item, error) {
	v.rotMu.RLock()
	defer v.rotMu.RUnlock()
	rec, err := v.store.GetItem(ctx, org, id)
	if err != nil {
		return Item{}, err
	}
	if rec.Kind != KindLogin {
		return Item{}, ErrNotFound
	}
	it, err := v.openItem(rec)
	if err != nil {
		return Item{}, err
	}
	if it.Login == nil {
		return Item{}, errCorrupt
	}
	m := *it.Login
	var values []value
	defer func() {
		for _, val := range values {
			wipe(val.b)
		}
	}()
	if u.Username != nil {
		if *u.Username == "" || !plainText(*u.Username, 200) {
			return Item{}, agentvault.Errorf(agentvault.CodeInvalidUsername, "a username is one non-empty line of at most 200 characters")
		}
		m.Username = *u.Username
		values = append(values, value{FieldUsername, []byte(m.Username)})
	}
	if !u.Password.IsZero() {
		pw := u.Password.InsecureRawBytes()
		if len(pw) > 1024 || containsAny(pw, "\r\n\x00") {
			return Item{}, invalid("password must be 1 to 1024 bytes on one line")
		}
		m.PasswordLen = len(pw)
		if u.Generated != nil {
			g := *u.Generated
			m.Generated, m.OwnerManaged = &g, false
		} else {
			m.OwnerManaged = m.Generated != nil
		}
		values = append(values, value{FieldPassword, clone(pw)})
	}
	if !u.TOTP.IsZero() {
		seed, err := parseTOTPSeed(u.TOTP.InsecureRawBytes())
		if err != nil {
			return Item{}, err
		}
		m.HasTOTP = true
		m.TOTPAlgorithm, m.TOTPDigits, m.TOTPPeriod = seed.alg, seed.digits, seed.period
		values = append(values, value{FieldTOTP, clone(seed.base32)})
		seed.wipe()
	}

	dek, err := v.dataKey(rec)
	if err != nil {
		return Item{}, err
	}
	defer wipe(dek)
	mj, err := json.Marshal(itemMeta{Login: &m})
	if err != nil {
		return Item{}, agentvault.Wrap(agentvault.CodeInternal, err, "cannot encode item metadata")
	}
	defer wipe(mj)
	if rec.Meta, err = seal(dek, "", mj, fieldAAD(org, id, metaField())); err != nil {
		return Item{}, err
	}
	for _, val := range values {
		ct, err := seal(dek, "", val.b, fieldAAD(org, id, val.field))
		if err != nil {
			return Item{}, err
		}
		rec.Values[val.field] = ct
	}
	rec.Fields = rec.Fields[:0]
	for _, f := range []Field{FieldEmail, FieldUsername, FieldPassword, FieldTOTP} {
		if _, ok := rec.Values[f]; ok {
			rec.Fields = append(rec.Fields, f)
		}
	}
	now := v.now().UTC()
	rec.Updated = now
	if err := v.putRewrapping(ctx, &rec); err != nil {
		return Item{}, err
	}
	it.Login, it.Updated, it.Fields = &m, now, append([]Field(nil), rec.Fields...)
	if _, err := v.store.AppendAudit(ctx, AuditRecord{Time: now, Action: AuditUpdate, Org: org, ItemID: id, Kind: KindLogin, Actor: u.Actor}); err != nil {
		return it, agentvault.Wrap(agentvault.CodeAuditUnavailable, err, "login updated, but the audit log could not be written")
	}
	return it, nil
}

func containsAny(b []byte, chars string) bool {
	for _, c := range b {
		for i := 0; i < len(chars); i++ {
			if c == chars[i] {
				return true
			}
		}
	}
	return false
}
