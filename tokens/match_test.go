package tokens

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	agentvault "github.com/agentvault/agentvault"
)

// naiveReplace is the reference the matcher is checked against: for each
// pattern find its first valid occurrence with bytes.Index, take the leftmost
// (then longest, then first given), continue after it.
func naiveReplace(pats []Pattern, src []byte, field bool, repl func(int) ([]byte, error)) ([]byte, int, error) {
	var out []byte
	pos, count := 0, 0
	for {
		bestS, bestL, bestID := -1, 0, 0
		for _, p := range pats {
			if len(p.Value) == 0 {
				continue
			}
			for j := pos; j <= len(src); {
				i := bytes.Index(src[j:], p.Value)
				if i < 0 {
					break
				}
				s, e := j+i, j+i+len(p.Value)
				ok := true
				if p.WholeField {
					if field {
						ok = s == 0 && e == len(src)
					} else {
						b := boundsOf(p.WordBounded)
						ok = (s == 0 || b[src[s-1]]) && (e == len(src) || b[src[e]])
					}
				}
				if !ok {
					j = s + 1
					continue
				}
				if bestS < 0 || s < bestS || (s == bestS && len(p.Value) > bestL) {
					bestS, bestL, bestID = s, len(p.Value), p.ID
				}
				break
			}
		}
		if bestS < 0 {
			break
		}
		v, err := repl(bestID)
		if err != nil {
			return out, count, err
		}
		out = append(out, src[pos:bestS]...)
		out = append(out, v...)
		pos = bestS + bestL
		count++
	}
	return append(out, src[pos:]...), count, nil
}

func idRepl(id int) ([]byte, error) { return []byte("{" + strconv.Itoa(id) + "}"), nil }

func TestReplaceText(t *testing.T) {
	tok := "av_card_1_number_u7x2k"
	pats := []Pattern{
		{Value: []byte(tok), ID: 1},
		{Value: []byte("4242424242424242"), ID: 2},
		{Value: []byte("123"), ID: 3, WholeField: true},
		{Value: []byte("av_card_1_number_u7x2kk"), ID: 4}, // longer overlap
		{Value: []byte("482913"), ID: 5, WholeField: true},
		{Value: []byte("S3cr!t-pw"), ID: 6},
	}
	cases := []struct{ name, in, want string }{
		{"empty", "", ""},
		{"none", "hello world", "hello world"},
		{"token in json", `{"n":"` + tok + `"}`, `{"n":"{1}"}`},
		{"token in form", "number=" + tok + "&x=1", "number={1}&x=1"},
		{"token glued to text", "xx" + tok + "yy", "xx{1}yy"},
		{"longest at same start", "a=" + tok + "k", "a={4}"},
		{"two adjacent", tok + tok, "{1}{1}"},
		{"card in text", "pan 4242424242424242.", "pan {2}."},
		{"cvv whole field json", `{"cvc":"123"}`, `{"cvc":"{3}"}`},
		{"cvv whole field form", "cvc=123&a=b", "cvc={3}&a=b"},
		{"cvv at edges", "123", "{3}"},
		{"cvv inside number", "41234", "41234"},
		{"cvv after letter", "a123", "a123"},
		{"cvv before dash", "123-", "123-"},
		{"cvv in decimals", "1.123", "1.123"},
		{"cvv whitespace", "code: 123\n", "code: {3}\n"},
		{"cvv markup", "<td>123</td>", "<td>{3}</td>"},
		{"cvv second valid", "1234 123", "1234 {3}"},
		{"totp bounded", "[482913]", "[{5}]"},
		{"totp in card", "4829133", "4829133"},
		{"password", "pw=S3cr!t-pw;", "pw={6};"},
		{"overlap leftmost wins", "S3cr!t-pw" + "4242424242424242", "{6}{2}"},
	}
	r := NewReplacer(NewMatcher(pats), idRepl)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, _, err := r.ReplaceText(nil, []byte(c.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Fatalf("got %q want %q", got, c.want)
			}
			ref, _, _ := naiveReplace(pats, []byte(c.in), false, idRepl)
			if !bytes.Equal(ref, got) {
				t.Fatalf("reference %q differs from %q", ref, got)
			}
			if r.Contains([]byte(c.in)) != (c.in != c.want) {
				t.Fatalf("Contains disagrees")
			}
		})
	}
}

func TestReplaceField(t *testing.T) {
	pats := []Pattern{
		{Value: []byte("av_login_github_password_u7x2k"), ID: 1},
		{Value: []byte("123"), ID: 2, WholeField: true},
		{Value: []byte("4242424242424242"), ID: 3},
	}
	cases := []struct{ name, in, want string }{
		{"whole cvv", "123", "{2}"},
		{"cvv quoted is not whole", `"123"`, `"123"`},
		{"cvv with space", "123 ", "123 "},
		{"cvv inside", "a 123 b", "a 123 b"},
		{"token anywhere", "Bearer av_login_github_password_u7x2k", "Bearer {1}"},
		{"pan spaced no", "4242 4242 4242 4242", "4242 4242 4242 4242"},
		{"pan", "4242424242424242", "{3}"},
	}
	r := NewReplacer(NewMatcher(pats), idRepl)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, _, err := r.ReplaceField(nil, []byte(c.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Fatalf("got %q want %q", got, c.want)
			}
			ref, _, _ := naiveReplace(pats, []byte(c.in), true, idRepl)
			if !bytes.Equal(ref, got) {
				t.Fatalf("reference %q differs from %q", ref, got)
			}
		})
	}
}

func TestP9_ReplacerRefusalAborts(t *testing.T) {
	refused := agentvault.Errorf(agentvault.CodeTokenNotAllowed, "token not allowed here")
	r := NewReplacer(NewMatcher([]Pattern{{Value: []byte("av_card_1_number_u7x2k"), ID: 7}}), func(id int) ([]byte, error) {
		return nil, refused
	})
	in := []byte("a=av_card_1_number_u7x2k")
	if _, _, err := r.ReplaceText(nil, in); !errors.Is(err, refused) {
		t.Fatalf("ReplaceText err = %v, want refusal", err)
	}
	if _, _, err := r.ReplaceField(nil, in); !errors.Is(err, refused) {
		t.Fatalf("ReplaceField err = %v, want refusal", err)
	}
	var sink bytes.Buffer
	w := r.NewWriter(&sink)
	_, err1 := w.Write(in)
	err2 := w.Close()
	if !errors.Is(err1, refused) && !errors.Is(err2, refused) {
		t.Fatalf("writer did not refuse: %v %v", err1, err2)
	}
	if bytes.Contains(sink.Bytes(), []byte("av_")) {
		t.Fatalf("writer forwarded the token after refusing")
	}
	if _, err := w.Write([]byte("more")); err == nil {
		t.Fatalf("writer accepts data after a refusal")
	}
}

// TestP10_WriterSplitsAcrossChunks feeds a body in every split position: a
// value cut by a chunk border must still be replaced.
func TestP10_WriterSplitsAcrossChunks(t *testing.T) {
	pats := []Pattern{
		{Value: []byte("4000056655665556"), ID: 1},
		{Value: []byte("737"), ID: 2, WholeField: true},
		{Value: []byte("hunter2!X"), ID: 3},
	}
	in := []byte(`{"pan":"4000056655665556","cvc":"737","x":"17370","pw":"hunter2!X"} 737`)
	r := NewReplacer(NewMatcher(pats), idRepl)
	want, _, _ := naiveReplace(pats, in, false, idRepl)
	for i := 0; i <= len(in); i++ {
		for j := i; j <= len(in); j += 3 {
			var out bytes.Buffer
			w := r.NewWriter(&out)
			for _, part := range [][]byte{in[:i], in[i:j], in[j:]} {
				if _, err := w.Write(part); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out.Bytes(), want) {
				t.Fatalf("split %d/%d: output differs from reference (len %d vs %d)", i, j, out.Len(), len(want))
			}
		}
	}
}

func TestWriterLargeAndByteAtATime(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pats := benchPatterns()
	body := benchBody(300<<10, true, rng)
	r := NewReplacer(NewMatcher(pats), idRepl)
	want, n, _ := naiveReplace(pats, body, false, idRepl)
	if n == 0 {
		t.Fatal("body has no matches")
	}
	got, n2, err := r.ReplaceText(nil, body)
	if err != nil || n2 != n || !bytes.Equal(got, want) {
		t.Fatalf("ReplaceText: count %d want %d, equal=%v err=%v", n2, n, bytes.Equal(got, want), err)
	}
	for _, step := range []int{1, 7, 4096, 1 << 20} {
		var out bytes.Buffer
		w := r.NewWriter(&out)
		for i := 0; i < len(body); i += step {
			if _, err := w.Write(body[i:min(i+step, len(body))]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), want) {
			t.Fatalf("step %d: stream output differs", step)
		}
	}
}

func TestMatcherDuplicatesAndEmpty(t *testing.T) {
	m := NewMatcher([]Pattern{{Value: nil, ID: 1}, {Value: []byte("abcd"), ID: 2}, {Value: []byte("abcd"), ID: 3}})
	if m.Len() != 1 || m.MaxLen() != 4 {
		t.Fatalf("Len %d MaxLen %d", m.Len(), m.MaxLen())
	}
	got, _, _ := NewReplacer(m, idRepl).ReplaceText(nil, []byte("xabcdx"))
	if string(got) != "x{2}x" {
		t.Fatalf("got %q", got)
	}
	empty := NewReplacer(NewMatcher(nil), idRepl)
	if got, n, _ := empty.ReplaceText([]byte("p:"), []byte("abc")); string(got) != "p:abc" || n != 0 {
		t.Fatalf("empty matcher: %q %d", got, n)
	}
}

func TestReplaceAllocFree(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under -race")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	body := benchBody(64<<10, true, rng)
	r := NewReplacer(NewMatcher(benchPatterns()), benchRepl())
	dst := make([]byte, 0, 2*len(body))
	allocs := testing.AllocsPerRun(20, func() {
		dst, _, _ = r.ReplaceText(dst[:0], body)
	})
	if allocs > 0 {
		t.Fatalf("ReplaceText allocates %.1f times per call", allocs)
	}
	var sink discard
	w := r.NewWriter(&sink)
	_, _ = w.Write(body) // warm the buffers
	allocs = testing.AllocsPerRun(20, func() { _, _ = w.Write(body) })
	if allocs > 0 {
		t.Fatalf("writer allocates %.1f times per write", allocs)
	}
}

type discard struct{}

func (*discard) Write(p []byte) (int, error) { return len(p), nil }

// fuzzAlphabet keeps fuzz inputs dense in matches and in delimiters.
const fuzzAlphabet = "ab1_ \"=x9"

func squash(b []byte) []byte {
	o := make([]byte, len(b))
	for i, c := range b {
		o[i] = fuzzAlphabet[int(c)%len(fuzzAlphabet)]
	}
	return o
}

var fuzzVec = func() int {
	v, err := strconv.Atoi(os.Getenv("TOKENS_FUZZ_VEC"))
	if err != nil || v < 0 || v > int(bestVec) {
		return -1
	}
	return v
}()

func FuzzReplacer(f *testing.F) {
	f.Add([]byte("ab1 ab1 \"1\" x9=1"), []byte("ab1\x001\x00x9"), uint64(0b10), uint64(7))
	f.Add([]byte("aaaaaaaaaaaaaaaaaaaaaaaaa"), []byte("aa\x00aaa\x00a"), uint64(0b100), uint64(1))
	f.Add([]byte("_a=b1&\"9\""), []byte("9\x00b1"), uint64(0b11), uint64(99))
	f.Fuzz(func(t *testing.T, text, patBytes []byte, wholeMask, seed uint64) {
		if len(text) > 1024 || len(patBytes) > 256 {
			return
		}
		var pats []Pattern
		for i, v := range bytes.Split(patBytes, []byte{0}) {
			if i >= 12 {
				break
			}
			v = squash(v)
			if len(v) > 40 {
				v = v[:40]
			}
			pats = append(pats, Pattern{Value: v, ID: i, WholeField: wholeMask>>i&1 == 1, WordBounded: wholeMask>>(i+16)&1 == 1})
		}
		src := squash(text)
		defer func(v vecKind) { vecMode = v }(vecMode)
		// Every path this CPU has: portable, AVX2, AVX-512 VBMI; or the one
		// TOKENS_FUZZ_VEC (0, 1, 2) names, to fuzz one path for a set time.
		vecMode = vecKind(seed >> 1 % (uint64(bestVec) + 1))
		if fuzzVec >= 0 {
			vecMode = vecKind(fuzzVec)
		}
		r := NewReplacer(NewMatcher(pats), idRepl)
		// Small windows put matches across window borders.
		defer func(w int) { window = w }(window)
		window = 1 + int(seed%97)
		if seed&1 == 0 {
			window = 16 << 10
		}
		for _, field := range []bool{false, true} {
			want, wn, _ := naiveReplace(pats, src, field, idRepl)
			var got []byte
			var gn int
			if field {
				got, gn, _ = r.ReplaceField(nil, src)
			} else {
				got, gn, _ = r.ReplaceText(nil, src)
				if rw, rn, _ := r.Rewrite(src); rn != wn || !bytes.Equal(rw, want) {
					t.Fatalf("Rewrite: got %d replacements, reference %d", rn, wn)
				}
				if r.Contains(src) != (wn > 0) {
					t.Fatalf("Contains=%v, reference count %d", wn == 0, wn)
				}
			}
			if gn != wn || !bytes.Equal(got, want) {
				t.Fatalf("field=%v: got %q (%d) want %q (%d)", field, got, gn, want, wn)
			}
		}
		want, _, _ := naiveReplace(pats, src, false, idRepl)
		rng := rand.New(rand.NewPCG(seed, seed>>7))
		var out bytes.Buffer
		w := r.NewWriter(&out)
		for rest := src; len(rest) > 0; {
			n := min(len(rest), rng.IntN(50)+0)
			if _, err := w.Write(rest[:n]); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), want) {
			t.Fatalf("stream: got %q want %q", out.Bytes(), want)
		}
	})
}

// TestPortablePath runs the matcher tests again without the vector
// prefilter, the path taken on CPUs without AVX2 and for short patterns.
func TestPortablePath(t *testing.T) {
	defer func(v vecKind) { vecMode = v }(vecMode)
	vecMode = vecNone
	t.Run("text", TestReplaceText)
	t.Run("field", TestReplaceField)
	t.Run("split", TestP10_WriterSplitsAcrossChunks)
	t.Run("large", TestWriterLargeAndByteAtATime)
	t.Run("dups", TestMatcherDuplicatesAndEmpty)
	t.Run("refusal", TestP9_ReplacerRefusalAborts)
}

func TestWriterCloseSemantics(t *testing.T) {
	r := NewReplacer(NewMatcher([]Pattern{{Value: []byte("secret-value-1"), ID: 1}}), idRepl)
	var out bytes.Buffer
	w := r.NewWriter(&out)
	if _, err := w.Write([]byte("x=secret-val")); err != nil {
		t.Fatal(err)
	}
	if out.String() != "" {
		t.Fatalf("bytes that may start a match were written before they were decided")
	}
	if _, err := w.Write([]byte("ue-1&y")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil || out.String() != "x={1}&y" {
		t.Fatalf("got %q, %v", out.String(), err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := w.Write([]byte("z")); err == nil {
		t.Fatalf("Write after Close succeeded")
	}
	// Decided bytes go out at once; only the carry waits.
	out.Reset()
	w = r.NewWriter(&out)
	_, _ = w.Write(bytes.Repeat([]byte("a"), 100))
	if out.Len() < 100-len("secret-value-1")-1 {
		t.Fatalf("writer held back %d bytes", 100-out.Len())
	}
	_ = w.Close()
}

// TestManyPatternsAgainstReference puts hundreds of patterns (far more
// prefixes than the vector path has buckets) against the reference, on both
// paths.
func TestManyPatternsAgainstReference(t *testing.T) {
	for mode := range bestVec + 1 {
		// The second and third alphabets have bytes that share table
		// entries on the VBMI path (equal low 6 bits).
		for _, alpha := range []string{"abcd1 \"=", "a1\xe1\x80\xff\x01 =", "4tT\xb4\x14 =2r"} {
			func() {
				defer func(v vecKind) { vecMode = v }(vecMode)
				vecMode = mode
				rng := rand.New(rand.NewPCG(11, 12))
				word := func(n int) []byte {
					b := make([]byte, n)
					for i := range b {
						b[i] = alpha[rng.IntN(len(alpha))]
					}
					return b
				}
				var pats []Pattern
				for i := range 120 {
					pats = append(pats, Pattern{Value: word(1 + rng.IntN(12)), ID: i, WholeField: rng.IntN(4) == 0})
				}
				src := word(2 << 10)
				r := NewReplacer(NewMatcher(pats), idRepl)
				for _, field := range []bool{false, true} {
					want, wn, _ := naiveReplace(pats, src, field, idRepl)
					var got []byte
					var gn int
					if field {
						got, gn, _ = r.ReplaceField(nil, src)
					} else {
						got, gn, _ = r.ReplaceText(nil, src)
					}
					if gn != wn || !bytes.Equal(got, want) {
						t.Fatalf("mode=%d field=%v: %d replacements, reference %d", mode, field, gn, wn)
					}
				}
			}()
		}
	}
}

func TestP10_WordBoundedScrubPatterns(t *testing.T) {
	cases := []struct {
		text       string
		word, want bool
	}{
		{"CVV 737.", true, true},
		{"CVV 737.", false, false},
		{"code:737-x", true, true},
		{"a/737/b", true, true},
		{"%20737%20", true, false}, // '0' before it: part of a longer run
		{"41737", true, false},
		{"x737y", true, false},
		{"=737&", false, true},
	}
	for _, c := range cases {
		m := NewMatcher([]Pattern{{Value: []byte("737"), ID: 1, WholeField: true, WordBounded: c.word}})
		r := NewReplacer(m, func(int) ([]byte, error) { return []byte("###"), nil })
		got, n, err := r.ReplaceText(nil, []byte(c.text))
		if err != nil {
			t.Fatal(err)
		}
		if (n == 1) != c.want {
			t.Errorf("%q word=%v: replaced=%v (%q), want %v", c.text, c.word, n == 1, got, c.want)
		}
		// The streaming writer follows the same rule.
		var buf bytes.Buffer
		w := r.NewWriter(&buf)
		for i := 0; i < len(c.text); i++ {
			w.Write([]byte{c.text[i]})
		}
		w.Close()
		if buf.String() != string(got) {
			t.Errorf("%q word=%v: writer %q, ReplaceText %q", c.text, c.word, buf.String(), got)
		}
	}
}

func TestRewriteReturnsSrcWhenNothingMatched(t *testing.T) {
	r := NewReplacer(NewMatcher(benchPatterns()), benchRepl())
	for _, matches := range []bool{false, true} {
		body := benchBody(64<<10, matches, rand.New(rand.NewPCG(7, 8)))
		orig := bytes.Clone(body)
		want, wn, _ := r.ReplaceText(nil, body)
		got, n, err := r.Rewrite(body)
		if err != nil || n != wn || !bytes.Equal(got, want) || !bytes.Equal(body, orig) {
			t.Fatalf("matches=%v: Rewrite made %d replacements (ReplaceText %d), err %v", matches, n, wn, err)
		}
		if same := &got[0] == &body[0]; same != (n == 0) {
			t.Fatalf("matches=%v: result aliases src=%v with %d replacements", matches, same, n)
		}
		if !matches && !raceEnabled {
			if a := testing.AllocsPerRun(20, func() { _, _, _ = r.Rewrite(body) }); a > 0 {
				t.Fatalf("Rewrite of an unmatched body allocates %.1f times", a)
			}
		}
	}
	refused := agentvault.Errorf(agentvault.CodeInternal, "refused")
	r = NewReplacer(NewMatcher([]Pattern{{Value: []byte("av_card_1_number_u7x2k"), ID: 1}}), func(int) ([]byte, error) { return nil, refused })
	if out, _, err := r.Rewrite([]byte("x av_card_1_number_u7x2k y")); !errors.Is(err, refused) || out != nil {
		t.Fatalf("refusal: out %d bytes, err %v", len(out), err)
	}
}
