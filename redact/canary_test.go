package redact

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/internal/leakcheck"
)

// luhnNumber returns a random card number of n digits that passes Luhn.
func luhnNumber(r *rand.Rand, n int) string {
	d := make([]int, n)
	d[0] = 4
	for i := 1; i < n-1; i++ {
		d[i] = r.IntN(10)
	}
	sum := 0
	for i := n - 2; i >= 0; i-- {
		v := d[i]
		if (n-2-i)%2 == 0 {
			v *= 2
			if v > 9 {
				v -= 9
			}
		}
		sum += v
	}
	d[n-1] = (10 - sum%10) % 10
	var b strings.Builder
	for _, v := range d {
		b.WriteByte(byte('0' + v))
	}
	return b.String()
}

func group(s string, size int, sep string) string {
	var parts []string
	for len(s) > size {
		parts = append(parts, s[:size])
		s = s[size:]
	}
	return strings.Join(append(parts, s), sep)
}

// TestP19_ScrubRandomSecrets is a canary: random card numbers (in the ways
// pages print them), emails, phone numbers, tokens and filled passwords,
// embedded in error sentences; none may survive the scrubber.
func TestP19_ScrubRandomSecrets(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 11))
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%"
	for i := range 2000 {
		n := 13 + r.IntN(7)
		num := luhnNumber(r, n)
		cards := []string{num, group(num, 4, " "), group(num, 4, "-"), group(num, 4, "\u00a0"),
			group(num, 4, "\u200b"), group(num, 4, " - "), group(num, 4, "\n")}
		card := cards[r.IntN(len(cards))]
		user := fmt.Sprintf("u%dx", r.IntN(1e6))
		email := user + "@shop" + fmt.Sprint(r.IntN(100)) + ".example"
		phone := fmt.Sprintf("+%d (%03d) %03d-%04d", 1+r.IntN(98), r.IntN(1000), r.IntN(1000), r.IntN(10000))
		token := fmt.Sprintf("av_card_%d_number_%05x", r.IntN(9)+1, r.IntN(1<<20))
		pw := make([]byte, 8+r.IntN(16))
		for j := range pw {
			pw[j] = letters[r.IntN(len(letters))]
		}
		text := fmt.Sprintf("Card %s declined for %s; call %s. Token %s rejected, password %s too weak.",
			card, email, phone, token, pw)
		got := ScrubErrorText(text, [][]byte{pw, []byte(num)})
		l := leakcheck.New(leakcheck.Value("card number", num), leakcheck.Value("card as printed", card), leakcheck.Value("email", email),
			leakcheck.Value("email's user", user), leakcheck.Value("phone", phone), leakcheck.Value("token", token), leakcheck.Value("password", string(pw)))
		// The scrubbed text is what observe_page answers.
		if f := l.Find(leakcheck.Answer, "the scrubbed text", []byte(got)); len(f) > 0 {
			t.Fatalf("case %d: %v", i, f)
		}
		if HasSensitiveShape(got) {
			t.Fatalf("case %d: output still has a sensitive shape", i)
		}
	}
}
