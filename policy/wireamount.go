package policy

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/agentvault/agentvault"
)

// The wire amount check (P18; issue 5, "going past the seed"): the request
// that carries a card number may also carry the amount the site is about
// to charge. When it does, that amount may not exceed the total the
// number's authorize was decided for; a larger one is refused with
// amount_mismatch before the number is released (broker.Release asks
// Engine.CheckWire before the vault audits a value).
//
// Where amounts are read: the fields the proxy's body walk visits in the
// URL query and the body (decompressed; form, JSON, multipart, at any
// depth), the walk the substitution itself takes (package
// intercept/rewrite), so both see one parse (issue 8: a second parser
// dropped every amount of a form holding "%zz" or ";" while the
// substitution went on). A field walked as free text that holds the
// checked card's token or stand-in is refused (amount_unknown): no amount
// can be read from it. A field counts by its last name segment
// ("order[total]", "order.total" and "orderTotal" are all "total"),
// compared without case, "_" or "-":
//
//   - amount, total, order_total, grand_total, amount_total: always;
//   - amount_cents and any *_cents name (totalCents, cents): always, in
//     minor units;
//   - price, value: only next to a currency field (currency,
//     currency_code), since both names are common for other things;
//   - the names WireAmountConfig adds.
//
// A form or query pair holding ';' is read both whole and split at ';'.
// "Next to" means in the same group (WireField.Group: one form, query or
// multipart body, or one JSON object with the scalars of its arrays:
// {"total":[5]} is read); two different currencies there refuse the
// group's amounts (amount_unknown).
//
// Units. A number with a decimal point is in major units ("12.34" EUR). An
// integer is in minor units in the *_cents fields and in the fields
// Stripe's API writes that way (amount, amount_total, unit_amount, and
// MinorUnitFields): amount=1234 with currency=eur is 12.34 EUR. Because a
// shop may mean whole units there too (not in a *_cents field), such an
// integer is refused when its whole-unit reading is over the approved
// total and its minor-unit reading is under half of it (checkMinorReading).
// In every other field an integer is in major units (total=25 is 25 EUR).
// More decimals than the currency has are rounded up, so a rounding error
// errs against spending. The currency is the sibling currency field's,
// else the approved total's; a different currency is converted with the
// engine's rate table, and one without a rate is refused
// (amount_unconvertible). A negative number (a discount line) never raises
// the charge and is skipped; a recognised field whose text holds digits but
// does not parse is refused (amount_unknown): fail closed. A number
// authorized without a total has nothing to compare with.
type WireAmountConfig struct {
	// DecimalFields are extra field names holding amounts in major units.
	DecimalFields []string
	// MinorUnitFields are extra field names whose integers are minor units.
	MinorUnitFields []string
}

// WireField is one field of a request as the proxy's body walk visited it.
// The proxy fills it from its walk; the reading rules are all here.
type WireField struct {
	// Key is the field's innermost name as written ("order[total]"); empty
	// for free text.
	Key   string
	Value []byte
	// Group numbers the form, query, multipart body or JSON object the
	// field sits in: fields of one group are "next to" each other.
	Group int
	// Text: free text with no names (a text/* or XML body, a multipart
	// preamble). Pairs: a form or query pair, also read split at ';'.
	// Number: a JSON number, which cannot name a currency.
	Text, Pairs, Number bool
}

// WireAmount is one amount found among a request's fields: the field's
// normalised name, its text and the currency written next to it ("" when
// none).
type WireAmount struct {
	Name, Text, Currency string
}

// WireRules are the reading rules with the names a WireAmountConfig adds,
// built once (NewWireRules).
type WireRules struct {
	always map[string]bool
	minor  map[string]bool // extra minor-unit names, normalised
}

var (
	wireAmountNames  = map[string]bool{"amount": true, "total": true, "ordertotal": true, "grandtotal": true, "amounttotal": true}
	wireNeedCurrency = map[string]bool{"price": true, "value": true}
	wireMinorNames   = map[string]bool{"amount": true, "amounttotal": true, "unitamount": true}
	wireCurrencyName = map[string]bool{"currency": true, "currencycode": true}
)

// NewWireRules returns the rules with cfg's names added.
func NewWireRules(cfg WireAmountConfig) *WireRules {
	r := &WireRules{always: map[string]bool{}, minor: map[string]bool{}}
	for k := range wireAmountNames {
		r.always[k] = true
	}
	for _, k := range cfg.DecimalFields {
		r.always[wireFieldName(k)] = true
	}
	for _, k := range cfg.MinorUnitFields {
		r.always[wireFieldName(k)] = true
		r.minor[wireFieldName(k)] = true
	}
	return r
}

// wireFieldName reduces a field name to its comparable last segment.
func wireFieldName(k string) string {
	k = strings.TrimRight(k, "]")
	if i := strings.LastIndexAny(k, "[."); i >= 0 {
		k = k[i+1:]
	}
	k = strings.ToLower(k)
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' {
			return -1
		}
		return r
	}, k)
}

// Wants reports whether Amounts can read anything from f: free text (the
// carried card check), and named values whose name is an amount or a
// currency, or a form or query pair holding a ';' (read split there). The
// proxy keeps only these; every other field is skipped by Amounts anyway,
// so the answer is the same without copying a large field that cannot be
// an amount.
func (r *WireRules) Wants(f WireField) bool {
	if f.Text {
		return true
	}
	if f.Pairs && (strings.Contains(f.Key, ";") || bytes.Contains(f.Value, []byte(";"))) {
		return true
	}
	name := wireFieldName(f.Key)
	return wireCurrencyName[name] || r.match(name, true)
}

func (r *WireRules) match(name string, hasCurrency bool) bool {
	return r.always[name] || centsName(name) || hasCurrency && wireNeedCurrency[name]
}

// centsName reports a field whose name says it counts minor units
// (amount_cents, totalCents, cents): always an amount, never ambiguous.
func centsName(name string) bool {
	return strings.HasSuffix(name, "cents") && !strings.HasSuffix(name, "percents")
}

// conflictingCurrency marks a group with two currencies; no currency code
// holds a NUL.
const conflictingCurrency = "\x00"

// Amounts lists the amounts among fields. carried are the checked card's
// token and stand-in: a free-text field that holds one has no names to
// read an amount from while the site may still parse one out of it, so it
// is refused (amount_unknown), as is a group whose currency fields
// disagree: it has no currency anyone can name.
func (r *WireRules) Amounts(fields []WireField, carried ...[]byte) ([]WireAmount, error) {
	type named struct {
		name  string
		value string
		group int
		str   bool // a string (a JSON number cannot name a currency)
	}
	var vals []named
	for _, f := range fields {
		if f.Text {
			for _, c := range carried {
				if len(c) > 0 && bytes.Contains(f.Value, c) {
					return nil, agentvault.Errorf(agentvault.CodeAmountUnknown, "the card number is in a body whose amount cannot be read")
				}
			}
			continue
		}
		if f.Key == "" {
			continue
		}
		vals = append(vals, named{wireFieldName(f.Key), string(f.Value), f.Group, !f.Number})
		if !f.Pairs || !strings.Contains(f.Key, ";") && !bytes.Contains(f.Value, []byte(";")) {
			continue
		}
		// Some servers take ';' as a pair separator (RFC 1866's
		// recommendation): "x=1;amount=99" holds an amount for them, and
		// reading both ways can only refuse more.
		for _, seg := range strings.Split(f.Key+"="+string(f.Value), ";") {
			if k, v, ok := strings.Cut(seg, "="); ok {
				vals = append(vals, named{wireFieldName(k), v, f.Group, true})
			}
		}
	}
	// The currency of each group: its (non-empty) currency fields' common
	// value.
	cur := map[int]string{}
	for _, v := range vals {
		if !v.str || !wireCurrencyName[v.name] || strings.TrimSpace(v.value) == "" {
			continue
		}
		c, ok := cur[v.group]
		switch {
		case !ok:
			cur[v.group] = v.value
		case !strings.EqualFold(strings.TrimSpace(c), strings.TrimSpace(v.value)):
			cur[v.group] = conflictingCurrency
		}
	}
	var out []WireAmount
	for _, v := range vals {
		c := cur[v.group]
		if !r.match(v.name, c != "") {
			continue
		}
		if c == conflictingCurrency {
			return nil, agentvault.Errorf(agentvault.CodeAmountUnknown, "an amount on the wire sits next to two different currencies")
		}
		out = append(out, WireAmount{Name: v.name, Text: v.value, Currency: c})
	}
	return out, nil
}

// minorField reports a field whose integers count minor units.
func (r *WireRules) minorField(name string) bool {
	return wireMinorNames[name] || r.minor[name] || centsName(name)
}

// minorInteger reports whether w is an integer in a minor-unit field that
// is not a *_cents one: the one reading that is ambiguous (amount=80 is
// 0.80 for a processor counting cents, 80.00 for a shop counting euros).
func (r *WireRules) minorInteger(w WireAmount) bool {
	t := strings.TrimSpace(w.Text)
	return (wireMinorNames[w.Name] || r.minor[w.Name]) && !centsName(w.Name) &&
		isPlainNumber(t) && !strings.ContainsAny(t, ".eE")
}

// Read reads one found amount by the rules above. skip is true for text
// that is not an amount at all, or a negative one; defaultCurrency is the
// approved total's, used when no currency is written next to the amount.
func (r *WireRules) Read(w WireAmount, defaultCurrency string) (a Amount, skip bool, err error) {
	text := strings.TrimSpace(w.Text)
	if !strings.ContainsAny(text, "0123456789") {
		return Amount{}, true, nil
	}
	cur := strings.ToUpper(strings.TrimSpace(w.Currency))
	if cur == "" {
		cur = defaultCurrency
	}
	exp, ok := currencyExp[cur]
	if !ok {
		return Amount{}, false, agentvault.Errorf(agentvault.CodeAmountUnknown, "the currency on the wire is not one this proxy knows")
	}
	if strings.HasPrefix(text, "-") {
		return Amount{}, true, nil
	}
	unreadable := agentvault.Errorf(agentvault.CodeAmountUnknown, "an amount on the wire could not be read")
	if isPlainNumber(text) {
		if i := strings.IndexAny(text, "eE"); i >= 0 {
			// Bounded before the number is expanded: "1e999999999" would
			// cost gigabytes.
			if e, err := strconv.Atoi(text[i+1:]); err != nil || e < -30 || e > 30 {
				return Amount{}, false, unreadable
			}
		}
		if r.minorField(w.Name) && !strings.ContainsAny(text, ".eE") {
			exp = 0 // an integer in a minor-unit field counts minor units
		}
		switch n, err := plainMinor(text, exp); err {
		case nil:
			return Amount{Minor: n, Currency: cur}, false, nil
		case errTooLarge:
			return Amount{}, false, agentvault.Errorf(agentvault.CodeAmountMismatch, "the amount on the wire is out of range")
		}
	}
	a, err = ParseAmount(text, cur)
	if err != nil {
		return Amount{}, false, unreadable
	}
	return a, false, nil
}

// CheckWire is the wire amount check of one card number's release: every
// amount among fields (the request's, as the proxy's walk read them) is
// compared with approved, the total the number's authorize was decided
// for. carried are the number's token and stand-in (see Amounts).
func (e *Engine) CheckWire(r *WireRules, approved Amount, fields []WireField, carried ...[]byte) error {
	found, err := r.Amounts(fields, carried...)
	if err != nil {
		return err
	}
	for _, w := range found {
		seen, skip, err := r.Read(w, approved.Currency)
		if err != nil {
			return err
		}
		if skip {
			continue
		}
		if err := e.CheckWireAmount(approved, seen); err != nil {
			return err
		}
		if r.minorInteger(w) {
			if err := e.checkMinorReading(approved, seen); err != nil {
				return err
			}
		}
	}
	return nil
}

// CheckWireAmount is the comparison itself: seen, an amount on the wire
// next to a card number, may not exceed approved, the total the release
// was approved for. A currency it cannot convert is refused.
func (e *Engine) CheckWireAmount(approved, seen Amount) error {
	if seen.Minor < 0 {
		return agentvault.Errorf(agentvault.CodeAmountMismatch, "negative amount on the wire")
	}
	s, err := e.Rates.Convert(seen, approved.Currency)
	if err != nil {
		return agentvault.Errorf(agentvault.CodeAmountUnconvertible, "the amount on the wire cannot be converted to %s", approved.Currency)
	}
	c, err := s.Cmp(approved)
	if err != nil {
		return err
	}
	if c > 0 {
		return agentvault.Errorf(agentvault.CodeAmountMismatch, "the amount sent is larger than the approved total")
	}
	return nil
}

// checkMinorReading narrows the ambiguous case. An integer read as minor
// units that fits under the approved total, while the same digits read as
// whole units would not, is accepted only when it is at least half the
// approved total: what a processor counting minor units sends for this
// checkout (Stripe's amount=7240 for 72.40). A much smaller reading
// (amount=80 for 72.40) more likely means whole units and is refused.
func (e *Engine) checkMinorReading(approved, seen Amount) error {
	exp := currencyExp[seen.Currency]
	if exp == 0 {
		return nil // both readings are the same number
	}
	major := seen
	for range exp {
		if major.Minor > maxMinor/10 {
			return agentvault.Errorf(agentvault.CodeAmountMismatch, "the amount sent may be larger than the approved total")
		}
		major.Minor *= 10
	}
	if e.CheckWireAmount(approved, major) == nil {
		return nil
	}
	conv, err := e.Rates.Convert(seen, approved.Currency)
	if err != nil {
		return agentvault.Errorf(agentvault.CodeAmountUnconvertible, "the amount on the wire cannot be converted to %s", approved.Currency)
	}
	if conv.Minor*2 < approved.Minor {
		return agentvault.Errorf(agentvault.CodeAmountMismatch, "the amount sent may be larger than the approved total (its unit is ambiguous)")
	}
	return nil
}

// isPlainNumber accepts JSON-number-shaped text: digits, one optional
// point, an optional exponent.
func isPlainNumber(s string) bool {
	if s == "" || len(s) > 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
			return false
		}
	}
	return s[0] >= '0' && s[0] <= '9'
}
