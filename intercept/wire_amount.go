package intercept

import (
	"bytes"
	"encoding/json"
	"io"
	"math/big"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
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
// Where amounts are read: the URL query and a form, JSON or multipart body
// (decompressed), at any depth. A field counts by its last name segment
// ("order[total]", "order.total" and "orderTotal" are all "total"),
// compared without case, "_" or "-":
//
//   - amount, total, order_total, grand_total, amount_total: always;
//   - price, value: only next to a currency field (currency,
//     currency_code), since both names are common for other things;
//   - the names WireAmountConfig adds.
//
// Units. A number with a decimal point is in major units ("12.34" EUR). An
// integer is in minor units in the fields Stripe's API writes that way
// (amount, amount_total, unit_amount, and MinorUnitFields): amount=1234
// with currency=eur is 12.34 EUR. Because a shop may mean whole units
// there too, such an integer is refused when its whole-unit reading is over
// the approved total and its minor-unit reading is under half of it
// (checkMinorReading). In every other field an integer is in major units
// (total=25 is 25 EUR). More decimals than the currency has are
// rounded up, so a rounding error errs against spending. The currency is
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
	number   bool // a JSON number (or form text), not a formatted string
}

// checkSubstituted runs the checks that need the substituted request before
// it is forwarded: the audit of values used from the session's memory
// (live CVV, P12) and the wire amount check (P18). body is the request body
// as received.
func (s *Server) checkSubstituted(sb *substitution, req *http.Request, body []byte) error {
	ss := s.sessions
	var approved []policy.Amount
	for b, raw := range sb.reals {
		if b.live {
			v := vault.NewSecret(raw)
			err := ss.auditUse(sb.ctx, sb.sess, b.item, b.field, sb.dest.Host, PurposeSubstitute, v)
			v.Wipe()
			if err != nil {
				return err
			}
		}
		if b.item.Kind == vault.KindCard && b.field == vault.FieldNumber {
			sb.sess.mu.Lock()
			t := b.total
			sb.sess.mu.Unlock()
			if t != nil {
				approved = append(approved, *t)
			}
		}
	}
	if len(approved) == 0 {
		return nil
	}
	found, err := wireAmounts(ss.WireAmount, req, body, s.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	eng := ss.WireAmount.Engine
	if eng == nil {
		eng = policy.NewEngine(policy.Rates{}, nil)
	}
	for _, ap := range approved {
		for _, w := range found {
			seen, skip, err := parseWireAmount(ss.WireAmount, w, ap.Currency)
			if err != nil {
				return err
			}
			if skip {
				continue
			}
			if err := eng.CheckWireAmount(ap, seen); err != nil {
				return err
			}
			if !w.minorInteger(ss.WireAmount) {
				continue
			}
			if err := checkMinorReading(eng, ap, seen); err != nil {
				return err
			}
		}
	}
	return nil
}

// wireAmounts lists the amount fields of the request's query and body.
func wireAmounts(cfg WireAmountConfig, req *http.Request, body []byte, limit int64) ([]wireAmount, error) {
	names := wireNames(cfg)
	var out []wireAmount
	if q, err := url.ParseQuery(req.URL.RawQuery); err == nil {
		out = append(out, formAmounts(names, q)...)
	}
	if len(body) == 0 {
		return out, nil
	}
	plain, err := rewrite.Decode(req.Header.Get("Content-Encoding"), body, limit)
	if err != nil {
		return nil, err
	}
	mt, params, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
	trimmed := bytes.TrimSpace(plain)
	switch {
	case mt == "application/x-www-form-urlencoded":
		if f, err := url.ParseQuery(string(plain)); err == nil {
			out = append(out, formAmounts(names, f)...)
		}
	case mt == "multipart/form-data":
		f := url.Values{}
		mr := multipart.NewReader(bytes.NewReader(plain), params["boundary"])
		for {
			p, err := mr.NextPart()
			if err != nil {
				break
			}
			if p.FileName() == "" && p.FormName() != "" {
				v, _ := io.ReadAll(io.LimitReader(p, 4096))
				f.Add(p.FormName(), string(v))
			}
			p.Close()
		}
		out = append(out, formAmounts(names, f)...)
	case strings.HasSuffix(mt, "json") || len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '['):
		dec := json.NewDecoder(bytes.NewReader(plain))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err == nil {
			out = jsonAmounts(names, v, out)
		}
	}
	return out, nil
}

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
	return n.always[name] || hasCurrency && n.withCurrency[name]
}

// formAmounts reads a form (or query): the currency is the form's
// currency field when there is exactly one.
func formAmounts(names wireNameSet, f url.Values) []wireAmount {
	cur := ""
	for k, vs := range f {
		if wireCurrencyName[wireFieldName(k)] && len(vs) == 1 {
			if cur != "" && !strings.EqualFold(cur, vs[0]) {
				cur = "?" // two currencies: none applies
			} else {
				cur = vs[0]
			}
		}
	}
	if cur == "?" {
		cur = ""
	}
	var out []wireAmount
	for k, vs := range f {
		n := wireFieldName(k)
		if !names.match(n, cur != "") {
			continue
		}
		for _, v := range vs {
			out = append(out, wireAmount{text: v, name: n, currency: cur, number: true})
		}
	}
	return out
}

// jsonAmounts walks a decoded JSON value: an object's currency field
// applies to its own amount fields.
func jsonAmounts(names wireNameSet, v any, out []wireAmount) []wireAmount {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			out = jsonAmounts(names, e, out)
		}
	case map[string]any:
		cur := ""
		for k, e := range x {
			if s, ok := e.(string); ok && wireCurrencyName[wireFieldName(k)] {
				cur = s
			}
		}
		for k, e := range x {
			n := wireFieldName(k)
			switch y := e.(type) {
			case json.Number:
				if names.match(n, cur != "") {
					out = append(out, wireAmount{text: string(y), name: n, currency: cur, number: true})
				}
			case string:
				if names.match(n, cur != "") {
					out = append(out, wireAmount{text: y, name: n, currency: cur})
				}
			case map[string]any, []any:
				// {"total": {"amount": "12.34", "currency": "EUR"}} is read
				// through the inner object.
				out = jsonAmounts(names, y, out)
			}
		}
	}
	return out
}

// minorInteger reports whether w is an integer in a minor-unit field: the
// one reading that is ambiguous (amount=80 is 0.80 for a processor counting
// cents, 80.00 for a shop counting euros).
func (w wireAmount) minorInteger(cfg WireAmountConfig) bool {
	t := strings.TrimSpace(w.text)
	return (wireMinorNames[w.name] || containsName(cfg.MinorUnitFields, w.name)) &&
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
		minor := wireMinorNames[w.name] || containsName(cfg.MinorUnitFields, w.name)
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
