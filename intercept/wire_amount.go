package intercept

import (
	"bytes"
	"math/big"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/intercept/rewrite"
	"github.com/agentvault/agentvault/policy"
	"github.com/agentvault/agentvault/vault"
)

// The wire amount check (issue 5, "going past the seed"): the request that
// carries a card number may also carry the amount the site is about to
// charge. When it does, that amount may not exceed the total the number's
// authorize was decided for; a larger one is refused with amount_mismatch
// before anything goes upstream.
//
// Where amounts are read: the fields package rewrite visits in the URL
// query and the body (decompressed; form, JSON, multipart, at any depth),
// walked by the same function with the same headers as the substitution,
// so both see one parse (issue 8: a second parser here dropped every
// amount of a form holding "%zz" or ";" while the substitution went on).
// A body walked as free text that holds the checked card's token or
// stand-in is refused (amount_unknown): no amount can be read from it. A
// field counts by its last name segment ("order[total]", "order.total" and
// "orderTotal" are all "total"), compared without case, "_" or "-":
//
//   - amount, total, order_total, grand_total, amount_total: always;
//   - amount_cents and any *_cents name (totalCents, cents): always, in
//     minor units;
//   - price, value: only next to a currency field (currency,
//     currency_code), since both names are common for other things;
//   - the names WireAmountConfig adds.
//
// A form or query pair holding ';' is read both whole and split at ';'.
// "Next to" means in the same form, query or multipart body, or the same
// JSON object (with the scalars of its arrays: {"total":[5]} is read); two
// different currencies there refuse the group's amounts (amount_unknown).
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
// errs against spending. The currency is
// the sibling currency field's, else the approved total's; a different
// currency is converted with the engine's rate table, and one without a
// rate is refused (amount_unconvertible). A negative number (a discount
// line) never raises the charge and is skipped; a recognised field whose
// text holds digits but does not parse is refused (amount_unknown): fail
// closed. A number authorized without a total has nothing to compare with.
type WireAmountConfig struct {
	// DecimalFields are extra field names holding amounts in major units.
	DecimalFields []string
	// MinorUnitFields are extra field names whose integers are minor units.
	MinorUnitFields []string
	// Engine converts currencies (its Rates); nil: same currency only.
	Engine *policy.Engine
}

var (
	wireAmountNames  = map[string]bool{"amount": true, "total": true, "ordertotal": true, "grandtotal": true, "amounttotal": true}
	wireNeedCurrency = map[string]bool{"price": true, "value": true}
	wireMinorNames   = map[string]bool{"amount": true, "amounttotal": true, "unitamount": true}
	wireCurrencyName = map[string]bool{"currency": true, "currencycode": true}
)

func init() {
	for _, c := range []agentvault.Code{agentvault.CodeAmountMismatch, agentvault.CodeAmountUnknown, agentvault.CodeAmountUnconvertible} {
		knownCodes[c] = true
	}
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

// wireAmount is one amount found on the wire: the text, the field's name and
// the currency written next to it ("" when none).
type wireAmount struct {
	text     string
	name     string
	currency string
}

// checkSubstituted runs the wire amount check (P18) on the substituted
// request before it is forwarded. body is the request body as received.
func (s *Server) checkSubstituted(sb *substitution, req *http.Request, body []byte) error {
	cfg := s.cfg.WireAmount
	var approved []policy.Amount
	var carried [][]byte // the checked card numbers' tokens and stand-ins
	for b := range sb.reals {
		if b.Item().Kind == vault.KindCard && b.Field() == vault.FieldNumber {
			if t := sb.sess.ApprovedTotal(b); t != nil {
				approved = append(approved, *t)
				for _, v := range []string{b.Token(), b.StandIn()} {
					if v != "" {
						carried = append(carried, []byte(v))
					}
				}
			}
		}
	}
	if len(approved) == 0 {
		return nil
	}
	// The fields the substitution's own walk visited (substitution.fields):
	// the same parse of the same bytes, not a second one.
	found, err := amountsIn(cfg, sb.fields.fields, carried)
	if err != nil {
		return err
	}
	eng := cfg.Engine
	if eng == nil {
		eng = policy.NewEngine(policy.Rates{}, nil)
	}
	for _, ap := range approved {
		for _, w := range found {
			seen, skip, err := parseWireAmount(cfg, w, ap.Currency)
			if err != nil {
				return err
			}
			if skip {
				continue
			}
			if err := eng.CheckWireAmount(ap, seen); err != nil {
				return err
			}
			if !w.minorInteger(cfg) {
				continue
			}
			if err := checkMinorReading(eng, ap, seen); err != nil {
				return err
			}
		}
	}
	return nil
}

// wireFields collects the fields package rewrite visits. It is a Replacer
// that replaces nothing: walking the query and the body with it takes the
// very parse the substitution took (same function, same bytes, same
// Content-Type and Content-Encoding), so the amounts read are the ones next
// to the values that were swapped, and no second parser can disagree.
type wireFields struct {
	fields []rewrite.Field
	names  *wireNameSet // nil: keep every field
}

// wanted reports whether amountsIn can read anything from f (see
// VisitField).
func (n *wireNameSet) wanted(f rewrite.Field) bool {
	if f.Source == rewrite.SourceText {
		return true
	}
	if f.Name || len(f.Path) == 0 {
		return false
	}
	switch f.Source {
	case rewrite.SourceForm, rewrite.SourceQuery:
		key := f.Path[len(f.Path)-1]
		if strings.Contains(key, ";") || bytes.Contains(f.Value, []byte(";")) {
			return true
		}
	case rewrite.SourceJSON, rewrite.SourceMultipart:
	default:
		return false
	}
	name := wireFieldName(f.Path[len(f.Path)-1])
	return wireCurrencyName[name] || n.match(name, true)
}

func (w *wireFields) ReplaceField(dst, _ []byte) ([]byte, int, error) { return dst, 0, nil }
func (w *wireFields) ReplaceText(dst, _ []byte) ([]byte, int, error)  { return dst, 0, nil }

// VisitField keeps a copy: the walk reuses its buffers. With names set
// it keeps only the fields amountsIn can read: free text (the carried
// number check), and named form, query, JSON and multipart values whose
// name is an amount or a currency, or that hold a ';' (read split there).
// Every other field is skipped by amountsIn anyway, so the result is the
// same, without copying a large field that cannot be an amount.
func (w *wireFields) VisitField(f rewrite.Field) {
	if w.names != nil && !w.names.wanted(f) {
		return
	}
	f.Value = bytes.Clone(f.Value)
	f.Path = slices.Clone(f.Path)
	w.fields = append(w.fields, f)
}

var (
	_ rewrite.Replacer     = (*wireFields)(nil)
	_ rewrite.FieldVisitor = (*wireFields)(nil)
)

// requestFields walks the request's URL and body (decompressed) with
// package rewrite and returns every field it visits. A body rewrite
// cannot parse is an error, as it is for the substitution.
func requestFields(req *http.Request, body []byte, limit int64) ([]rewrite.Field, error) {
	wf := &wireFields{}
	u := *req.URL
	if _, err := rewrite.URL(&u, wf); err != nil {
		return nil, err
	}
	if len(body) > 0 {
		if _, _, err := rewrite.Body(req.Header.Get("Content-Type"), req.Header.Get("Content-Encoding"), body, wf, limit); err != nil {
			return nil, err
		}
	}
	return wf.fields, nil
}

// wireAmounts lists the amount fields of the request's query and body.
// carried are the checked card numbers' token and stand-in: a body that
// holds one in free text (text/plain, XML, a multipart preamble) has no
// fields to read an amount from while the site may still parse one out of
// it, so it is refused (amount_unknown).
func wireAmounts(cfg WireAmountConfig, req *http.Request, body []byte, limit int64, carried [][]byte) ([]wireAmount, error) {
	fields, err := requestFields(req, body, limit)
	if err != nil {
		return nil, err
	}
	return amountsIn(cfg, fields, carried)
}

// amountsIn is wireAmounts over fields already visited.
func amountsIn(cfg WireAmountConfig, fields []rewrite.Field, carried [][]byte) ([]wireAmount, error) {
	for _, f := range fields {
		if f.Source != rewrite.SourceText {
			continue
		}
		for _, c := range carried {
			if bytes.Contains(f.Value, c) {
				return nil, agentvault.Errorf(agentvault.CodeAmountUnknown, "the card number is in a body whose amount cannot be read")
			}
		}
	}
	return amountsFromFields(wireNames(cfg), fields)
}

// amountsFromFields applies the naming rules (see WireAmountConfig) to the
// visited fields. A form or query pair holding ';' is also read split at
// each ';' (some servers take it as a pair separator, RFC 1866's
// recommendation): "x=1;amount=99" holds an amount for them, and reading
// both ways can only refuse more. A group (one form, one JSON object)
// whose currency fields disagree has no currency anyone can name: its
// amounts are refused (amount_unknown).
func amountsFromFields(names wireNameSet, fields []rewrite.Field) ([]wireAmount, error) {
	type named struct {
		name  string
		value string
		group int
		str   bool // a JSON string (a JSON number cannot name a currency)
	}
	var vals []named
	for _, f := range fields {
		if f.Name || len(f.Path) == 0 {
			continue
		}
		switch f.Source {
		case rewrite.SourceForm, rewrite.SourceQuery, rewrite.SourceJSON, rewrite.SourceMultipart:
		default:
			continue
		}
		key := f.Path[len(f.Path)-1]
		vals = append(vals, named{wireFieldName(key), string(f.Value), f.Group, f.Source != rewrite.SourceJSON || !f.Number})
		if f.Source != rewrite.SourceForm && f.Source != rewrite.SourceQuery {
			continue
		}
		if !strings.Contains(key, ";") && !bytes.Contains(f.Value, []byte(";")) {
			continue
		}
		for _, seg := range strings.Split(key+"="+string(f.Value), ";") {
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
	var out []wireAmount
	for _, v := range vals {
		c := cur[v.group]
		if !names.match(v.name, c != "") {
			continue
		}
		if c == conflictingCurrency {
			return nil, agentvault.Errorf(agentvault.CodeAmountUnknown, "an amount on the wire sits next to two different currencies")
		}
		out = append(out, wireAmount{text: v.value, name: v.name, currency: c})
	}
	return out, nil
}

// conflictingCurrency marks a group with two currencies; no currency code
// holds a NUL.
const conflictingCurrency = "\x00"

type wireNameSet struct{ always, withCurrency map[string]bool }

func wireNames(cfg WireAmountConfig) wireNameSet {
	n := wireNameSet{always: map[string]bool{}, withCurrency: wireNeedCurrency}
	for k := range wireAmountNames {
		n.always[k] = true
	}
	for _, k := range append(append([]string(nil), cfg.DecimalFields...), cfg.MinorUnitFields...) {
		n.always[wireFieldName(k)] = true
	}
	return n
}

func (n wireNameSet) match(name string, hasCurrency bool) bool {
	return n.always[name] || centsName(name) || hasCurrency && n.withCurrency[name]
}

// centsName reports a field whose name says it counts minor units
// (amount_cents, totalCents, cents): always an amount, never ambiguous.
func centsName(name string) bool {
	return strings.HasSuffix(name, "cents") && !strings.HasSuffix(name, "percents")
}

// minorInteger reports whether w is an integer in a minor-unit field: the
// one reading that is ambiguous (amount=80 is 0.80 for a processor counting
// cents, 80.00 for a shop counting euros).
func (w wireAmount) minorInteger(cfg WireAmountConfig) bool {
	t := strings.TrimSpace(w.text)
	return (wireMinorNames[w.name] || containsName(cfg.MinorUnitFields, w.name)) && !centsName(w.name) &&
		isPlainNumber(t) && !strings.ContainsAny(t, ".eE")
}

// checkMinorReading narrows the ambiguous case. An integer read as minor
// units that fits under the approved total, while the same digits read as
// whole units would not, is accepted only when it is at least half the
// approved total: what a processor counting minor units sends for this
// checkout (Stripe's amount=7240 for 72.40). A much smaller reading
// (amount=80 for 72.40) more likely means whole units and is refused.
func checkMinorReading(eng *policy.Engine, approved, seen policy.Amount) error {
	exp, _ := policy.CurrencyExponent(seen.Currency)
	if exp == 0 {
		return nil // both readings are the same number
	}
	major := seen
	for range exp {
		if major.Minor > 999_999_999_999_999/10 {
			return agentvault.Errorf(agentvault.CodeAmountMismatch, "the amount sent may be larger than the approved total")
		}
		major.Minor *= 10
	}
	if eng.CheckWireAmount(approved, major) == nil {
		return nil
	}
	conv, err := eng.Rates.Convert(seen, approved.Currency)
	if err != nil {
		return agentvault.Errorf(agentvault.CodeAmountUnconvertible, "the amount on the wire cannot be converted to %s", approved.Currency)
	}
	if conv.Minor*2 < approved.Minor {
		return agentvault.Errorf(agentvault.CodeAmountMismatch, "the amount sent may be larger than the approved total (its unit is ambiguous)")
	}
	return nil
}

// parseWireAmount reads one found amount (see WireAmountConfig for the
// rules). skip is true for text that is not an amount at all or a negative
// one.
func parseWireAmount(cfg WireAmountConfig, w wireAmount, defaultCurrency string) (policy.Amount, bool, error) {
	text := strings.TrimSpace(w.text)
	if !strings.ContainsAny(text, "0123456789") {
		return policy.Amount{}, true, nil
	}
	cur := strings.ToUpper(strings.TrimSpace(w.currency))
	if cur == "" {
		cur = defaultCurrency
	}
	exp, ok := policy.CurrencyExponent(cur)
	if !ok {
		return policy.Amount{}, false, agentvault.Errorf(agentvault.CodeAmountUnknown, "the currency on the wire is not one this proxy knows")
	}
	if strings.HasPrefix(text, "-") {
		return policy.Amount{}, true, nil
	}
	if i := strings.IndexAny(text, "eE"); i >= 0 && isPlainNumber(text) {
		// An exponent is bounded before big.Rat expands it: "1e999999999"
		// would cost gigabytes.
		if e, err := strconv.Atoi(text[i+1:]); err != nil || e < -30 || e > 30 {
			return policy.Amount{}, false, agentvault.Errorf(agentvault.CodeAmountUnknown, "an amount on the wire could not be read")
		}
	}
	if r, ok := new(big.Rat).SetString(text); ok && isPlainNumber(text) {
		minor := wireMinorNames[w.name] || containsName(cfg.MinorUnitFields, w.name) || centsName(w.name)
		if minor && !strings.ContainsAny(text, ".eE") {
			return ratAmount(r, 0, cur)
		}
		return ratAmount(r, exp, cur)
	}
	a, err := policy.ParseAmount(text, cur)
	if err != nil {
		return policy.Amount{}, false, agentvault.Errorf(agentvault.CodeAmountUnknown, "an amount on the wire could not be read")
	}
	return a, false, nil
}

func containsName(list []string, n string) bool {
	for _, l := range list {
		if wireFieldName(l) == n {
			return true
		}
	}
	return false
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

// ratAmount is r (in major units when exp > 0, minor units when exp is 0
// and the field counts minor units) as an Amount, rounded up to a whole
// minor unit.
func ratAmount(r *big.Rat, exp int, cur string) (policy.Amount, bool, error) {
	v := new(big.Rat).Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(exp)), nil)))
	q, m := new(big.Int).QuoRem(v.Num(), v.Denom(), new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() || q.Int64() > 999_999_999_999_999 {
		return policy.Amount{}, false, agentvault.Errorf(agentvault.CodeAmountMismatch, "the amount on the wire is out of range")
	}
	return policy.Amount{Minor: q.Int64(), Currency: cur}, false, nil
}
