package intercept

import (
	"bytes"
	"compress/gzip"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/intercept/rewrite"
	"github.com/agentvault/agentvault/policy"
)

// BenchmarkWireAmountJSON is the check's cost on a checkout JSON of about
// 2 KB: the walk that reads the fields (run only when a card number
// authorized with a total is released) and the broker's comparison.
func BenchmarkWireAmountJSON(b *testing.B) {
	body := []byte(`{"card":{"number":"4242427673844242","cvc":"123"},"currency":"EUR","amount":7240,"items":[`)
	for i := 0; i < 20; i++ {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, `{"sku":"sku-000123","name":"Trail shoe, size 42","price":"12.50","quantity":1}`...)
	}
	body = append(body, `]}`...)
	rules := policy.NewWireRules(policy.WireAmountConfig{})
	eng := policy.NewEngine(policy.Rates{}, nil)
	ap := policy.Amount{Minor: 7240, Currency: "EUR"}
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		fields, err := walkWire(url.URL{}, "application/json", "", body, 1<<20, rules.Wants)
		if err != nil {
			b.Fatal(err)
		}
		if err := eng.CheckWire(rules, ap, fields); err != nil {
			b.Fatal(err)
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

// FuzzP18_WireFieldsMatchRewrite: the fields the proxy hands the broker's
// wire amount check are those package rewrite visits when it walks the
// request's query and body: the amounts the check reads from them are
// exactly those the naive reference finds among the visited fields, and the
// check errs exactly when that walk fails or a group has two currencies.
// The walk keeps only the fields the check can read (broker's WireWants,
// policy.WireRules.Wants): for any configured name and carried value, the
// amounts (or the refusal) read from the kept fields are those read from
// every field, so the filter is a saving, never a second rule.
func FuzzP18_WireFieldsMatchRewrite(f *testing.F) {
	for _, s := range []struct{ ctype, query, body string }{
		{"application/x-www-form-urlencoded", "total=1", "x=%zz&amount=1234&currency=eur"},
		{"application/x-www-form-urlencoded", "a=1;total=9", "x=1;amount=99&currency=eur;currency=usd"},
		{"application/x-www-form-urlencoded", "", "a;total=5=1&Order_Total=3&pad=xxxx"},
		{"application/json", "", `{"order":{"grand_total":12.35,"currency":"USD"},"items":[{"price":"1,5","currency":"EUR"}],"total":[1,2]}`},
		{"application/json", "", `{"a":{"value":"3","currency":"EUR","CURRENCY":"usd"},"pad":"xxxxxxxx","myfield":"7"}`},
		{"text/plain", "", `{"amount_cents":5,"value":3,"currency_code":"jpy" av_card_1_number_x`},
		{"multipart/form-data; boundary=x", "", "--x\r\nContent-Disposition: form-data; name=\"total\"\r\n\r\n12.34\r\n--x\r\nContent-Disposition: form-data; name=\"j\"\r\nContent-Type: application/json\r\n\r\n{\"totalCents\":3}\r\n--x--\r\n"},
	} {
		f.Add(s.ctype, s.query, s.body, false, "myfield", "av_card_1_number_x")
	}
	f.Fuzz(func(t *testing.T, ctype, query, body string, gz bool, extra, carried string) {
		u := url.URL{Path: "/p", RawQuery: query}
		wire, ce := []byte(body), ""
		if gz {
			var buf bytes.Buffer
			w := gzip.NewWriter(&buf)
			w.Write(wire)
			w.Close()
			wire, ce = buf.Bytes(), "gzip"
		}
		plain := policy.NewWireRules(policy.WireAmountConfig{})
		all, err := walkWire(u, ctype, ce, wire, 1<<20, nil)
		var found []policy.WireAmount
		if err == nil {
			found, err = plain.Amounts(all)
		}

		rec := &fieldRecorder{}
		walkErr := func() error {
			u := u
			if _, err := rewrite.URL(&u, rec); err != nil {
				return err
			}
			if len(body) == 0 {
				return nil
			}
			_, _, err := rewrite.Body(ctype, ce, wire, rec, 1<<20)
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
			got = append(got, w.Name+"="+w.Text+" "+strings.ToUpper(strings.TrimSpace(w.Currency)))
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("check read %q, reference %q", got, want)
		}

		rules := policy.NewWireRules(policy.WireAmountConfig{DecimalFields: []string{extra}})
		kept, err := walkWire(u, ctype, ce, wire, 1<<20, rules.Wants)
		if err != nil {
			t.Fatalf("the filtered walk failed: %v", err)
		}
		var c [][]byte
		if carried != "" {
			c = [][]byte{[]byte(carried)}
		}
		wantK, werr := rules.Amounts(all, c...)
		gotK, gerr := rules.Amounts(kept, c...)
		if agentvault.ErrorCode(werr) != agentvault.ErrorCode(gerr) || !slices.Equal(wantK, gotK) {
			t.Fatalf("kept fields read %v (%v), every field %v (%v)", gotK, gerr, wantK, werr)
		}
	})
}
