package vault

import (
	"net/mail"
	"slices"
	"strconv"
	"strings"
	"time"

	agentvault "github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/hostname"
	"github.com/agentvault/agentvault/vault/item"
)

// invalid is the one way validation fails: CodeInvalidInput, a message that
// names the field and the rule, never the value.
func invalid(format string, args ...any) error {
	return agentvault.Errorf(agentvault.CodeInvalidInput, format, args...)
}

func allDigits(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// luhnValid is the ISO/IEC 7812-1 check digit test.
func luhnValid(digits []byte) bool {
	sum := 0
	double := false
	for i := len(digits) - 1; i >= 0; i-- {
		d := int(digits[i] - '0')
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

// cardBrand names the scheme from the IIN prefix. Unknown prefixes are
// "card", which is still accepted.
func cardBrand(n []byte) string {
	p := func(k int) int {
		v := 0
		for i := 0; i < k && i < len(n); i++ {
			v = v*10 + int(n[i]-'0')
		}
		return v
	}
	switch {
	case n[0] == '4':
		return "visa"
	case p(2) >= 51 && p(2) <= 55, p(4) >= 2221 && p(4) <= 2720:
		return "mastercard"
	case p(2) == 34 || p(2) == 37:
		return "amex"
	case p(4) == 6011, p(3) >= 644 && p(3) <= 649, p(2) == 65:
		return "discover"
	case p(4) >= 3528 && p(4) <= 3589:
		return "jcb"
	case p(3) >= 300 && p(3) <= 305, p(2) == 36, p(2) == 38, p(2) == 39:
		return "diners"
	case p(2) == 62:
		return "unionpay"
	}
	return "card"
}

// InputProblem is one reason an input is refused, with the form input it is
// about, so a form can show every message next to its field. Err is an
// *agentvault.Error with CodeInvalidInput; it never holds the value.
type InputProblem struct {
	Input string // "number", "cvv", "expiry", "holder", "sites", "billing"; "site", "email", "username", "website", "password", "totp"
	Err   error
}

// Input names of InputProblem.
const (
	InputNumber   = "number"
	InputCVV      = "cvv"
	InputExpiry   = "expiry"
	InputHolder   = "holder"
	InputSites    = "sites"
	InputBilling  = "billing"
	InputSite     = "site"
	InputEmail    = "email"
	InputUsername = "username"
	InputWebsite  = "website"
	InputPassword = "password"
	InputTOTP     = "totp"
)

// CheckCard runs every rule AddCard applies to a new card and returns all
// the problems found, in the order AddCard reports them (AddCard refuses
// with the first). None means AddCard will accept the input, storage
// errors aside.
func CheckCard(in CardInput, now time.Time) []InputProblem {
	_, probs := checkCard(in, now)
	return probs
}

func checkCard(in CardInput, now time.Time) (brand string, probs []InputProblem) {
	add := func(input, format string, args ...any) {
		probs = append(probs, InputProblem{Input: input, Err: invalid(format, args...)})
	}
	n := in.Number.InsecureRawBytes()
	switch {
	case len(n) < 12 || len(n) > 19 || !allDigits(n):
		add(InputNumber, "card number must be 12 to 19 digits")
	case !luhnValid(n):
		add(InputNumber, "card number fails the Luhn check")
	default:
		brand = cardBrand(n)
	}
	if in.LiveCVV {
		if !in.CVV.IsZero() {
			add(InputCVV, "a live-CVV card stores no CVV")
		}
	} else {
		c := in.CVV.InsecureRawBytes()
		switch {
		case !allDigits(c) || len(c) < 3 || len(c) > 4:
			add(InputCVV, "CVV must be 3 or 4 digits")
		case brand == "amex" && len(c) != 4:
			add(InputCVV, "an amex CVV has 4 digits")
		case brand != "" && brand != "amex" && brand != "card" && len(c) != 3:
			add(InputCVV, "a %s CVV has 3 digits", brand)
		}
	}
	switch {
	case in.ExpiryMonth < 1 || in.ExpiryMonth > 12:
		add(InputExpiry, "expiry month must be 1 to 12")
	case in.ExpiryYear < 1000 || in.ExpiryYear > 9999:
		add(InputExpiry, "expiry year must have four digits")
	case in.ExpiryYear < now.Year() || (in.ExpiryYear == now.Year() && in.ExpiryMonth < int(now.Month())):
		add(InputExpiry, "card has expired")
	}
	if err := checkHolder(in.Holder); err != nil {
		probs = append(probs, InputProblem{Input: InputHolder, Err: err})
	}
	if _, err := checkSites(in.AnySite, in.Sites); err != nil {
		probs = append(probs, InputProblem{Input: InputSites, Err: err})
	}
	if in.Billing != nil {
		if err := validateAddress(*in.Billing); err != nil {
			probs = append(probs, InputProblem{Input: InputBilling, Err: err})
		}
	}
	return brand, probs
}

func validateCard(in CardInput, now time.Time) (brand string, err error) {
	brand, probs := checkCard(in, now)
	if len(probs) > 0 {
		return "", probs[0].Err
	}
	return brand, nil
}

func checkHolder(h string) error {
	if len(h) > 200 || strings.ContainsAny(h, "\x00\r\n") {
		return invalid("holder name is too long or holds control characters")
	}
	return nil
}

// checkSites validates a card's destinations (exactly one of any-site and
// a site list) and returns the normalised hosts.
func checkSites(anySite bool, sites []string) ([]string, error) {
	if anySite == (len(sites) > 0) {
		return nil, invalid("give either sites or any-site for a card")
	}
	var out []string
	for _, s := range sites {
		h, err := hostname.Site(s)
		if err != nil {
			return nil, invalid("a card's site is a host with a registrable domain, or an IP address")
		}
		if !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out, nil
}

// CheckLogin runs every rule AddLogin applies and returns all the problems
// found, in the order AddLogin reports them.
func CheckLogin(in LoginInput) []InputProblem {
	_, probs := checkLogin(in)
	return probs
}

func checkLogin(in LoginInput) (domain string, probs []InputProblem) {
	add := func(input, format string, args ...any) {
		probs = append(probs, InputProblem{Input: input, Err: invalid(format, args...)})
	}
	site := in.Site
	if site == "" {
		site = in.Website
	}
	if site == "" {
		add(InputSite, "login needs a site")
	} else {
		d, err := registrableDomain(site)
		if err != nil {
			probs = append(probs, InputProblem{Input: InputSite, Err: err})
		}
		domain = d
	}
	switch {
	case in.Email == "" && in.Username == "":
		add(InputEmail, "login needs an email or a username")
	case in.Email != "" && !validEmail(in.Email):
		add(InputEmail, "email address is not valid")
	}
	if !plainText(in.Username, 200) {
		add(InputUsername, "username and website must be single lines")
	}
	if !plainText(in.Website, 2000) {
		add(InputWebsite, "username and website must be single lines")
	}
	switch {
	case in.Password.IsZero() || in.Password.Len() > 1024:
		add(InputPassword, "password must be 1 to 1024 bytes")
	case strings.ContainsAny(string(in.Password.InsecureRawBytes()), "\r\n\x00"):
		add(InputPassword, "password must not hold line breaks or NUL")
	}
	if !in.TOTP.IsZero() {
		if s, err := parseTOTPSeed(in.TOTP.InsecureRawBytes()); err != nil {
			probs = append(probs, InputProblem{Input: InputTOTP, Err: err})
		} else {
			s.wipe()
		}
	}
	return domain, probs
}

// registrableDomain is a login's site: the registrable domain of the site
// the owner typed (hostname.Site, the one answer to what a site is; an IP
// address is its own).
func registrableDomain(site string) (string, error) {
	h, err := hostname.Site(site)
	if err != nil {
		return "", invalid("a login's site is a host with a registrable domain, or an IP address")
	}
	d, err := hostname.Registrable(h)
	if err != nil {
		return "", invalid("a login's site is a host with a registrable domain, or an IP address")
	}
	return d, nil
}

func validEmail(s string) bool {
	a, err := mail.ParseAddress(s)
	if err != nil || a.Address != s || a.Name != "" {
		return false
	}
	at := strings.LastIndexByte(s, '@')
	return at > 0 && strings.Contains(s[at+1:], ".") && !strings.HasSuffix(s, ".")
}

func validPhone(s string) bool {
	digits := 0
	for i, c := range s {
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c == '+' && i == 0, c == ' ', c == '-', c == '(', c == ')', c == '.':
		default:
			return false
		}
	}
	return digits >= 5 && digits <= 20
}

func plainText(s string, max int) bool {
	return len(s) <= max && !strings.ContainsAny(s, "\x00\r\n")
}

func validateAddress(a AddressMeta) error {
	if strings.TrimSpace(a.Line1) == "" || strings.TrimSpace(a.City) == "" || strings.TrimSpace(a.PostalCode) == "" {
		return invalid("address needs line1, city and postal code")
	}
	for _, s := range []string{a.Name, a.Line1, a.Line2, a.City, a.Region, a.PostalCode} {
		if !plainText(s, 200) {
			return invalid("address fields must be single lines under 200 characters")
		}
	}
	if len(a.Country) != 2 || a.Country[0] < 'A' || a.Country[0] > 'Z' || a.Country[1] < 'A' || a.Country[1] > 'Z' {
		return invalid("country must be an ISO 3166-1 alpha-2 code such as DE")
	}
	return nil
}

func validateIdentity(id IdentityMeta) error {
	if strings.TrimSpace(id.Name) == "" || !plainText(id.Name, 200) {
		return invalid("identity needs a single-line name")
	}
	if id.Email != "" && !validEmail(id.Email) {
		return invalid("email address is not valid")
	}
	if id.Phone != "" && !validPhone(id.Phone) {
		return invalid("phone number is not valid")
	}
	return nil
}

// maxLabelLen is the token grammar's label bound.
const maxLabelLen = item.MaxLabelLen

// labelWithSuffix is the n-th label for a taken base ("github-2"), the
// base shortened so the whole stays within the grammar's bound.
func labelWithSuffix(base string, n int) string {
	suf := "-" + strconv.Itoa(n)
	if len(base)+len(suf) > maxLabelLen {
		base = strings.TrimRight(base[:maxLabelLen-len(suf)], "-")
	}
	return base + suf
}
