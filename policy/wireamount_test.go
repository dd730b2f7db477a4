package policy_test

import (
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/policy"
)

// form is a form body's pairs as the proxy's walk hands them over: one
// group, each pair read split at ';' too.
func form(pairs ...string) []policy.WireField {
	var out []policy.WireField
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, policy.WireField{Key: pairs[i], Value: []byte(pairs[i+1]), Group: 1, Pairs: true})
	}
	return out
}

// TestP18_WireAmountRules: the wire amount check over the fields of one
// request next to a card number approved for 12.34 EUR (the proxy's
// walk is not needed: policy reads fields).
func TestP18_WireAmountRules(t *testing.T) {
	rules := policy.NewWireRules(policy.WireAmountConfig{DecimalFields: []string{"checkout_sum"}, MinorUnitFields: []string{"cents_due"}})
	eng := policy.NewEngine(policy.Rates{}, nil)
	approved := policy.MustAmount("12.34 EUR")
	js := func(key, value string, group int, number bool) policy.WireField {
		return policy.WireField{Key: key, Value: []byte(value), Group: group, Number: number}
	}
	cases := []struct {
		name   string
		fields []policy.WireField
		want   agentvault.Code
	}{
		{"no amount", form("cc", "4242"), ""},
		{"stripe minor units equal", form("amount", "1234", "currency", "eur"), ""},
		{"stripe minor units grown", form("amount", "1235", "currency", "eur"), agentvault.CodeAmountMismatch},
		{"whole units in a minor field, grown", form("amount", "80", "currency", "eur"), agentvault.CodeAmountMismatch},
		{"whole units in a minor field, lower", form("amount", "12", "currency", "eur"), ""},
		{"decimal total equal", form("order[total]", "12.34"), ""},
		{"decimal total a cent over", form("order.grand_total", "12.35"), agentvault.CodeAmountMismatch},
		{"more decimals round up", form("total", "12.341"), agentvault.CodeAmountMismatch},
		{"integer total is major units", form("total", "13"), agentvault.CodeAmountMismatch},
		{"camelCase name", []policy.WireField{js("orderTotal", "13", 1, false)}, agentvault.CodeAmountMismatch},
		{"price alone is no amount", []policy.WireField{js("price", "99", 1, true)}, ""},
		{"price next to a currency", []policy.WireField{js("price", "99.00", 1, false), js("currency", "EUR", 1, false)}, agentvault.CodeAmountMismatch},
		{"price next to a currency in another object", []policy.WireField{js("price", "99.00", 1, false), js("currency", "EUR", 2, false)}, ""},
		{"a JSON number names no currency", []policy.WireField{js("price", "99.00", 1, false), js("currency", "7", 1, true)}, ""},
		{"printed price grown", form("total", "€1.234,56", "currency", "EUR"), agentvault.CodeAmountMismatch},
		{"unconvertible currency", form("total", "10.00", "currency", "USD"), agentvault.CodeAmountUnconvertible},
		{"unknown currency", form("total", "10.00", "currency", "XXX"), agentvault.CodeAmountUnknown},
		{"garbled digits", form("total", "12..3"), agentvault.CodeAmountUnknown},
		{"negative line skipped", form("amount", "-500"), ""},
		{"exponent out of bounds", []policy.WireField{js("total", "1e999999999", 1, true)}, agentvault.CodeAmountUnknown},
		{"exponent grown", []policy.WireField{js("total", "1.3e1", 1, true)}, agentvault.CodeAmountMismatch},
		{"out of range", []policy.WireField{js("total", "99999999999999999", 1, true)}, agentvault.CodeAmountMismatch},
		{"two currencies in a group", form("amount", "1234", "currency", "eur", "currency", "usd"), agentvault.CodeAmountUnknown},
		{"amount behind a semicolon", form("x", "1;amount=99999", "currency", "eur"), agentvault.CodeAmountMismatch},
		{"semicolon inside the amount", form("amount", "1234;x=1"), agentvault.CodeAmountUnknown},
		{"cents field equal", form("amount_cents", "1234"), ""},
		{"cents field grown", form("totalCents", "1300"), agentvault.CodeAmountMismatch},
		{"cents small is no unit puzzle", form("total_cents", "80"), ""},
		{"percents is no amount", form("discount_percents", "50"), ""},
		{"configured decimal field", form("checkout_sum", "12.35"), agentvault.CodeAmountMismatch},
		{"configured minor field", form("cents_due", "1235"), agentvault.CodeAmountMismatch},
		{"configured minor field equal", form("cents_due", "1234"), ""},
		{"the number in free text", []policy.WireField{{Value: []byte("card=av_card_1_number_x total=1"), Text: true}}, agentvault.CodeAmountUnknown},
		{"free text without the number", []policy.WireField{{Value: []byte("total=99"), Text: true}}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := eng.CheckWire(rules, approved, c.fields, []byte("av_card_1_number_x"))
			if got := agentvault.ErrorCode(err); err != nil && got != c.want || err == nil && c.want != "" {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}

// FuzzP18_WireAmount: reading an amount off any field never panics, never
// yields a negative amount, and agrees with ParseDecimal on the plain
// decimals it accepts (outside the minor-unit fields).
func FuzzP18_WireAmount(f *testing.F) {
	for _, s := range []struct{ key, value, cur string }{
		{"amount", "1234", "eur"}, {"order[total]", "12.34", "EUR"}, {"price", "€1.234,56", "EUR"},
		{"total", "1e400", ""}, {"total", "1e999999999", ""}, {"value", "-5", "JPY"}, {"grand_total", "12.35", "USD"},
	} {
		f.Add(s.key, s.value, s.cur, false)
	}
	rules := policy.NewWireRules(policy.WireAmountConfig{})
	f.Fuzz(func(t *testing.T, key, value, cur string, number bool) {
		found, err := rules.Amounts([]policy.WireField{{Key: key, Value: []byte(value), Group: 1, Pairs: true, Number: number},
			{Key: "currency", Value: []byte(cur), Group: 1}})
		if err != nil {
			return
		}
		for _, w := range found {
			a, skip, err := rules.Read(w, "EUR")
			if err != nil || skip {
				continue
			}
			if a.Minor < 0 {
				t.Fatalf("negative amount from a %d-byte field", len(w.Text))
			}
			if w.Name == "amount" || w.Name == "amounttotal" || w.Name == "unitamount" {
				continue
			}
			if d, err := policy.ParseDecimal(w.Text, a.Currency); err == nil && d != a {
				t.Fatalf("%q read as %v, ParseDecimal says %v", w.Text, a, d)
			}
		}
	})
}
