package vault

import (
	"context"

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
	return v.updateItem(ctx, org, id, KindLogin, u.Actor, func(it *Item) ([]value, error) {
		if it.Login == nil {
			return nil, errCorrupt
		}
		m := *it.Login
		it.Login = &m
		var values []value
		if u.Username != nil {
			if *u.Username == "" || !plainText(*u.Username, 200) {
				return values, agentvault.Errorf(agentvault.CodeInvalidUsername, "a username is one non-empty line of at most 200 characters")
			}
			m.Username = *u.Username
			values = append(values, value{FieldUsername, []byte(m.Username)})
		}
		if !u.Password.IsZero() {
			pw := u.Password.InsecureRawBytes()
			if len(pw) > 1024 || containsAny(pw, "\r\n\x00") {
				return values, invalid("password must be 1 to 1024 bytes on one line")
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
				return values, err
			}
			m.HasTOTP = true
			m.TOTPAlgorithm, m.TOTPDigits, m.TOTPPeriod = seed.alg, seed.digits, seed.period
			values = append(values, value{FieldTOTP, clone(seed.base32)})
			seed.wipe()
		}
		return values, nil
	})
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
