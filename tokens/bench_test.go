package tokens

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
)

// benchPatterns is a realistic session: two cards (token, stand-in and real
// number; CVV stand-in and real as whole fields), a login (tokens, password
// stand-in and real), identity and address tokens, a TOTP stand-in.
func benchPatterns() []Pattern {
	vals := []struct {
		v     string
		whole bool
	}{
		{"av_card_1_number_u7x2k", false}, {"av_card_1_cvv_u7x2k", false}, {"av_card_1_holder_u7x2k", false},
		{"av_card_2_number_u7x2k", false}, {"av_card_2_cvv_u7x2k", false}, {"av_card_2_holder_u7x2k", false},
		{"av_login_github_email_u7x2k", false}, {"av_login_github_password_u7x2k", false}, {"av_login_github_totp_u7x2k", false},
		{"av_identity_1_name_u7x2k", false}, {"av_identity_1_email_u7x2k", false}, {"av_identity_1_phone_u7x2k", false},
		{"av_address_1_line1_u7x2k", false}, {"av_address_1_postal_code_u7x2k", false},
		{"4242424242424242", false}, {"4242428350164242", false},
		{"5555555555554444", false}, {"5555552093774444", false},
		{"737", true}, {"318", true}, {"1234", true}, {"9046", true},
		{"Tr0ub4dor&3xyzQ", false}, {"Kq9wpL2zrT7&mna", false},
		{"482913", true},
	}
	ps := make([]Pattern, len(vals))
	for i, v := range vals {
		ps[i] = Pattern{Value: []byte(v.v), ID: i, WholeField: v.whole}
	}
	return ps
}

func benchRepl() func(int) ([]byte, error) {
	outs := make([][]byte, 64)
	for i := range outs {
		outs[i] = []byte("R" + strconv.Itoa(i))
	}
	return func(id int) ([]byte, error) { return outs[id], nil }
}

// benchBody builds HTML/JSON-like text with numbers, prices, ids and dates,
// with or without session values sprinkled in (about one per KiB). The
// numbers are random, so digit runs near-miss the card, CVV and TOTP values
// at their natural rate; the fixed product link /p/48213 near-misses the
// TOTP stand-in 482913 in every fifth fragment, far more often than chance.
func benchBody(size int, matches bool, rng *rand.Rand) []byte {
	frags := []func() string{
		func() string {
			return fmt.Sprintf(`<div class="product-card item_%d"><a href="/p/48213?ref=home">Blue shirt</a><span class="price">€ %d.%02d</span></div>`,
				rng.IntN(100), rng.IntN(200), rng.IntN(100))
		},
		func() string {
			return fmt.Sprintf(`{"id":%d,"name":"Ergonomic chair","price":{"amount":"%d.%02d","currency":"EUR"},"tags":["office","seat"],"stock":%d}`,
				rng.IntN(100000), rng.IntN(1000), rng.IntN(100), rng.IntN(50))
		},
		func() string {
			return fmt.Sprintf(`<script>window.__STATE__={"cart":{"items":%d,"total":"%d.%02d"},"user":null,"ts":"2026-%02d-%02dT%02d:%02d:%02dZ"};</script>`,
				rng.IntN(9), rng.IntN(500), rng.IntN(100), 1+rng.IntN(12), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60))
		},
		func() string {
			return `<p>Free shipping on orders over 50 EUR. Delivery in 2-4 business days, returns within 30 days.</p>`
		},
		func() string {
			return "\n<input type=\"text\" name=\"postal_code\" autocomplete=\"postal-code\" maxlength=\"10\">\n"
		},
	}
	hits := []string{`"number":"av_card_1_number_u7x2k"`, `cvc=737&`, `"pan":"4242424242424242"`, `pw=Tr0ub4dor&3xyzQ;`, `<b>482913</b>`}
	b := make([]byte, 0, size+256)
	for len(b) < size {
		b = append(b, frags[rng.IntN(len(frags))]()...)
		if matches && rng.IntN(8) == 0 {
			b = append(b, hits[rng.IntN(len(hits))]...)
		}
	}
	return b[:size]
}

var benchSizes = []struct {
	name string
	n    int
}{{"64KiB", 64 << 10}, {"1MiB", 1 << 20}}

func BenchmarkScan(b *testing.B) {
	r := NewReplacer(NewMatcher(benchPatterns()), benchRepl())
	for _, sz := range benchSizes {
		for _, kind := range []string{"nomatch", "matches"} {
			body := benchBody(sz.n, kind == "matches", rand.New(rand.NewPCG(5, 6)))
			b.Run(sz.name+"/"+kind, func(b *testing.B) {
				dst := make([]byte, 0, 2*len(body))
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					dst, _, _ = r.ReplaceText(dst[:0], body)
				}
			})
		}
	}
}

// BenchmarkRewrite is the scan alone: Rewrite returns an unmatched body
// without copying it.
func BenchmarkRewrite(b *testing.B) {
	r := NewReplacer(NewMatcher(benchPatterns()), benchRepl())
	for _, sz := range benchSizes {
		body := benchBody(sz.n, false, rand.New(rand.NewPCG(5, 6)))
		b.Run(sz.name+"/nomatch", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				_, _, _ = r.Rewrite(body)
			}
		})
	}
}

func BenchmarkContains(b *testing.B) {
	r := NewReplacer(NewMatcher(benchPatterns()), benchRepl())
	for _, sz := range benchSizes {
		body := benchBody(sz.n, false, rand.New(rand.NewPCG(5, 6)))
		b.Run(sz.name+"/nomatch", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				_ = r.Contains(body)
			}
		})
	}
}

func BenchmarkCopy(b *testing.B) {
	for _, sz := range benchSizes {
		for _, kind := range []string{"nomatch", "matches"} {
			body := benchBody(sz.n, kind == "matches", rand.New(rand.NewPCG(5, 6)))
			b.Run(sz.name+"/"+kind, func(b *testing.B) {
				dst := make([]byte, len(body))
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					copy(dst, body)
				}
			})
		}
	}
}

// BenchmarkScanAVX2 is BenchmarkScan on the AVX2 prefilter (the path on
// CPUs with AVX2 but without AVX-512 VBMI).
func BenchmarkScanAVX2(b *testing.B) {
	if bestVec < vecAVX2 {
		b.Skip("no AVX2")
	}
	defer func(v vecKind) { vecMode = v }(vecMode)
	vecMode = vecAVX2
	BenchmarkScan(b)
}

// BenchmarkScanPortable is BenchmarkScan without the vector prefilter (the
// path on CPUs without AVX2).
func BenchmarkScanPortable(b *testing.B) {
	defer func(v vecKind) { vecMode = v }(vecMode)
	vecMode = vecNone
	BenchmarkScan(b)
}

// BenchmarkWriter streams 1 MiB through NewWriter in 16 KiB writes.
func BenchmarkWriter(b *testing.B) {
	r := NewReplacer(NewMatcher(benchPatterns()), benchRepl())
	for _, kind := range []string{"nomatch", "matches"} {
		body := benchBody(1<<20, kind == "matches", rand.New(rand.NewPCG(5, 6)))
		b.Run("1MiB/"+kind, func(b *testing.B) {
			var sink discard
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				w := r.NewWriter(&sink)
				for i := 0; i < len(body); i += 16 << 10 {
					_, _ = w.Write(body[i : i+16<<10])
				}
				_ = w.Close()
			}
		})
	}
}

// BenchmarkReplaceFieldSmall is the per-call cost on the short values a
// form or JSON body is made of.
func BenchmarkReplaceFieldSmall(b *testing.B) {
	r := NewReplacer(NewMatcher(benchPatterns()), benchRepl())
	for _, v := range []string{"Blue shirt", "av_card_1_number_u7x2k", "737", "hello@example.org street 12"} {
		src := []byte(v)
		b.Run(strconv.Itoa(len(src))+"B", func(b *testing.B) {
			dst := make([]byte, 0, 64)
			b.ReportAllocs()
			for b.Loop() {
				dst, _, _ = r.ReplaceField(dst[:0], src)
			}
		})
	}
}
