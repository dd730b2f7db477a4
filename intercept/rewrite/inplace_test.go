package rewrite

import (
	"bytes"
	"fmt"
	"testing"

	agentvault "github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/tokens"
)

// inPlacePairs are stand-ins and what they become: the same length
// (format-preserving, the usual case), the same length but longer once
// JSON-escaped, shorter, longer, and a refusal.
var inPlacePairs = [][2]string{
	{"CwnbcKbyyp1zdQxyEkmv0317", "BenchPassw0rdForEcho2026"},
	{"4242420000004242", "4242424242424242"},
	{"Qq7Zr2Lm", `a"b\c/d<`},
	{tokNumber, realNumber},
	{"Ab3Cd4", "Ab3Cd4Ef5Gh6"},
	{tokForbid, ""},
}

func inPlaceReplacer() *tokens.Replacer {
	var pats []tokens.Pattern
	for i, p := range inPlacePairs {
		pats = append(pats, tokens.Pattern{Value: []byte(p[0]), ID: i})
	}
	return tokens.NewReplacer(tokens.NewMatcher(pats), func(id int) ([]byte, error) {
		if inPlacePairs[id][1] == "" {
			return nil, agentvault.Errorf(agentvault.CodeTokenNotAllowed, "token not allowed here")
		}
		return []byte(inPlacePairs[id][1]), nil
	})
}

// bodyWatcher is a Replacer that checks, each time it is asked for a field,
// that the body it was given is still as received: BodyInPlace writes
// nothing before the walk is over (the proxy's wire amount check walks the
// body as received from inside the replacer).
type bodyWatcher struct {
	*tokens.Replacer
	t          *testing.T
	body, orig []byte
}

func (w bodyWatcher) ReplaceField(dst, src []byte) ([]byte, int, error) {
	if !bytes.Equal(w.body, w.orig) {
		w.t.Fatal("body written over while the walk was still reading it")
	}
	return w.Replacer.ReplaceField(dst, src)
}

func (w bodyWatcher) VisitField(Field) {}

// TestBodyInPlaceMatchesBody: BodyInPlace answers as Body does (bytes,
// count, error code) for JSON, form and text bodies, identity and gzip,
// with no value, one, or two at every position of a document; Body never
// writes over its input, and BodyInPlace does not on an error.
func TestBodyInPlaceMatchesBody(t *testing.T) {
	doc := `{"a":"xx yy","b":[12,"zz\u00e9"],"c":{"d":"ww"},"e":3.5}`
	values := []string{""}
	for _, p := range inPlacePairs {
		values = append(values, p[0])
	}
	cases := []struct{ ct, ce string }{
		{"application/json", ""}, {"text/plain", ""}, {"application/x-www-form-urlencoded", ""}, {"application/json", "gzip"},
	}
	r := inPlaceReplacer()
	checked := 0
	for _, c := range cases {
		for i := 0; i <= len(doc); i++ {
			for _, v1 := range values {
				for _, v2 := range []string{"", inPlacePairs[0][0]} {
					plain := []byte(doc[:i] + v1 + doc[i:] + v2)
					in := plain
					if c.ce != "" {
						in = compress(t, c.ce, plain)
					}
					a, b := bytes.Clone(in), bytes.Clone(in)
					want, wn, werr := Body(c.ct, c.ce, a, r, 0)
					got, gn, gerr := BodyInPlace(c.ct, c.ce, b, bodyWatcher{r, t, b, in}, 0)
					name := fmt.Sprintf("%s %s %q", c.ct, c.ce, plain)
					if !bytes.Equal(a, in) {
						t.Fatalf("%s: Body wrote over its input", name)
					}
					if agentvault.ErrorCode(werr) != agentvault.ErrorCode(gerr) || (werr == nil) != (gerr == nil) {
						t.Fatalf("%s: error %v, Body's %v", name, gerr, werr)
					}
					if werr != nil {
						if !bytes.Equal(b, in) {
							t.Fatalf("%s: BodyInPlace wrote over its input and failed", name)
						}
						continue
					}
					if gn != wn || !bytes.Equal(got, want) {
						t.Fatalf("%s: %q (%d), Body's %q (%d)", name, got, gn, want, wn)
					}
					checked++
				}
			}
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d bodies compared", checked)
	}
}

// TestBodyInPlaceWritesOver: a JSON body whose replacements keep their
// lengths comes back as the same memory; one that grows does not.
func TestBodyInPlaceWritesOver(t *testing.T) {
	r := inPlaceReplacer()
	for _, c := range []struct {
		v    string
		over bool
	}{{inPlacePairs[0][0], true}, {inPlacePairs[1][0], true}, {inPlacePairs[2][0], false}, {tokNumber, false}} {
		b := []byte(`{"p":"` + c.v + `","pad":"xxxx"}`)
		out, n, err := BodyInPlace("application/json", "", b, r, 0)
		if err != nil || n != 1 {
			t.Fatalf("%q: n=%d err=%v", c.v, n, err)
		}
		if same := &out[0] == &b[0]; same != c.over {
			t.Errorf("%q: written over the input %v, want %v", c.v, same, c.over)
		}
	}
}

// TestLiteralHasNoTextViews: a body Literal says is read as it stands has
// no percent, JSON or HTML view (EncodedViews's text views), whatever
// bytes it holds otherwise; and one with any byte that starts an escape is
// not Literal.
func TestLiteralHasNoTextViews(t *testing.T) {
	alphabet := []byte("ab_\"'=:;,{}[]<> \t\n%+\\&#x41u005f;=\xc3\xa9")
	for n := 0; n < 4000; n++ {
		b := make([]byte, n%40)
		for i := range b {
			b[i] = alphabet[(n*7+i*13+i*i)%len(alphabet)]
		}
		lit := Literal("text/plain", "", b)
		if lit && len(textViews(b)) > 0 {
			t.Fatalf("%q: Literal, yet it has a text view", b)
		}
		if lit == bytes.ContainsAny(b, literalBreakers) {
			t.Fatalf("%q: Literal %v", b, lit)
		}
	}
	for _, c := range []struct{ ct, ce string }{{"multipart/form-data; boundary=x", ""}, {"Multipart/Mixed", ""}, {"application/json", "gzip"}, {"text/plain", "bogus"}} {
		if Literal(c.ct, c.ce, []byte("plain")) {
			t.Errorf("%q %q: Literal", c.ct, c.ce)
		}
	}
	if !Literal("application/json", "identity", []byte(`{"a":"b"}`)) {
		t.Error("identity-coded plain JSON is not Literal")
	}
}
