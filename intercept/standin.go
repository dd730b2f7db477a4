package intercept

import (
	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/tokens"
	"github.com/agentvault/agentvault/vault"
)

// uniqueStandIn asks package tokens for a format-preserving stand-in that
// no other binding of the session uses yet.
func uniqueStandIn(field vault.Field, real vault.Secret, taken func(string) bool) (string, error) {
	for range 32 {
		b, err := tokens.StandIn(field, real, nil)
		if err != nil {
			return "", err
		}
		if s := string(b); !taken(s) {
			return s, nil
		}
	}
	return "", agentvault.Errorf(agentvault.CodeSubstitution, "could not build a unique stand-in")
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}
