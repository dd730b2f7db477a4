package rewrite

import (
	"bytes"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// recorder replaces nothing and records every offer and every visit.
type recorder struct {
	offers [][]byte
	visits []Field
}

func (r *recorder) ReplaceField(dst, src []byte) ([]byte, int, error) {
	r.offers = append(r.offers, bytes.Clone(src))
	return dst, 0, nil
}

func (r *recorder) ReplaceText(dst, src []byte) ([]byte, int, error) { return r.ReplaceField(dst, src) }

func (r *recorder) VisitField(f Field) {
	f.Value, f.Path = bytes.Clone(f.Value), slices.Clone(f.Path)
	r.visits = append(r.visits, f)
}

// sameVisitsAsOffers fails unless every offer to the Replacer was preceded by
// exactly one visit of the same bytes.
func sameVisitsAsOffers(t *testing.T, r *recorder) {
	t.Helper()
	if len(r.visits) != len(r.offers) {
		t.Fatalf("%d visits, %d offers", len(r.visits), len(r.offers))
	}
	for i := range r.offers {
		if !bytes.Equal(r.visits[i].Value, r.offers[i]) {
			t.Fatalf("visit %d is %q, offer %q", i, r.visits[i].Value, r.offers[i])
		}
	}
}

type seenField struct {
	path   string
	value  string
	number bool
}

// TestP18_RewriteReportsFields: Body and URL report each value they offer
// with its name path, and fields side by side share a group.
func TestP18_RewriteReportsFields(t *testing.T) {
	mp, boundary := buildMultipart(t, []testPart{formField("total", "12.50"), formField("currency", "EUR")})
	cases := []struct {
		name, ct, body string
		want           []seenField // values, not names
		sameGroup      [][2]string // paths that must share a group
		otherGroup     [][2]string // paths that must not
	}{
		{"form with a bad escape and a semicolon", "application/x-www-form-urlencoded", "x=%zz&amount=12%2C5;y=1&order[total]=9",
			[]seenField{{"x", "%zz", false}, {"amount", "12,5;y=1", false}, {"order[total]", "9", false}},
			[][2]string{{"x", "order[total]"}}, nil},
		{"json nesting", "application/json", `{"a":{"total":"1.5","currency":"EUR"},"items":[{"price":2},{"price":3}],"amount":[4, 5],"x":"\u0061"}`,
			[]seenField{{"a.total", "1.5", false}, {"a.currency", "EUR", false}, {"items.price", "2", true}, {"items.price", "3", true},
				{"amount", "4", true}, {"amount", "5", true}, {"x", "a", false}},
			[][2]string{{"a.total", "a.currency"}, {"amount", "x"}}, [][2]string{{"a.total", "x"}, {"items.price", "amount"}}},
		{"json as text/plain", "text/plain", `[{"total":7}]`, []seenField{{"total", "7", true}}, nil, nil},
		{"multipart", "multipart/form-data; boundary=" + boundary, string(mp),
			[]seenField{{"total", "12.50", false}, {"currency", "EUR", false}}, [][2]string{{"total", "currency"}}, nil},
		{"text", "text/xml", "<total>5</total>", []seenField{{"", "<total>5</total>", false}}, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			if _, _, err := Body(tc.ct, "", []byte(tc.body), rec, 0); err != nil {
				t.Fatal(err)
			}
			sameVisitsAsOffers(t, rec)
			var got []seenField
			groups := map[string]int{}
			for _, f := range rec.visits {
				if f.Name || f.Source == SourceText && tc.ct != "text/xml" {
					continue
				}
				p := strings.Join(f.Path, ".")
				got = append(got, seenField{p, string(f.Value), f.Number})
				groups[p] = f.Group
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("fields %+v, want %+v", got, tc.want)
			}
			for _, g := range tc.sameGroup {
				if groups[g[0]] != groups[g[1]] {
					t.Errorf("%s and %s in different groups", g[0], g[1])
				}
			}
			for _, g := range tc.otherGroup {
				if groups[g[0]] == groups[g[1]] {
					t.Errorf("%s and %s in one group", g[0], g[1])
				}
			}
		})
	}

	rec := &recorder{}
	u, _ := url.Parse("https://shop.test/pay/" + tokCVV + "?amount=5&x=%zz")
	if _, err := URL(u, rec); err != nil {
		t.Fatal(err)
	}
	sameVisitsAsOffers(t, rec)
	var q []string
	for _, f := range rec.visits {
		if f.Source == SourceQuery && !f.Name {
			q = append(q, strings.Join(f.Path, ".")+"="+string(f.Value))
		}
	}
	if strings.Join(q, "&") != "amount=5&x=%zz" {
		t.Fatalf("query fields %q", q)
	}
}

// FuzzVisitsMatchOffers: whatever the body, every value offered to the
// Replacer is visited first, with the same bytes.
func FuzzVisitsMatchOffers(f *testing.F) {
	mp, boundary := buildMultipart(f, []testPart{formField("total", "12.50"), formField("n", tokNumber)})
	for _, s := range [][2]string{
		{"application/x-www-form-urlencoded", "a=1&b=%zz;c&=&&d"},
		{"application/json", `{"a":[1,{"b":"c"}],"d":-1e5,"e":"\ud83d\ude00"}`},
		{"text/plain", `{"unclosed":"x`},
		{"multipart/form-data; boundary=" + boundary, string(mp)},
		{"text/html", "<p>hello</p>"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, ct, body string) {
		rec := &recorder{}
		Body(ct, "", []byte(body), rec, 1<<20)
		sameVisitsAsOffers(t, rec)
	})
}
