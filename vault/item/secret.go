package item

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"log/slog"
)

// Secret is a real value from the vault: a card number, a CVV, a password, a
// TOTP seed. It has no exported fields and cannot be compared with ==; every
// way of printing it prints REDACTED. The bytes come out only through
// InsecureRawBytes, whose name says what calling it means.
type Secret struct {
	_ [0]func() // makes Secret incomparable with ==
	b []byte
}

const redacted = "REDACTED"

// NewSecret copies b into a Secret. The caller should wipe b afterwards.
func NewSecret(b []byte) Secret {
	c := make([]byte, len(b))
	copy(c, b)
	return Secret{b: c}
}

// InsecureRawBytes returns the real value. Only the substitution path, the
// scrubber and the stand-in generator may call it, and they must not keep,
// log or return what they get.
func (s Secret) InsecureRawBytes() []byte { return s.b }

// Len is the length of the value in bytes.
func (s Secret) Len() int { return len(s.b) }

// IsZero reports whether s holds nothing.
func (s Secret) IsZero() bool { return len(s.b) == 0 }

// Equal compares in constant time.
func (s Secret) Equal(o Secret) bool {
	return len(s.b) == len(o.b) && subtle.ConstantTimeCompare(s.b, o.b) == 1
}

// Wipe overwrites the value in place.
func (s Secret) Wipe() {
	for i := range s.b {
		s.b[i] = 0
	}
}

func (Secret) String() string                { return redacted }
func (Secret) GoString() string              { return redacted }
func (Secret) LogValue() slog.Value          { return slog.StringValue(redacted) }
func (Secret) MarshalJSON() ([]byte, error)  { return json.Marshal(redacted) }
func (Secret) MarshalText() ([]byte, error)  { return []byte(redacted), nil }
func (Secret) Format(f fmt.State, verb rune) { _, _ = f.Write([]byte(redacted)) }

var (
	_ fmt.Stringer   = Secret{}
	_ fmt.Formatter  = Secret{}
	_ slog.LogValuer = Secret{}
	_ json.Marshaler = Secret{}
)
