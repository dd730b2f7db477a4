package vault

import (
	"bytes"
	"crypto/rand"
	"math/big"
	"strings"

	"github.com/agentvault/agentvault"
)

// Generated passwords (seed 004, create_login and rotate_login_password).
// The vault generates them so that no agent and no owner ever reads one:
// the value is sealed as it is made, and only its shape (PasswordPolicy)
// is told to the agent, to answer a form's "must contain" rules.
const (
	// PasswordDefaultLength is the length when the site states no bound.
	PasswordDefaultLength = 24
	// PasswordMinLength and PasswordMaxLength bound every generated
	// password: a site whose maximum is below 12 gets none
	// (password_too_short), and one whose minimum is above 64 is for the
	// owner to handle (invalid_policy).
	PasswordMinLength = 12
	PasswordMaxLength = 64
	// SafeSymbols is the punctuation the vault ever uses: characters that
	// need no escaping in HTML forms, JSON, URLs' form encoding or shells.
	// A site's allowed set only filters it.
	SafeSymbols = "!@#$*+-_=.?"
)

const (
	lowerAlphabet = "abcdefghijkmnopqrstuvwxyz" // no l: it reads as 1 when an owner types it from a screen
	upperAlphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ"  // no I, O
	digitAlphabet = "23456789"                  // no 0, 1
)

// PasswordRules are the rules a site states, as the agent passes them.
// Zero values mean "not stated".
type PasswordRules struct {
	MinLength      int
	MaxLength      int
	NoSymbols      bool
	AllowedSymbols string
	NoTripleRepeat bool
}

// Policy resolves the rules to the policy the generator follows, or the
// seed's refusal: a minimum above 64, a minimum above the maximum, or an
// allowed set with nothing of the safe set is invalid_policy; a maximum
// below 12 is password_too_short.
func (r PasswordRules) Policy() (PasswordPolicy, error) {
	switch {
	case r.MinLength < 0 || r.MaxLength < 0:
		return PasswordPolicy{}, agentvault.Errorf(agentvault.CodeInvalidPolicy, "password lengths must not be negative")
	case r.MinLength > PasswordMaxLength:
		return PasswordPolicy{}, agentvault.Errorf(agentvault.CodeInvalidPolicy,
			"the vault generates passwords of at most %d characters: ask the account holder to add this login themselves", PasswordMaxLength)
	case r.MaxLength > 0 && r.MaxLength < PasswordMinLength:
		return PasswordPolicy{}, agentvault.Errorf(agentvault.CodePasswordTooShort,
			"the vault generates passwords of at least %d characters", PasswordMinLength)
	case r.MinLength > 0 && r.MaxLength > 0 && r.MinLength > r.MaxLength:
		return PasswordPolicy{}, agentvault.Errorf(agentvault.CodeInvalidPolicy, "minLength is greater than maxLength")
	}
	p := PasswordPolicy{Length: PasswordDefaultLength, Lowercase: true, Uppercase: true, Digits: true,
		Symbols: SafeSymbols, NoTripleRepeat: r.NoTripleRepeat}
	if r.MinLength > p.Length {
		p.Length = r.MinLength
	}
	if r.MaxLength > 0 && r.MaxLength < p.Length {
		p.Length = r.MaxLength
	}
	p.Length = max(p.Length, PasswordMinLength)
	switch {
	case r.NoSymbols:
		p.Symbols = ""
	case r.AllowedSymbols != "":
		var b strings.Builder
		for _, c := range SafeSymbols {
			if strings.ContainsRune(r.AllowedSymbols, c) {
				b.WriteRune(c)
			}
		}
		if b.Len() == 0 {
			return PasswordPolicy{}, agentvault.Errorf(agentvault.CodeInvalidPolicy,
				"none of the allowed symbols is in the vault's set %s: pass noSymbols when the site takes no punctuation", SafeSymbols)
		}
		p.Symbols = b.String()
	}
	return p, nil
}

// validPolicy reports whether p is a policy Policy could have produced (a
// stored policy is checked before it is used again).
func validPolicy(p PasswordPolicy) bool {
	if p.Length < PasswordMinLength || p.Length > PasswordMaxLength || !p.Lowercase || !p.Uppercase || !p.Digits {
		return false
	}
	for _, c := range p.Symbols {
		if !strings.ContainsRune(SafeSymbols, c) {
			return false
		}
	}
	return true
}

// GeneratePassword makes a password following p from crypto/rand: at least
// one lower case letter, one upper case letter, one digit and (unless the
// policy has no symbols) one symbol, and with NoTripleRepeat never three
// equal characters in a row.
func GeneratePassword(p PasswordPolicy) (Secret, error) {
	if !validPolicy(p) {
		return Secret{}, agentvault.Errorf(agentvault.CodeInvalidPolicy, "not a password policy the vault generates")
	}
	classes := []string{lowerAlphabet, upperAlphabet, digitAlphabet}
	if p.Symbols != "" {
		classes = append(classes, p.Symbols)
	}
	all := strings.Join(classes, "")
	buf := make([]byte, p.Length)
	for tries := 0; tries < 1000; tries++ {
		for i := range buf {
			c, err := pick(all)
			if err != nil {
				wipe(buf)
				return Secret{}, err
			}
			buf[i] = c
		}
		if hasEvery(buf, classes) && (!p.NoTripleRepeat || !TripleRepeat(buf)) {
			s := NewSecret(buf)
			wipe(buf)
			return s, nil
		}
	}
	wipe(buf)
	return Secret{}, agentvault.Errorf(agentvault.CodeInternal, "could not generate a password")
}

func pick(alphabet string) (byte, error) {
	n, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
	if err != nil {
		return 0, agentvault.Wrap(agentvault.CodeInternal, err, "no randomness for a password")
	}
	return alphabet[n.Int64()], nil
}

func hasEvery(b []byte, classes []string) bool {
	for _, cl := range classes {
		if !bytes.ContainsAny(b, cl) {
			return false
		}
	}
	return true
}

// TripleRepeat reports whether b holds three equal bytes in a row.
func TripleRepeat(b []byte) bool {
	for i := 2; i < len(b); i++ {
		if b[i] == b[i-1] && b[i] == b[i-2] {
			return true
		}
	}
	return false
}
