package owner

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/agentvault/agentvault"
	"golang.org/x/crypto/argon2"
)

// PasswordParams are argon2id's cost parameters. They are written into every
// hash (PHC string format), so raising them later keeps old hashes working.
type PasswordParams struct {
	Memory  uint32 // KiB
	Time    uint32
	Threads uint8
}

// DefaultPasswordParams follow RFC 9106's second recommended option (64 MiB,
// 3 passes) with one lane: the appliance is small and sign-ins are rare.
var DefaultPasswordParams = PasswordParams{Memory: 64 * 1024, Time: 3, Threads: 1}

const (
	saltLen = 16
	hashLen = 32
	// minPasswordLen is the shortest owner password accepted. The dashboard
	// guards real cards; NIST SP 800-63B asks for at least 8, we ask more.
	minPasswordLen = 12
	maxPasswordLen = 1024
	// maxMemoryKiB bounds what a stored hash may ask for (128 MiB, twice
	// the default), so a tampered row cannot make a sign-in allocate
	// gigabytes or run for seconds.
	maxMemoryKiB = 128 * 1024
)

// HashPassword returns the argon2id PHC string for pw:
// $argon2id$v=19$m=65536,t=3,p=1$<salt>$<hash> (raw base64).
func HashPassword(pw string, p PasswordParams) (string, error) {
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", agentvault.Wrap(agentvault.CodeInternal, err, "no randomness")
	}
	return encodeHash(p, salt, idKey([]byte(pw), salt, p, hashLen)), nil
}

func encodeHash(p PasswordParams, salt, h []byte) string {
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, p.Memory, p.Time, p.Threads,
		enc.EncodeToString(salt), enc.EncodeToString(h))
}

// dummyHash is a well-formed hash with p's cost that no password matches
// (its hash bytes are random, not derived from anything): checking a
// sign-in against it costs exactly what checking a real one does, without
// spending an argon2id run (and its 64 MiB) to make it.
func dummyHash(p PasswordParams) (string, error) {
	b := make([]byte, saltLen+hashLen)
	if _, err := rand.Read(b); err != nil {
		return "", agentvault.Wrap(agentvault.CodeInternal, err, "no randomness")
	}
	return encodeHash(p, b[:saltLen], b[saltLen:]), nil
}

// idKey is argon2id, after which the memory it filled (64 MiB by default)
// goes back to the OS at once instead of staying resident until the
// scavenger gets to it: sign-ins are rare, the proxy's idle footprint is
// not.
func idKey(pw, salt []byte, p PasswordParams, n uint32) []byte {
	k := argon2.IDKey(pw, salt, p.Time, p.Memory, p.Threads, n)
	debug.FreeOSMemory()
	return k
}

// CheckPassword reports whether pw matches encoded, in constant time for a
// given encoded hash. A malformed hash never matches.
func CheckPassword(pw, encoded string) bool {
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false
	}
	var v int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &v); err != nil || v != argon2.Version {
		return false
	}
	var p PasswordParams
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.Memory, &p.Time, &p.Threads); err != nil {
		return false
	}
	// Refuse parameters nobody here writes (see maxMemoryKiB).
	if p.Memory == 0 || p.Memory > maxMemoryKiB || p.Time == 0 || p.Time > 8 || p.Threads == 0 || p.Threads > 16 ||
		uint64(p.Memory)*uint64(p.Time) > maxMemoryKiB*4 {
		return false
	}
	enc := base64.RawStdEncoding
	salt, err := enc.DecodeString(parts[4])
	if err != nil || len(salt) < 8 {
		return false
	}
	want, err := enc.DecodeString(parts[5])
	if err != nil || len(want) < 16 {
		return false
	}
	got := idKey([]byte(pw), salt, p, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1
}

func checkPasswordPolicy(pw string) error {
	if len(pw) < minPasswordLen {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "the password must have at least %d characters", minPasswordLen)
	}
	if len(pw) > maxPasswordLen {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "the password is too long")
	}
	return nil
}
