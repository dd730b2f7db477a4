package merchant

import (
	"crypto/rand"
	"fmt"
	"strings"
	"time"
)

// luhnValid reports whether digits (ASCII digits only) pass the Luhn check.
func luhnValid(digits string) bool {
	if len(digits) < 12 || len(digits) > 19 {
		return false
	}
	sum := 0
	double := false
	for i := len(digits) - 1; i >= 0; i-- {
		c := digits[i]
		if c < '0' || c > '9' {
			return false
		}
		d := int(c - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}

// digitsOnly drops the spaces and dashes a card form inserts for readability.
func digitsOnly(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '-' {
			return -1
		}
		return r
	}, s)
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// brand names the network from the number's prefix, the way a card form
// picks the logo to show.
func brand(number string) string {
	switch {
	case strings.HasPrefix(number, "4"):
		return "visa"
	case strings.HasPrefix(number, "34"), strings.HasPrefix(number, "37"):
		return "amex"
	case len(number) >= 2 && number[0] == '5' && number[1] >= '1' && number[1] <= '5':
		return "mastercard"
	case strings.HasPrefix(number, "2"):
		return "mastercard"
	case strings.HasPrefix(number, "6011"), strings.HasPrefix(number, "65"):
		return "discover"
	}
	return "unknown"
}

// cvcLength is 4 for American Express and 3 for the others.
func cvcLength(number string) int {
	if brand(number) == "amex" {
		return 4
	}
	return 3
}

// expired reports whether a card expiring at the end of month/year has
// expired at now. Two-digit years are taken as 20YY.
func expired(month, year int, now time.Time) bool {
	if year < 100 {
		year += 2000
	}
	if month < 1 || month > 12 {
		return true
	}
	end := time.Date(year, time.Month(month)+1, 1, 0, 0, 0, 0, time.UTC)
	return !now.Before(end)
}

// formatCents renders 4250 as "42.50".
func formatCents(c int64) string {
	return fmt.Sprintf("%d.%02d", c/100, c%100)
}

// GenerateCardNumber returns a random number of the given length that starts
// with prefix and passes the Luhn check: unique test cards, so a proof can
// grep every output for a value nobody else could have produced. rnd must
// return a uniformly random digit 0-9.
func GenerateCardNumber(prefix string, length int, rnd func() int) string {
	b := []byte(prefix)
	for len(b) < length-1 {
		b = append(b, byte('0'+rnd()))
	}
	for check := byte('0'); check <= '9'; check++ {
		if luhnValid(string(append(b, check))) {
			return string(append(b, check))
		}
	}
	panic("merchant: no Luhn check digit") // unreachable: one of ten digits always fits
}

// RandomCard returns a fresh Visa-shaped test card: a 16-digit number that
// passes Luhn and a 3-digit security code, both random. Each proof run uses
// its own, so finding one in an output can only mean it leaked from this run.
func RandomCard() (number, cvc string) {
	digit := func() int {
		var b [1]byte
		for {
			if _, err := rand.Read(b[:]); err != nil {
				panic("merchant: crypto/rand failed: " + err.Error())
			}
			if b[0] < 250 { // reject to keep digits uniform
				return int(b[0] % 10)
			}
		}
	}
	number = GenerateCardNumber("4", 16, digit)
	c := make([]byte, 3)
	for i := range c {
		c[i] = byte('0' + digit())
	}
	return number, string(c)
}
