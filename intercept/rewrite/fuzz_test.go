package rewrite

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/url"
	"reflect"
	"strings"
	"testing"

	agentvault "github.com/agentvault/agentvault"
)

// fuzzReplacer has a short numeric value (whole field only, becomes a longer
// number), a short value whose replacement needs escaping in every format,
// and a long value matched anywhere.
var fuzzReplacer = naiveReplacer{pairs: [][2]string{
	{"123", "9876"},
	{"-5", "7"},
	{"ab", "x\"y&=%\\"},
	{"tok_abcdefgh", "REAL<&>\"\\/\u2028é+ ;"},
}}

func refField(s string) (string, int) {
	out, n, _ := fuzzReplacer.ReplaceField(nil, []byte(s))
	return string(out), n
}

func refText(s string) (string, int) {
	out, n, _ := fuzzReplacer.ReplaceText(nil, []byte(s))
	return string(out), n
}

type refPair struct {
	k, v  string
	hasEq bool
}

// refForm decodes a form with the standard library, keeping order.
func refForm(b []byte) ([]refPair, bool) {
	var out []refPair
	for _, p := range strings.Split(string(b), "&") {
		k, v, hasEq := strings.Cut(p, "=")
		dk, err1 := url.QueryUnescape(k)
		dv, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil {
			return nil, false
		}
		out = append(out, refPair{dk, dv, hasEq})
	}
	return out, true
}

func FuzzForm(f *testing.F) {
	for _, s := range []string{
		"number=tok_abcdefgh&x=1", "cvc=123", "amount=41234&zip=1234", "n=tok%5Fabcdefgh", "ab=on",
		"a=%7e+b&c&=&d=123&e=%zz", "a=-5&b=+-5&c=%2D5", "", "&&", "a=b=c",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, n, err := Form(in, fuzzReplacer)
		if err != nil {
			t.Fatalf("Form failed: %v", err)
		}
		ref, ok := refForm(in)
		if !ok {
			return
		}
		count := 0
		for i, p := range ref {
			var a, b int
			ref[i].k, a = refField(p.k)
			ref[i].v, b = refField(p.v)
			count += a + b
		}
		got, ok := refForm(out)
		if !ok {
			t.Fatalf("output %s does not decode", show(out))
		}
		if !reflect.DeepEqual(got, ref) || n != count {
			t.Fatalf("in %s: got %s (%d), want %s (%d)", show(in), show(out), n, show(ref), count)
		}
		if count == 0 && !bytes.Equal(out, in) {
			t.Fatalf("unchanged form altered: %s -> %s", show(in), show(out))
		}
	})
}

// refJSON applies the replacer to every string and number of a decoded
// document. ok is false when two keys of one object collide after
// replacement (the result then depends on order, so it is not compared).
func refJSON(v any) (any, int, bool) {
	switch x := v.(type) {
	case string:
		s, n := refField(x)
		return s, n, true
	case json.Number:
		s, n := refField(string(x))
		return json.Number(s), n, true
	case []any:
		total := 0
		out := make([]any, len(x))
		for i, e := range x {
			r, n, ok := refJSON(e)
			if !ok {
				return nil, 0, false
			}
			out[i], total = r, total+n
		}
		return out, total, true
	case map[string]any:
		total := 0
		out := make(map[string]any, len(x))
		for k, e := range x {
			nk, n1 := refField(k)
			r, n2, ok := refJSON(e)
			if _, dup := out[nk]; dup || !ok {
				return nil, 0, false
			}
			out[nk], total = r, total+n1+n2
		}
		return out, total, true
	}
	return v, 0, true
}

func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, io.ErrUnexpectedEOF
	}
	return v, nil
}

// checkJSON compares JSON(in) with the reference when in is valid JSON; it
// reports whether a comparison was made.
func checkJSON(t *testing.T, in, out []byte, n int, err error) bool {
	t.Helper()
	v, derr := decodeJSON(in)
	if derr != nil {
		return false
	}
	if err != nil {
		t.Fatalf("JSON failed on valid input %s: %v", show(in), err)
	}
	want, count, ok := refJSON(v)
	got, derr := decodeJSON(out)
	if derr != nil {
		t.Fatalf("output of valid %s is not JSON: %s", show(in), show(out))
	}
	if !ok {
		return true
	}
	// The scanner also sees duplicate keys the decoder drops, so it may
	// count more replacements, never fewer.
	if !reflect.DeepEqual(got, want) || n < count {
		t.Fatalf("in %s: got %s (%d), want %s (%d)", show(in), show(out), n, show(want), count)
	}
	return true
}

func FuzzJSON(f *testing.F) {
	for _, s := range []string{
		`{"number":"tok_abcdefgh"}`, `{"number":"\u0074ok_abcdefgh"}`, `["\u0031\u0032\u0033"]`,
		`{"a":"\ud83d\ude00tok_abcdefgh"}`, `{"a":"\ud83dtok_abcdefgh"}`, `{"ab":123}`, `{"cvv": 123 , "n":-5, "m":-5.0}`,
		`{"a":"x123"}`, "{ \"z\" : [1, 2.50e3 ,\"ab\"],\n\t\"a\":null }", `{"a":"\u00e9\n","b":"ab"}`,
		`{"ab":1,"x\"y&=%\\":2}`, `"ab"`, `123`, `{"a":"tok_abcdefgh`, "{\"a\":\"\xff123\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, n, err := JSON(in, fuzzReplacer)
		checkJSON(t, in, out, n, err)
		if err == nil && n == 0 && !bytes.Equal(in, out) {
			t.Fatalf("unchanged document altered: %s -> %s", show(in), show(out))
		}
	})
}

type refPart struct {
	header map[string][]string
	body   []byte
}

func refMultipart(b []byte, boundary string) ([]refPart, bool) {
	var out []refPart
	mr := multipart.NewReader(bytes.NewReader(b), boundary)
	for {
		p, err := mr.NextRawPart()
		if err == io.EOF {
			return out, true
		}
		if err != nil {
			return nil, false
		}
		body, err := io.ReadAll(p)
		if err != nil {
			return nil, false
		}
		out = append(out, refPart{p.Header, body})
	}
}

const fuzzBoundary = "B0und"

func FuzzMultipart(f *testing.F) {
	for _, s := range []string{
		"--B0und\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n123\r\n--B0und\r\nContent-Disposition: form-data; name=\"f\"; filename=\"x\"\r\nContent-Type: text/plain\r\n\r\nline tok_abcdefgh\r\n--B0und--\r\n",
		"preamble\n--B0und  \nContent-Disposition: form-data; name=\"a\"\n\nab\n--B0und\n\nkeep\n--B0und--\nepilogue",
		"--B0und\r\nContent-Type: application/json\r\n\r\n{\"a\":\"\\u0074ok_abcdefgh\",\"b\":123}\r\n--B0und--",
		"--B0und\r\nContent-Transfer-Encoding: base64\r\n\r\ndG9rX2FiY2RlZmdo\r\n--B0und--",
		"--B0und\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\ntok=5Fabcdefgh=\r\n x\r\n--B0und--",
		"--B0und--", "--B0und\r\n\r\n--B0und--", "--B0und\r\n\r\n\r\n--B0und\r\n\r\nab\r\n--B0und--  ",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, n, err := Multipart(fuzzBoundary, in, fuzzReplacer)
		ref, ok := refMultipart(in, fuzzBoundary)
		if !ok {
			if err == nil {
				t.Fatalf("accepted %s, which mime/multipart rejects", show(in))
			}
			return
		}
		plain := true // every part an ordinary field the reference can check
		for _, p := range ref {
			mt, _, _ := mime.ParseMediaType(textprotoGet(p.header, "Content-Type"))
			if textprotoGet(p.header, "Content-Transfer-Encoding") != "" || strings.HasPrefix(mt, "multipart/") {
				plain = false
			}
		}
		if err != nil {
			// mime/multipart takes a part header cut short by the end of
			// input for a clean end; refusing that is fine.
			// A replacement that would change the structure is refused
			// with substitution_failed; that is correct too.
			if plain && !strings.Contains(err.Error(), "header not terminated") &&
				agentvault.ErrorCode(err) != agentvault.CodeSubstitution {
				t.Fatalf("refused %s, which mime/multipart accepts: %v", show(in), err)
			}
			return
		}
		got, ok := refMultipart(out, fuzzBoundary)
		if !ok || len(got) != len(ref) {
			t.Fatalf("output of %s does not split into %d parts: %s", show(in), len(ref), show(out))
		}
		count := 0
		for i, p := range ref {
			wantHdr := map[string][]string{}
			for k, vs := range p.header {
				nk, c := refText(k)
				count += c
				for _, v := range vs {
					nv, c := refText(v)
					count += c
					wantHdr[nk] = append(wantHdr[nk], nv)
				}
			}
			if !reflect.DeepEqual(got[i].header, wantHdr) {
				t.Fatalf("part %d header: got %s, want %s", i, show(got[i].header), show(wantHdr))
			}
			if !plain {
				continue
			}
			mt, _, _ := mime.ParseMediaType(textprotoGet(p.header, "Content-Type"))
			if isJSONType(mt) {
				jout, jn, jerr := JSON(p.body, fuzzReplacer)
				if checkJSON(t, p.body, got[i].body, jn, jerr) {
					count += jn
					continue
				}
				if !bytes.Equal(jout, got[i].body) {
					t.Fatalf("part %d: JSON part rewritten inconsistently", i)
				}
				count += jn
				continue
			}
			want, c := refField(string(p.body))
			if string(got[i].body) != want {
				t.Fatalf("part %d: got %s, want %s", i, show(got[i].body), show(want))
			}
			count += c
		}
		// Preamble and epilogue (which the reference cannot see) may add
		// replacements.
		if plain && n < count {
			t.Fatalf("%d replacements, reference counts %d", n, count)
		}
		if n == 0 && !bytes.Equal(in, out) {
			t.Fatalf("unchanged body altered")
		}
	})
}

func textprotoGet(h map[string][]string, k string) string {
	if v := h[k]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// refURL decodes path segments and query pairs with the standard library.
func refURL(u *url.URL) (segs []string, pairs []refPair, ok bool) {
	for _, s := range strings.Split(u.EscapedPath(), "/") {
		d, err := url.PathUnescape(s)
		if err != nil {
			return nil, nil, false
		}
		segs = append(segs, d)
	}
	if u.RawQuery != "" {
		if pairs, ok = refForm([]byte(u.RawQuery)); !ok {
			return nil, nil, false
		}
	}
	return segs, pairs, true
}

func FuzzURL(f *testing.F) {
	for _, s := range []string{
		"https://a.example/pay/tok_abcdefgh/x", "https://a.example/av%5Fcard/123?ab=123&x=%7e", "/a%2Fb/ab?q=tok_abcdefgh",
		"https://u:tok_abcdefgh@a.example/", "https://a.example/ab;x=1/123?&&=", "mailto:tok_abcdefgh",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		before := *u
		n, err := URL(u, fuzzReplacer)
		if err != nil {
			t.Fatalf("URL(%s): %v", show(raw), err)
		}
		if n == 0 {
			if u.String() != before.String() {
				t.Fatalf("unchanged URL altered: %s -> %s", show(before.String()), show(u.String()))
			}
			return
		}
		if before.Opaque != "" {
			return
		}
		segs, pairs, ok := refURL(&before)
		if !ok {
			return
		}
		for i := range segs {
			if segs[i] != "" {
				segs[i], _ = refField(segs[i])
			}
		}
		for i, p := range pairs {
			pairs[i].k, _ = refField(p.k)
			pairs[i].v, _ = refField(p.v)
		}
		// The result must survive a round trip through its own string form.
		again, err := url.Parse(u.String())
		if err != nil {
			t.Fatalf("rewritten URL %s does not parse", show(u.String()))
		}
		gotSegs, gotPairs, ok := refURL(again)
		if !ok || !reflect.DeepEqual(gotSegs, segs) || !reflect.DeepEqual(gotPairs, pairs) {
			t.Fatalf("%s -> %s: segments %s pairs %s, want %s %s", show(raw), show(u.String()), show(gotSegs), show(gotPairs), show(segs), show(pairs))
		}
	})
}

// FuzzBody drives the whole dispatch (codings, media types) with arbitrary
// bytes: no panic, no output alongside an error, an unchanged body returned
// as it came, and a changed one that decodes again under its coding.
func FuzzBody(f *testing.F) {
	types := []string{"", "text/plain", "application/json", "application/x-www-form-urlencoded",
		"multipart/form-data; boundary=" + fuzzBoundary, "application/xml", "multipart/mixed"}
	codings := []string{"", "gzip", "deflate", "br", "zstd", "gzip, br", "identity"}
	f.Add(uint8(2), uint8(0), []byte(`{"a":"tok_abcdefgh"}`))
	f.Add(uint8(3), uint8(0), []byte(`ab=123`))
	f.Add(uint8(4), uint8(0), []byte("--B0und\r\n\r\nab\r\n--B0und--"))
	f.Add(uint8(1), uint8(1), compress(f, "gzip", []byte("x tok_abcdefgh")))
	f.Add(uint8(0), uint8(4), compress(f, "zstd", []byte(`["ab"]`)))
	f.Fuzz(func(t *testing.T, ti, ci uint8, body []byte) {
		ct, ce := types[int(ti)%len(types)], codings[int(ci)%len(codings)]
		out, n, err := Body(ct, ce, body, fuzzReplacer, 1<<16)
		if err != nil {
			if out != nil || n != 0 {
				t.Fatal("output alongside an error")
			}
			return
		}
		if n == 0 {
			if !bytes.Equal(out, body) {
				t.Fatal("unchanged body altered")
			}
			return
		}
		if _, err := Decode(ce, out, 1<<20); err != nil {
			t.Fatalf("rewritten body does not decode: %v", err)
		}
	})
}
