package vault

import (
	"strings"
	"testing"
	"time"

	agentvault "github.com/agentvault/agentvault"
)

func TestLuhnAndBrand(t *testing.T) {
	cases := []struct {
		n     string
		luhn  bool
		brand string
	}{
		{"4242424242424242", true, "visa"},
		{"4242424242424241", false, "visa"},
		{"5555555555554444", true, "mastercard"},
		{"2223003122003222", true, "mastercard"},
		{"378282246310005", true, "amex"},
		{"6011111111111117", true, "discover"},
		{"3566002020360505", true, "jcb"},
		{"30569309025904", true, "diners"},
		{"6200000000000005", true, "unionpay"},
		{"9999999999999995", true, "card"},
	}
	for _, c := range cases {
		if got := luhnValid([]byte(c.n)); got != c.luhn {
			t.Errorf("luhn(%s) = %v", c.n, got)
		}
		if got := cardBrand([]byte(c.n)); got != c.brand {
			t.Errorf("brand(%s) = %s, want %s", c.n, got, c.brand)
		}
	}
}

func TestValidateCard(t *testing.T) {
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	ok := CardInput{Number: NewSecret([]byte("4242424242424242")), CVV: NewSecret([]byte("123")),
		ExpiryMonth: 12, ExpiryYear: 2030, Holder: "A Person", AnySite: true}
	mod := func(f func(*CardInput)) CardInput { c := ok; f(&c); return c }
	cases := []struct {
		name string
		in   CardInput
		ok   bool
	}{
		{"valid", ok, true},
		{"this month", mod(func(c *CardInput) { c.ExpiryMonth, c.ExpiryYear = 11, 2026 }), true},
		{"last month", mod(func(c *CardInput) { c.ExpiryMonth, c.ExpiryYear = 10, 2026 }), false},
		{"last year", mod(func(c *CardInput) { c.ExpiryYear = 2025 }), false},
		{"two-digit year", mod(func(c *CardInput) { c.ExpiryYear = 30 }), false},
		{"month 0", mod(func(c *CardInput) { c.ExpiryMonth = 0 }), false},
		{"month 13", mod(func(c *CardInput) { c.ExpiryMonth = 13 }), false},
		{"luhn", mod(func(c *CardInput) { c.Number = NewSecret([]byte("4242424242424241")) }), false},
		{"11 digits", mod(func(c *CardInput) { c.Number = NewSecret([]byte("42424242426")) }), false},
		{"20 digits", mod(func(c *CardInput) { c.Number = NewSecret([]byte("42424242424242424242")) }), false},
		{"spaces", mod(func(c *CardInput) { c.Number = NewSecret([]byte("4242 4242 4242 4242")) }), false},
		{"cvv 2", mod(func(c *CardInput) { c.CVV = NewSecret([]byte("12")) }), false},
		{"cvv 4 visa", mod(func(c *CardInput) { c.CVV = NewSecret([]byte("1234")) }), false},
		{"cvv letters", mod(func(c *CardInput) { c.CVV = NewSecret([]byte("12a")) }), false},
		{"amex cvv 4", mod(func(c *CardInput) {
			c.Number, c.CVV = NewSecret([]byte("378282246310005")), NewSecret([]byte("1234"))
		}), true},
		{"amex cvv 3", mod(func(c *CardInput) { c.Number = NewSecret([]byte("378282246310005")) }), false},
		{"live cvv", mod(func(c *CardInput) { c.LiveCVV, c.CVV = true, Secret{} }), true},
		{"live cvv with cvv", mod(func(c *CardInput) { c.LiveCVV = true }), false},
		{"no sites", mod(func(c *CardInput) { c.AnySite = false }), false},
		{"both sites and any", mod(func(c *CardInput) { c.Sites = []string{"a.com"} }), false},
		// hostname.Site: an IP address is a site of its own; a public
		// suffix or a single label is none.
		{"ip site", mod(func(c *CardInput) { c.AnySite, c.Sites = false, []string{"203.0.113.7"} }), true},
		{"public suffix site", mod(func(c *CardInput) { c.AnySite, c.Sites = false, []string{"co.uk"} }), false},
		{"single label site", mod(func(c *CardInput) { c.AnySite, c.Sites = false, []string{"localhost"} }), false},
		{"holder newline", mod(func(c *CardInput) { c.Holder = "a\nb" }), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := validateCard(c.in, now)
			if (err == nil) != c.ok {
				t.Fatalf("err = %v, want ok=%v", err, c.ok)
			}
			if err != nil {
				if agentvault.ErrorCode(err) != agentvault.CodeInvalidInput {
					t.Fatalf("code %q", agentvault.ErrorCode(err))
				}
				for _, s := range []string{"4242424242424242", "378282246310005", "123"} {
					if strings.Contains(err.Error(), s) {
						t.Fatal("validation error repeats the value")
					}
				}
			}
		})
	}
}

func TestRegistrableDomain(t *testing.T) {
	cases := []struct{ in, want string }{
		{"github.com", "github.com"},
		{"GitHub.COM.", "github.com"},
		{"www.github.com", "github.com"},
		{"https://login.example.co.uk/path?q", "example.co.uk"},
		{"shop.example.de", "example.de"},
		{"com", ""},
		{"co.uk", ""},
		{"github.io", ""},
		// An IP address is a site of its own (hostname.Site).
		{"127.0.0.1", "127.0.0.1"},
		{"[::1]", "::1"},
		{"localhost", ""},
		{"", ""},
		// Behaviour changes (package hostname is the one normaliser): "_"
		// is allowed as browsers allow it, a Unicode name is stored as the
		// punycode the wire carries, and a host:port or scheme-less path
		// gives its host.
		{"my_shop.com", "my_shop.com"},
		{"exämple.com", "xn--exmple-cua.com"},
		{"shop.example.de:8443", "example.de"},
		{"shop.example.de/login", "example.de"},
		{"-a.com", ""},
		{"a..com", ""},
		{"ftp://example.com/", ""},
		{"https://example.com@evil.com/", ""},
		{"xn--exmple-cua.com", "xn--exmple-cua.com"},
	}
	for _, c := range cases {
		got, err := registrableDomain(c.in)
		if c.want == "" {
			if err == nil {
				t.Errorf("%q: accepted as %q, want refused", c.in, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%q: %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

func TestEmailPhoneAddress(t *testing.T) {
	for s, want := range map[string]bool{
		"a@example.com": true, "a.b+c@sub.example.org": true, "a@b": false, "Name <a@b.com>": false,
		"a@@b.com": false, "": false, "a b@c.com": false, "a@example.com.": false,
	} {
		if validEmail(s) != want {
			t.Errorf("validEmail(%q) != %v", s, want)
		}
	}
	for s, want := range map[string]bool{"+49 30 1234567": true, "(555) 123-4567": true, "12": false, "abc1234": false, "1+23456": false} {
		if validPhone(s) != want {
			t.Errorf("validPhone(%q) != %v", s, want)
		}
	}
	good := AddressMeta{Line1: "1 Main St", City: "Berlin", PostalCode: "10115", Country: "DE"}
	if err := validateAddress(good); err != nil {
		t.Fatal(err)
	}
	bad := good
	bad.Country = "de"
	if validateAddress(bad) == nil {
		t.Error("lower-case country accepted")
	}
	bad = good
	bad.City = ""
	if validateAddress(bad) == nil {
		t.Error("missing city accepted")
	}
}

// TestLoginLabelSuffix: the n-th login on a site gets a suffixed label
// within the grammar's bound (the base label's rule is vault/item's, tested
// there).
func TestLoginLabelSuffix(t *testing.T) {
	if got := labelWithSuffix("github", 2); got != "github-2" {
		t.Errorf("suffix: %q", got)
	}
	long := labelWithSuffix(strings.Repeat("a", 32), 12)
	if len(long) != 32 || !strings.HasSuffix(long, "a-12") {
		t.Errorf("long suffix: %q", long)
	}
	if got := labelWithSuffix(strings.Repeat("a", 29)+"-bb", 2); got != strings.Repeat("a", 29)+"-2" {
		t.Errorf("suffix after a cut at '-': %q", got)
	}
}

// luhnReference is the textbook statement of the check, written
// independently of luhnValid: double every second digit from the right and
// add the digits of the products.
func luhnReference(s string) bool {
	total := 0
	for i := 0; i < len(s); i++ {
		d := int(s[len(s)-1-i] - '0')
		if i%2 == 1 {
			p := 2 * d
			total += p/10 + p%10
		} else {
			total += d
		}
	}
	return total%10 == 0
}

func FuzzLuhn(f *testing.F) {
	for _, s := range []string{"4242424242424242", "4242424242424241", "378282246310005", "0", "79927398713"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !allDigits([]byte(s)) {
			return
		}
		if luhnValid([]byte(s)) != luhnReference(s) {
			t.Fatalf("luhn disagrees with the reference for %d digits", len(s))
		}
		if len(s) >= 1 {
			_ = cardBrand([]byte(s)) // must not panic on any digit string
		}
	})
}

func FuzzParseKey(f *testing.F) {
	f.Add([]byte("0000000000000000000000000000000000000000000000000000000000000000\n"))
	f.Add(make([]byte, 32))
	f.Add([]byte("zz"))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := ParseKey(b)
		if err == nil && len(k) != keySize {
			t.Fatalf("ParseKey returned %d bytes", len(k))
		}
	})
}
