package intercept

import (
	"crypto/rand"
	"math/big"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/vault"
)

// The token grammar and stand-in generation belong to package tokens; until
// it lands these small local versions keep the proxy working. They follow
// docs/DESIGN.md: stand-ins keep the real value's format, never equal it.

func randIntn(n int) int {
	v, err := rand.Int(rand.Reader, big.NewInt(int64(n)))
	if err != nil {
		panic("crypto/rand failed") // the platform's CSPRNG failing is not recoverable
	}
	return int(v.Int64())
}

func randDigits(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('0' + randIntn(10))
	}
	return b
}

func luhnValid(d []byte) bool {
	sum := 0
	for i := len(d) - 1; i >= 0; i-- {
		x := int(d[i] - '0')
		if (len(d)-1-i)%2 == 1 {
			x *= 2
			if x > 9 {
				x -= 9
			}
		}
		sum += x
	}
	return sum%10 == 0
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}

// makeStandIn returns a format-preserving stand-in for real. taken reports
// whether a candidate is already used in the session.
func makeStandIn(field vault.Field, real []byte, taken func(string) bool) (string, error) {
	for range 64 {
		var c []byte
		switch {
		case field == vault.FieldNumber && allDigits(real) && len(real) >= 12:
			c = append([]byte{}, real[:6]...)
			c = append(c, randDigits(len(real)-10)...)
			c = append(c, real[len(real)-4:]...)
			// Fix the Luhn check by adjusting the last middle digit.
			i := len(real) - 5
			for d := byte('0'); d <= '9'; d++ {
				c[i] = d
				if luhnValid(c) {
					break
				}
			}
		case field == vault.FieldTOTP:
			c = randDigits(6)
		case allDigits(real):
			c = randDigits(len(real))
		default:
			c = classPreserving(real)
		}
		s := string(c)
		if s != string(real) && !taken(s) {
			return s, nil
		}
	}
	return "", agentvault.Errorf(agentvault.CodeSubstitution, "could not build a unique stand-in")
}

const (
	lowers  = "abcdefghijkmnopqrstuvwxyz"
	uppers  = "ABCDEFGHJKLMNPQRSTUVWXYZ"
	symbols = "!#$%*+-.=?@^_~"
)

func classPreserving(real []byte) []byte {
	out := make([]byte, len(real))
	for i, ch := range real {
		switch {
		case ch >= 'a' && ch <= 'z':
			out[i] = lowers[randIntn(len(lowers))]
		case ch >= 'A' && ch <= 'Z':
			out[i] = uppers[randIntn(len(uppers))]
		case ch >= '0' && ch <= '9':
			out[i] = byte('0' + randIntn(10))
		default:
			out[i] = symbols[randIntn(len(symbols))]
		}
	}
	return out
}
