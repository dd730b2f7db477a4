package intercept

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/agentvault/agentvault/policy"
)

// FuzzP18_WireAmount: reading amounts off any request body never panics,
// never yields a negative amount, and agrees with policy.ParseDecimal on the
// plain decimals it accepts (outside the minor-unit fields).
func FuzzP18_WireAmount(f *testing.F) {
	for _, s := range []struct{ ctype, body string }{
		{"application/x-www-form-urlencoded", "amount=1234&currency=eur"},
		{"application/x-www-form-urlencoded", "order[total]=12.34&currency=EUR&order[total]=9"},
		{"application/json", `{"order":{"grand_total":12.35,"currency":"USD"},"items":[{"price":"€1.234,56","currency":"EUR"}]}`},
		{"application/json", `{"total":1e400}`},
		{"application/json", `{"total":1e999999999}`},
		{"application/json", `[{"value":"-5","currency":"JPY"}]`},
		{"multipart/form-data; boundary=x", "--x\r\nContent-Disposition: form-data; name=\"total\"\r\n\r\n12.34\r\n--x--\r\n"},
	} {
		f.Add(s.ctype, s.body, "EUR")
	}
	f.Fuzz(func(t *testing.T, ctype, body, cur string) {
		req := &http.Request{Header: http.Header{"Content-Type": {ctype}}, URL: &url.URL{RawQuery: "total=1"}}
		found, err := wireAmounts(WireAmountConfig{}, req, []byte(body), 1<<20, nil)
		if err != nil {
			return
		}
		for _, w := range found {
			a, skip, err := parseWireAmount(WireAmountConfig{}, w, cur)
			if err != nil || skip {
				continue
			}
			if a.Minor < 0 {
				t.Fatalf("negative amount from a %d-byte field", len(w.text))
			}
			if wireMinorNames[w.name] {
				continue
			}
			if d, err := policy.ParseDecimal(w.text, a.Currency); err == nil && d != a {
				t.Fatalf("%q read as %v, ParseDecimal says %v", w.text, a, d)
			}
		}
	})
}

// BenchmarkWireAmountJSON is the check's cost on a checkout JSON of about
// 2 KB (run only for requests that carry a card number authorized with a
// total).
func BenchmarkWireAmountJSON(b *testing.B) {
	body := []byte(`{"card":{"number":"4242427673844242","cvc":"123"},"currency":"EUR","amount":7240,"items":[`)
	for i := 0; i < 20; i++ {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, `{"sku":"sku-000123","name":"Trail shoe, size 42","price":"12.50","quantity":1}`...)
	}
	body = append(body, `]}`...)
	req := &http.Request{Header: http.Header{"Content-Type": {"application/json"}}, URL: &url.URL{}}
	ap := policy.Amount{Minor: 7240, Currency: "EUR"}
	eng := policy.NewEngine(policy.Rates{}, nil)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		found, err := wireAmounts(WireAmountConfig{}, req, body, 1<<20, nil)
		if err != nil {
			b.Fatal(err)
		}
		for _, w := range found {
			a, skip, err := parseWireAmount(WireAmountConfig{}, w, "EUR")
			if err != nil || skip {
				continue
			}
			if err := eng.CheckWireAmount(ap, a); err != nil {
				b.Fatal(err)
			}
		}
	}
}
