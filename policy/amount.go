package policy

import (
	"encoding/json"
	"errors"
	"math/big"
	"strconv"
	"strings"
	"unicode"

	"github.com/agentvault/agentvault"
)

// Amount is an exact sum of money: a count of the currency's minor units
// (cents, or yen for a zero-decimal currency) and an ISO 4217 code. Money
// never goes through a float here: a cap that is off by a rounding error is
// a cap an agent can overspend.
type Amount struct {
	Minor    int64  // minor units, never negative
	Currency string // ISO 4217, upper case
}

// maxMinor is the largest count of minor units an amount may have (15
// digits), so every parsed amount and every sum of a few of them fits in
// an int64.
const maxMinor = 999_999_999_999_999

var (
	errNotPlain = errors.New("not a plain decimal number")
	errTooLarge = errors.New("amount too large")
)

// plainMinor is the one conversion of a number to minor units, under every
// reading of an amount here (ParseAmount, ParseDecimal, the wire amount
// check): text is ASCII digits with at most one '.' and an optional
// exponent ("1e3"), which the caller has bounded; it is scaled by 10^exp
// and rounded up to a whole minor unit, so a rounding error errs against
// spending. errTooLarge past maxMinor; errNotPlain for anything else.
func plainMinor(text string, exp int) (int64, error) {
	for i := 0; i < len(text); i++ {
		if c := text[i]; !(c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
			return 0, errNotPlain
		}
	}
	if text == "" || text[0] < '0' || text[0] > '9' {
		return 0, errNotPlain
	}
	if len(strings.TrimLeft(text, "0")) > 64 {
		return 0, errTooLarge // more digits than any amount here has
	}
	if n, ok := decimalMinor(text, exp); ok {
		if n > maxMinor {
			return 0, errTooLarge
		}
		return n, nil
	}
	r, ok := new(big.Rat).SetString(text)
	if !ok {
		return 0, errNotPlain
	}
	q := ceilScaled(r, exp)
	if !q.IsInt64() || q.Int64() > maxMinor {
		return 0, errTooLarge
	}
	return q.Int64(), nil
}

// decimalMinor is plainMinor's exact answer without big.Rat for the usual
// text, ASCII digits with at most one '.' followed by a digit, at most 15
// digits before it and exp in 0..3; ok is false for any other text, which
// plainMinor reads the long way. The digits past exp round the result up
// when any is not zero, as ceilScaled does.
func decimalMinor(text string, exp int) (int64, bool) {
	if exp < 0 || exp > 3 {
		return 0, false
	}
	whole, frac, dot := strings.Cut(text, ".")
	if whole == "" || dot && frac == "" {
		return 0, false
	}
	whole = strings.TrimLeft(whole, "0")
	if len(whole) > 15 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(whole); i++ {
		c := whole[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	up := false
	for i := 0; i < len(frac); i++ {
		c := frac[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if i < exp {
			n = n*10 + int64(c-'0')
		} else if c != '0' {
			up = true
		}
	}
	for i := len(frac); i < exp; i++ {
		n *= 10
	}
	if up {
		n++
	}
	return n, true
}

// ceilScaled is r·10^exp rounded up to an integer (r is not negative).
func ceilScaled(r *big.Rat, exp int) *big.Int {
	v := new(big.Rat).Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(exp)), nil)))
	q, m := new(big.Int).QuoRem(v.Num(), v.Denom(), new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q
}

// currencyExp lists the currencies this package knows and their number of
// decimals (ISO 4217 minor unit). A code outside this table is refused as
// unknown rather than parsed with a guessed exponent.
var currencyExp = map[string]int{
	"USD": 2, "EUR": 2, "GBP": 2, "JPY": 0, "PLN": 2, "BRL": 2, "CHF": 2, "CAD": 2,
	"AUD": 2, "NZD": 2, "INR": 2, "CNY": 2, "HKD": 2, "SGD": 2, "MXN": 2, "SEK": 2,
	"NOK": 2, "DKK": 2, "CZK": 2, "HUF": 2, "RON": 2, "BGN": 2, "TRY": 2, "ILS": 2,
	"ZAR": 2, "KRW": 0, "TWD": 2, "THB": 2, "IDR": 2, "MYR": 2, "PHP": 2, "VND": 0,
	"CLP": 0, "COP": 2, "ARS": 2, "PEN": 2, "UAH": 2, "RUB": 2, "AED": 2, "SAR": 2,
	"ISK": 0, "BHD": 3, "KWD": 3, "JOD": 3, "OMR": 3, "TND": 3, "EGP": 2, "NGN": 2,
}

// CurrencyExponent returns the number of decimals of a known currency.
func CurrencyExponent(code string) (int, bool) {
	e, ok := currencyExp[code]
	return e, ok
}

// currencySymbols maps what pages print to an ISO code. Symbols that several
// currencies share map to the most common one; ambiguous lists the others,
// which win when the caller's hint names them (a "$" on a Canadian shop with
// a CAD hint is CAD).
var currencySymbols = map[string]string{
	"$": "USD", "US$": "USD", "U$S": "USD",
	"€": "EUR",
	"£": "GBP",
	"¥": "JPY", "JP¥": "JPY", "円": "JPY", "￥": "JPY",
	"CN¥": "CNY", "元": "CNY", "RMB": "CNY",
	"zł": "PLN", "ZŁ": "PLN",
	"R$":  "BRL",
	"FR.": "CHF", "SFR.": "CHF",
	"CA$": "CAD", "C$": "CAD",
	"A$": "AUD", "AU$": "AUD",
	"NZ$": "NZD",
	"HK$": "HKD",
	"S$":  "SGD",
	"MX$": "MXN",
	"₹":   "INR", "RS.": "INR", "RS": "INR",
	"₩":   "KRW",
	"₺":   "TRY",
	"₪":   "ILS",
	"₽":   "RUB",
	"₴":   "UAH",
	"₫":   "VND",
	"฿":   "THB",
	"₱":   "PHP",
	"KČ":  "CZK",
	"FT":  "HUF",
	"LEI": "RON",
	"KR":  "SEK", "KR.": "DKK",
	"R": "ZAR",
}

var ambiguousSymbols = map[string][]string{
	"$":   {"USD", "CAD", "AUD", "NZD", "MXN", "SGD", "HKD", "ARS", "CLP", "COP", "TWD"},
	"¥":   {"JPY", "CNY"},
	"￥":   {"JPY", "CNY"},
	"KR":  {"SEK", "NOK", "DKK", "ISK"},
	"KR.": {"DKK", "NOK", "SEK", "ISK"},
}

// ParseAmount reads a price as pages print it: "1.234,56 €", "$1,234.56",
// "JP¥1,234", "1 234,56 zł", "EUR 12.00", "12,00 EUR", with no-break and thin
// spaces as group separators. hintCurrency (an ISO code, may be empty) is
// used when the text names no currency, and to settle a symbol several
// currencies share. Negative amounts, more decimals than the currency has,
// unknown currencies and anything else that is not plainly a price are
// refused with CodeAmountUnknown: a total that is only probably right is not
// one a spending limit can rest on.
func ParseAmount(s, hintCurrency string) (Amount, error) {
	hint := strings.ToUpper(strings.TrimSpace(hintCurrency))
	if hint != "" {
		if _, ok := currencyExp[hint]; !ok {
			return Amount{}, agentvault.Errorf(agentvault.CodeAmountUnknown, "unknown hint currency")
		}
	}
	if len(s) > 256 {
		return Amount{}, agentvault.Errorf(agentvault.CodeAmountUnknown, "amount text too long (%d bytes)", len(s))
	}
	s = normalizeSpaces(s)
	if s == "" {
		return Amount{}, agentvault.Errorf(agentvault.CodeAmountUnknown, "empty amount")
	}
	first, last := -1, -1
	for i, r := range s {
		if r >= '0' && r <= '9' {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		return Amount{}, agentvault.Errorf(agentvault.CodeAmountUnknown, "no digits in amount")
	}
	prefix := strings.TrimSpace(s[:first])
	// A label such as "Total:" or "Order total:" before the price is common
	// in the element a hint points at; what follows its colon is the price.
	if i := strings.LastIndexByte(prefix, ':'); i >= 0 {
		prefix = strings.TrimSpace(prefix[i+1:])
	}
	number := s[first : last+1]
	suffix := strings.TrimSpace(s[last+1:])
	if strings.ContainsAny(prefix+suffix, "-−‐‒–—(") {
		return Amount{}, agentvault.Errorf(agentvault.CodeAmountUnknown, "negative or bracketed amounts are refused")
	}
	cur, err := resolveCurrency(prefix, suffix, hint)
	if err != nil {
		return Amount{}, err
	}
	minor, err := parseNumber(number, currencyExp[cur])
	if err != nil {
		return Amount{}, err
	}
	return Amount{Minor: minor, Currency: cur}, nil
}

// normalizeSpaces maps every Unicode space (NBSP, narrow NBSP, thin space...)
// to an ASCII space, collapses runs and trims.
func normalizeSpaces(s string) string {
	var b strings.Builder
	space := false
	for _, r := range strings.TrimSpace(s) {
		if unicode.IsSpace(r) || unicode.Is(unicode.Zs, r) || r == '\u200b' {
			if !space {
				b.WriteByte(' ')
			}
			space = true
			continue
		}
		space = false
		b.WriteRune(r)
	}
	return strings.TrimSpace(b.String())
}

func resolveCurrency(prefix, suffix, hint string) (string, error) {
	var found []string
	for _, part := range []string{prefix, suffix} {
		if part == "" {
			continue
		}
		c, err := currencyOf(part, hint)
		if err != nil {
			return "", err
		}
		found = append(found, c)
	}
	switch {
	case len(found) == 0:
		if hint == "" {
			return "", agentvault.Errorf(agentvault.CodeAmountUnknown, "amount names no currency")
		}
		return hint, nil
	case len(found) == 2 && found[0] != found[1]:
		return "", agentvault.Errorf(agentvault.CodeAmountUnknown, "amount names two currencies")
	}
	return found[0], nil
}

// currencyOf resolves one prefix or suffix: an ISO code, a symbol, or a
// symbol glued to a code ("US$", "CHF"), in any case.
func currencyOf(part, hint string) (string, error) {
	up := strings.ToUpper(strings.TrimSpace(part))
	if _, ok := currencyExp[up]; ok {
		return up, nil
	}
	if c, ok := currencySymbols[up]; ok {
		if alts, ok := ambiguousSymbols[up]; ok && hint != "" {
			for _, a := range alts {
				if a == hint {
					return hint, nil
				}
			}
		}
		return c, nil
	}
	if c, ok := currencySymbols[part]; ok {
		return c, nil
	}
	// "EUR €" or "€ EUR": a code and a symbol for the same currency.
	if fs := strings.Fields(up); len(fs) == 2 {
		a, errA := currencyOf(fs[0], hint)
		b, errB := currencyOf(fs[1], hint)
		if errA == nil && errB == nil && a == b {
			return a, nil
		}
	}
	return "", agentvault.Errorf(agentvault.CodeAmountUnknown, "unrecognised currency (%d characters)", len([]rune(part)))
}

// parseNumber reads the digits between the first and last digit of a price.
// The last '.' or ',' is the decimal separator when it is followed by as many
// digits as the currency has decimals (or fewer, for "12,5"); three digits
// after a lone separator in a currency with two decimals are a thousands
// group ("1,234" is one thousand two hundred and thirty-four dollars).
func parseNumber(s string, exp int) (int64, error) {
	for _, r := range s {
		if !(r >= '0' && r <= '9') && !strings.ContainsRune(".,' ’", r) {
			return 0, agentvault.Errorf(agentvault.CodeAmountUnknown, "unexpected character in amount")
		}
	}
	lastDot, lastComma := strings.LastIndexByte(s, '.'), strings.LastIndexByte(s, ',')
	sepIdx := max(lastDot, lastComma)
	intPart, frac := s, ""
	if sepIdx >= 0 {
		sep := s[sepIdx]
		after := s[sepIdx+1:]
		other := byte(',')
		if sep == ',' {
			other = '.'
		}
		decimal := false
		switch {
		case strings.IndexByte(s, other) >= 0:
			// Both kinds present: the last one is the decimal point, and the
			// other kind must not follow it.
			decimal = true
		case strings.Count(s, string(sep)) > 1:
			decimal = false
		case len(after) == 3 && exp != 3:
			decimal = false
		default:
			decimal = true
		}
		if decimal {
			intPart, frac = s[:sepIdx], after
			if strings.ContainsAny(frac, ".,' ’") {
				return 0, agentvault.Errorf(agentvault.CodeAmountUnknown, "malformed decimals")
			}
			if len(frac) > exp {
				return 0, agentvault.Errorf(agentvault.CodeAmountUnknown, "more decimals than the currency has")
			}
		}
	}
	digits, err := checkGroups(intPart)
	if err != nil {
		return 0, err
	}
	if frac != "" {
		digits += "." + frac
	}
	n, err := plainMinor(digits, exp)
	if err != nil {
		return 0, agentvault.Errorf(agentvault.CodeAmountUnknown, "amount too large")
	}
	return n, nil
}

// checkGroups validates the integer part's grouping and returns its digits.
// One kind of group separator is allowed; groups after the first have three
// digits, except that Indian grouping (2-digit groups before the last 3) is
// accepted.
func checkGroups(s string) (string, error) {
	groups := strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(".,' ’", r) })
	if len(groups) == 0 {
		return "", agentvault.Errorf(agentvault.CodeAmountUnknown, "no integer part")
	}
	if len(groups) > 1 {
		var seps []rune
		for _, r := range s {
			if strings.ContainsRune(".,' ’", r) {
				seps = append(seps, r)
			}
		}
		if len(seps) != len(groups)-1 {
			return "", agentvault.Errorf(agentvault.CodeAmountUnknown, "malformed grouping")
		}
		for _, r := range seps[1:] {
			if r != seps[0] {
				return "", agentvault.Errorf(agentvault.CodeAmountUnknown, "mixed group separators")
			}
		}
		if len(groups[0]) > 3 || len(groups[len(groups)-1]) != 3 {
			return "", agentvault.Errorf(agentvault.CodeAmountUnknown, "malformed grouping")
		}
		for _, g := range groups[1 : len(groups)-1] {
			if len(g) != 2 && len(g) != 3 {
				return "", agentvault.Errorf(agentvault.CodeAmountUnknown, "malformed grouping")
			}
		}
	}
	return strings.Join(groups, ""), nil
}

// String formats the amount canonically, "1234.56 EUR", a form ParseAmount
// reads back to the same value.
func (a Amount) String() string {
	return a.Decimal() + " " + a.Currency
}

// Decimal is the amount without its currency, "1234.56" (no grouping).
func (a Amount) Decimal() string {
	exp := currencyExp[a.Currency]
	neg := a.Minor < 0
	m := a.Minor
	if neg {
		m = -m
	}
	s := strconv.FormatInt(m, 10)
	if exp > 0 {
		if len(s) <= exp {
			s = strings.Repeat("0", exp-len(s)+1) + s
		}
		s = s[:len(s)-exp] + "." + s[len(s)-exp:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// IsZero reports whether a is the zero Amount (no currency).
func (a Amount) IsZero() bool { return a.Minor == 0 && a.Currency == "" }

// Rat is the amount in major units as an exact rational.
func (a Amount) Rat() *big.Rat {
	exp := currencyExp[a.Currency]
	den := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(exp)), nil)
	return new(big.Rat).SetFrac(big.NewInt(a.Minor), den)
}

// Cmp compares two amounts of the same currency: -1, 0 or +1. Amounts of
// different currencies are not comparable; callers convert first.
func (a Amount) Cmp(b Amount) (int, error) {
	if a.Currency != b.Currency {
		return 0, agentvault.Errorf(agentvault.CodeAmountUnconvertible, "cannot compare %s with %s", a.Currency, b.Currency)
	}
	switch {
	case a.Minor < b.Minor:
		return -1, nil
	case a.Minor > b.Minor:
		return 1, nil
	}
	return 0, nil
}

// Add sums two amounts of the same currency, refusing overflow.
func (a Amount) Add(b Amount) (Amount, error) {
	if a.Currency != b.Currency {
		return Amount{}, agentvault.Errorf(agentvault.CodeAmountUnconvertible, "cannot add %s to %s", b.Currency, a.Currency)
	}
	s := a.Minor + b.Minor
	if (b.Minor > 0 && s < a.Minor) || (b.Minor < 0 && s > a.Minor) {
		return Amount{}, agentvault.Errorf(agentvault.CodeAmountUnknown, "amount overflow")
	}
	return Amount{Minor: s, Currency: a.Currency}, nil
}

// MustAmount parses s and panics on error. For tests and literals in config
// defaults only.
func MustAmount(s string) Amount {
	a, err := ParseAmount(s, "")
	if err != nil {
		panic("policy.MustAmount: " + agentvault.ErrorMessage(err))
	}
	return a
}

// ParseDecimal reads the canonical wire form the control API uses,
// {"amount":"1234.56","currency":"EUR"}: ASCII digits, at most one '.', no
// grouping, no sign, at most as many decimals as the currency has. Unlike
// ParseAmount it never guesses: "1.234" in EUR is refused, not read as a
// thousands group.
func ParseDecimal(amount, currency string) (Amount, error) {
	cur := strings.ToUpper(strings.TrimSpace(currency))
	exp, ok := currencyExp[cur]
	if !ok {
		return Amount{}, agentvault.Errorf(agentvault.CodeAmountUnknown, "unknown currency")
	}
	intPart, frac, hasDot := strings.Cut(amount, ".")
	if intPart == "" || (hasDot && frac == "") || len(frac) > exp {
		return Amount{}, agentvault.Errorf(agentvault.CodeAmountUnknown, "malformed decimal amount")
	}
	for _, part := range []string{intPart, frac} {
		for i := 0; i < len(part); i++ {
			if part[i] < '0' || part[i] > '9' {
				return Amount{}, agentvault.Errorf(agentvault.CodeAmountUnknown, "malformed decimal amount")
			}
		}
	}
	n, err := plainMinor(amount, exp)
	if err != nil {
		return Amount{}, agentvault.Errorf(agentvault.CodeAmountUnknown, "amount too large")
	}
	return Amount{Minor: n, Currency: cur}, nil
}

// amountJSON is the wire shape of an Amount.
type amountJSON struct {
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
}

// MarshalJSON writes {"amount":"1234.56","currency":"EUR"}.
func (a Amount) MarshalJSON() ([]byte, error) {
	return json.Marshal(amountJSON{Amount: a.Decimal(), Currency: a.Currency})
}

// UnmarshalJSON reads the shape MarshalJSON writes, strictly (ParseDecimal).
func (a *Amount) UnmarshalJSON(b []byte) error {
	var w amountJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return agentvault.Wrap(agentvault.CodeAmountUnknown, err, "malformed amount")
	}
	v, err := ParseDecimal(w.Amount, w.Currency)
	if err != nil {
		return err
	}
	*a = v
	return nil
}
