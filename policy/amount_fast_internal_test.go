package policy

import (
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
)

// decimalMinor agrees with the big.Rat reading on every text it takes.
func TestDecimalMinorMatchesRat(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 1))
	digits := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteByte(byte('0' + rng.IntN(10)))
		}
		return b.String()
	}
	texts := []string{"0", "00", "0.0", "42.00", "42", "0.001", "0.005", "1.999", "999999999999999", "999999999999999.999",
		"1000000000000000", "007.10", "1.", ".5", "1..2", "1.2.3", "1e3", "12.3456789"}
	for range 20000 {
		text := digits(1 + rng.IntN(17))
		if rng.IntN(2) == 0 {
			text += "." + digits(1+rng.IntN(6))
		}
		texts = append(texts, text)
	}
	for _, text := range texts {
		for exp := 0; exp <= 3; exp++ {
			n, ok := decimalMinor(text, exp)
			if !ok {
				continue
			}
			r, rok := new(big.Rat).SetString(text)
			if !rok {
				t.Fatalf("%q: decimalMinor took a text big.Rat refuses", text)
			}
			if want := ceilScaled(r, exp); !want.IsInt64() || want.Int64() != n {
				t.Fatalf("%q exp %d: %d, want %s", text, exp, n, want)
			}
		}
	}
}
