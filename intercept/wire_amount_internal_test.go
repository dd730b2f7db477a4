package intercept

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/intercept/rewrite"
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

// fieldRecorder collects the fields package rewrite visits, independently
// of wireFields.
type fieldRecorder struct{ got []rewrite.Field }

func (r *fieldRecorder) ReplaceField(dst, src []byte) ([]byte, int, error) { return dst, 0, nil }
func (r *fieldRecorder) ReplaceText(dst, src []byte) ([]byte, int, error)  { return dst, 0, nil }
func (r *fieldRecorder) VisitField(f rewrite.Field) {
	r.got = append(r.got, rewrite.Field{Source: f.Source, Path: slices.Clone(f.Path), Group: f.Group,
		Value: bytes.Clone(f.Value), Name: f.Name, Number: f.Number})
}

// referenceAmounts is the naive reading of WireAmountConfig's rules over
// visited fields: every named value (and, for a form or query pair with
// ';', every "k=v" piece of "key=value" split at ';') whose normalised name
// is an amount name, a *cents name (not *percents), or price/value beside
// a currency in its group. It reports false when a group with an amount
// holds two currencies.
func referenceAmounts(fields []rewrite.Field) ([]string, bool) {
	norm := func(k string) string {
		if i := strings.LastIndexAny(strings.TrimRight(k, "]"), "[."); i >= 0 {
			k = strings.TrimRight(k, "]")[i+1:]
		}
		return strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(k))
	}
	type kv struct {
		k, v  string
		g     int
		isStr bool
	}
	var all []kv
	for _, f := range fields {
		if f.Name || len(f.Path) == 0 || f.Source == rewrite.SourceText || f.Source == rewrite.SourceURL {
			continue
		}
		k := f.Path[len(f.Path)-1]
		all = append(all, kv{norm(k), string(f.Value), f.Group, !(f.Source == rewrite.SourceJSON && f.Number)})
		if (f.Source == rewrite.SourceForm || f.Source == rewrite.SourceQuery) && strings.Contains(k+string(f.Value), ";") {
			for _, piece := range strings.Split(k+"="+string(f.Value), ";") {
				if i := strings.Index(piece, "="); i >= 0 {
					all = append(all, kv{norm(piece[:i]), piece[i+1:], f.Group, true})
				}
			}
		}
	}
	currencies := map[int]map[string]bool{}
	for _, a := range all {
		if a.isStr && (a.k == "currency" || a.k == "currencycode") && strings.TrimSpace(a.v) != "" {
			if currencies[a.g] == nil {
				currencies[a.g] = map[string]bool{}
			}
			currencies[a.g][strings.ToUpper(strings.TrimSpace(a.v))] = true
		}
	}
	var out []string
	for _, a := range all {
		cs := currencies[a.g]
		isAmount := slices.Contains([]string{"amount", "total", "ordertotal", "grandtotal", "amounttotal"}, a.k) ||
			strings.HasSuffix(a.k, "cents") && !strings.HasSuffix(a.k, "percents") ||
			len(cs) > 0 && (a.k == "price" || a.k == "value")
		if !isAmount {
			continue
		}
		if len(cs) > 1 {
			return nil, false
		}
		cur := ""
		for c := range cs {
			cur = c
		}
		out = append(out, a.k+"="+a.v+" "+cur)
	}
	return out, true
}

// FuzzP18_WireAmountMatchesRewriteFields: the amounts the check reads off a
// request are exactly those the naive reference finds among the fields
// package rewrite visits when it walks the same URL and body, and the
// check errs exactly when that walk fails or a group has two currencies.
func FuzzP18_WireAmountMatchesRewriteFields(f *testing.F) {
	for _, s := range []struct{ ctype, query, body string }{
		{"application/x-www-form-urlencoded", "total=1", "x=%zz&amount=1234&currency=eur"},
		{"application/x-www-form-urlencoded", "a=1;total=9", "x=1;amount=99&currency=eur;currency=usd"},
		{"application/json", "", `{"order":{"grand_total":12.35,"currency":"USD"},"items":[{"price":"1,5","currency":"EUR"}],"total":[1,2]}`},
		{"text/plain", "", `{"amount_cents":5,"value":3,"currency_code":"jpy"`},
		{"multipart/form-data; boundary=x", "", "--x\r\nContent-Disposition: form-data; name=\"total\"\r\n\r\n12.34\r\n--x\r\nContent-Disposition: form-data; name=\"j\"\r\nContent-Type: application/json\r\n\r\n{\"totalCents\":3}\r\n--x--\r\n"},
	} {
		f.Add(s.ctype, s.query, s.body, false)
	}
	f.Fuzz(func(t *testing.T, ctype, query, body string, gz bool) {
		req := &http.Request{Header: http.Header{"Content-Type": {ctype}}, URL: &url.URL{Path: "/p", RawQuery: query}}
		wire := []byte(body)
		if gz {
			var buf bytes.Buffer
			w := gzip.NewWriter(&buf)
			w.Write(wire)
			w.Close()
			wire = buf.Bytes()
			req.Header.Set("Content-Encoding", "gzip")
		}
		found, err := wireAmounts(WireAmountConfig{}, req, wire, 1<<20, nil)

		rec := &fieldRecorder{}
		u := *req.URL
		walkErr := func() error {
			if _, err := rewrite.URL(&u, rec); err != nil {
				return err
			}
			if len(body) == 0 {
				return nil
			}
			_, _, err := rewrite.Body(ctype, req.Header.Get("Content-Encoding"), wire, rec, 1<<20)
			return err
		}()
		if walkErr != nil {
			if err == nil {
				t.Fatal("the walk failed but the check read amounts")
			}
			return
		}
		want, ok := referenceAmounts(rec.got)
		if !ok {
			if agentvault.ErrorCode(err) != agentvault.CodeAmountUnknown {
				t.Fatalf("two currencies in a group: err %v", err)
			}
			return
		}
		if err != nil {
			t.Fatalf("check failed where the reference reads %d amounts: %v", len(want), err)
		}
		var got []string
		for _, w := range found {
			got = append(got, w.name+"="+w.text+" "+strings.ToUpper(strings.TrimSpace(w.currency)))
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("check read %q, reference %q", got, want)
		}
	})
}

// FuzzP18_WireFieldsKeptAgree: the amount check reads the fields the
// substitution's walk kept, and that walk keeps only the fields amountsIn
// can read (wireNameSet.wanted). For any body, configured names and
// carried value, the amounts (or the refusal) read from the kept fields are
// exactly those read from every field: the filter is a saving, never a
// second rule.
func FuzzP18_WireFieldsKeptAgree(f *testing.F) {
	for _, s := range []struct{ ctype, body string }{
		{"application/x-www-form-urlencoded", "amount=1234&currency=eur"},
		{"application/x-www-form-urlencoded", "x=1;amount=99&pad=xxxx"},
		{"application/x-www-form-urlencoded", "a;total=5=1&Order_Total=3"},
		{"application/json", `{"order":{"grand_total":12.35,"currency":"USD"},"items":[{"price":"€1.234,56","currency":"EUR"}]}`},
		{"application/json", `{"a":{"value":"3","currency":"EUR","CURRENCY":"usd"},"pad":"xxxxxxxx","myfield":"7"}`},
		{"multipart/form-data; boundary=x", "--x\r\nContent-Disposition: form-data; name=\"total\"\r\n\r\n12.34\r\n--x--\r\n"},
		{"text/plain", "card av_card_1_number_x total 5"},
	} {
		f.Add(s.ctype, s.body, "myfield", "av_card_1_number_x")
	}
	f.Fuzz(func(t *testing.T, ctype, body, extra, carried string) {
		cfg := WireAmountConfig{DecimalFields: []string{extra}}
		names := wireNames(cfg)
		req := &http.Request{Header: http.Header{"Content-Type": {ctype}}, URL: &url.URL{RawQuery: "total=1;x=2&q=" + url.QueryEscape(body)}}
		all, kept := &wireFields{}, &wireFields{names: &names}
		for _, wf := range []*wireFields{all, kept} {
			u := *req.URL
			if _, err := rewrite.URL(&u, wf); err != nil {
				return
			}
			if _, _, err := rewrite.Body(ctype, "", []byte(body), wf, 1<<20); err != nil {
				return
			}
		}
		var c [][]byte
		if carried != "" {
			c = [][]byte{[]byte(carried)}
		}
		want, werr := amountsIn(cfg, all.fields, c)
		got, gerr := amountsIn(cfg, kept.fields, c)
		if agentvault.ErrorCode(werr) != agentvault.ErrorCode(gerr) || !slices.Equal(want, got) {
			t.Fatalf("kept fields read %v (%v), every field %v (%v)", got, gerr, want, werr)
		}
	})
}
