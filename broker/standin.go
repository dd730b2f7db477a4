package broker

import (
	"github.com/agentvault/agentvault/tokens"
	"github.com/agentvault/agentvault/vault"
)

// uniqueStandIn is tokens.StandInUnlike over the session's binding table:
// a format-preserving stand-in no other binding of the session uses yet.
func uniqueStandIn(field vault.Field, real vault.Secret, taken func(string) bool) (string, error) {
	b, err := tokens.StandInUnlike(field, real, nil, func(c []byte) bool { return taken(string(c)) })
	return string(b), err
}
