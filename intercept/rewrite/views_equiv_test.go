package rewrite

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/agentvault/agentvault/tokens"
)

// collectPieces returns what each passes to its callback, in order,
// copied.
func collectPieces(each func([]byte, func([]byte) bool) bool, b []byte) ([][]byte, bool) {
	var got [][]byte
	ok := each(b, func(v []byte) bool {
		got = append(got, bytes.Clone(v))
		return true
	})
	return got, ok
}

// checkSamePieces fails t unless EachEncodedView hands its callback what
// the reference (the code before issue 12) did: the same bytes in the
// same order, joined by line breaks, in no more calls. The new pieces are
// then the old ones, some joined by the line breaks EncodedViews joins
// runs with: a value holding no line break (no token or stand-in does) is
// in a new piece whenever it was in an old one, since every stretch of the
// joined bytes without a line break lies inside one piece. And a check
// that stops on any value the old pieces held stops the new walk too.
// The new pieces are also exactly EncodedViews's views, one a call.
func checkSamePieces(t *testing.T, b []byte) {
	t.Helper()
	want, wantOK := collectPieces(refEachEncodedView, b)
	got, gotOK := collectPieces(EachEncodedView, b)
	if !gotOK || !wantOK || len(got) > len(want) {
		t.Fatalf("%q: %d pieces (ok %v), reference %d (ok %v)", b, len(got), gotOK, len(want), wantOK)
	}
	if g, w := bytes.Join(got, []byte("\n")), bytes.Join(want, []byte("\n")); !bytes.Equal(g, w) {
		t.Fatalf("%q: pieces joined\n got %x\nwant %x", b, g, w)
	}
	views := EncodedViews(b)
	if len(got) != len(views) {
		t.Fatalf("%q: %d pieces, %d views", b, len(got), len(views))
	}
	for i := range views {
		if !bytes.Equal(got[i], views[i]) {
			t.Fatalf("%q: piece %d is not view %d", b, i, i)
		}
	}
	// A few of the old pieces' values (the join above covers them all;
	// every piece would make a large input's check quadratic).
	for i := 0; i < len(want); i += max(1, len(want)/6) {
		p := want[i]
		for _, needle := range [][]byte{p[:min(7, len(p))], p[len(p)/2:], p[max(0, len(p)-9):]} {
			if len(needle) < 7 || bytes.IndexByte(needle, '\n') >= 0 {
				continue
			}
			if EachEncodedView(b, func(v []byte) bool { return !bytes.Contains(v, needle) }) {
				t.Fatalf("%q: %x was in a piece before, is in none now", b, needle)
			}
		}
	}
}

// viewSeeds are the inputs where finding runs while decoding could go
// wrong: runs at the 10-character boundary and at every length around the
// 8-character decoding step, mixed alphabets, '=' padding, blobs glued to
// letters, runs at either end of the buffer, many short runs, more runs
// than the 16 kept on the stack, JSON and form encodings of blobs.
func viewSeeds() [][]byte {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_"
	blob := base64.StdEncoding.EncodeToString([]byte(`{"n":"` + tokNumber + `","pw":"` + standInPW + `"}`))
	seeds := []string{
		"", "x", "=", strings.Repeat("A", 9), strings.Repeat("A", 10), strings.Repeat("A", 11),
		" " + strings.Repeat("Q", 9) + " ", " " + strings.Repeat("Q", 10) + " ",
		strings.Repeat("Q", 9) + "=" + strings.Repeat("Q", 10) + "==",
		base64.StdEncoding.EncodeToString([]byte(tokNumber)),
		base64.RawURLEncoding.EncodeToString([]byte(standInPW)),
		"abc" + blob, blob + "xyz", `{"a":"` + strings.ReplaceAll(blob, "/", `\/`) + `"}`,
		"x=1&b=" + strings.ReplaceAll(strings.ReplaceAll(blob, "+", "%2B"), "=", "%3D") + "&y=a+b",
		"ab+/-_cd" + blob + "-_-_" + base64.URLEncoding.EncodeToString([]byte(tokNumber)),
		strings.Repeat("word ", 50) + strings.Repeat("wordsworth ", 20),
		strings.Repeat(blob[:12]+".", 40),
		"&amp;" + blob + "&#97;" + strings.Repeat("z", 33),
		`"\u0061v_card_` + strings.Repeat("Z", 17) + `\n` + strings.Repeat("y", 40) + `"`,
	}
	// Every run length from 1 to 40 between non-base64 characters, at
	// either end of the buffer and inside it.
	for n := 1; n <= 40; n++ {
		run := alphabet[n%len(alphabet):] + alphabet
		run = run[:n]
		seeds = append(seeds, run, run+".", "."+run, "%"+run+"=="+run[:n/2]+"\"")
	}
	// A break at every place of a 24-character stretch.
	for i := 0; i < 24; i++ {
		s := []byte(strings.Repeat("Zm9vYmFy", 3))
		s[i] = "=. \n%\\&\""[i%8]
		seeds = append(seeds, string(s))
	}
	return append(bytesOf(seeds), bytes.Repeat([]byte{0xff, 'A', 0x80, 'b'}, 30))
}

func bytesOf(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// TestP9_EachEncodedViewSameAsReference: on the seeds and on random
// bodies of base64 characters broken by other characters at random
// places, in runs of every length, the faster EachEncodedView (runs found
// while decoding, the unshifted piece read off the decoded bits) hands fn
// byte for byte the pieces the previous code did, in the same order; so
// every token or stand-in the check found before it finds now.
func TestP9_EachEncodedViewSameAsReference(t *testing.T) {
	for _, s := range viewSeeds() {
		checkSamePieces(t, s)
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_"
	const other = " .=\"%\\&\n:,{}\x00\xff"
	rnd := rand.New(rand.NewPCG(12, 12))
	for n := 0; n < 2000; n++ {
		var b []byte
		for range rnd.IntN(30) {
			for range rnd.IntN([]int{12, 30, 200}[rnd.IntN(3)]) {
				b = append(b, alphabet[rnd.IntN(len(alphabet))])
			}
			for range 1 + rnd.IntN(3) {
				b = append(b, other[rnd.IntN(len(other))])
			}
		}
		if rnd.IntN(2) == 0 && len(b) > 0 {
			b = b[:len(b)-1]
		}
		checkSamePieces(t, b)
	}
	for _, in := range benchViewInputs() {
		checkSamePieces(t, in.body[:64<<10])
	}
}

// TestP9_EachEncodedViewWipesPieces: once EachEncodedView returns, the
// base64 pieces it handed out (pooled buffers) hold only zeros: a decoded
// piece of a rewritten body may hold a real value.
func TestP9_EachEncodedViewWipesPieces(t *testing.T) {
	secret := strings.Repeat("4242", 4)
	for _, body := range []string{
		`{"v":"` + base64.StdEncoding.EncodeToString([]byte(`{"card":"`+secret+`"}`)) + `"}`,
		"x=1&v=" + base64.RawURLEncoding.EncodeToString([]byte(secret+secret)) + "%2B" + strings.Repeat("Q", 30),
	} {
		views := len(textViews([]byte(body)))
		var pieces [][]byte
		EachEncodedView([]byte(body), func(v []byte) bool {
			pieces = append(pieces, v)
			return true
		})
		if len(pieces) <= views {
			t.Fatalf("%q: no base64 pieces", body)
		}
		for i, p := range pieces[views:] {
			if bytes.ContainsFunc(p, func(r rune) bool { return r != 0 }) {
				t.Fatalf("%q: base64 piece %d not wiped: %x", body, i, p)
			}
		}
	}
}

// FuzzEachEncodedView: for any input, EachEncodedView hands fn the same
// pieces as the reference.
func FuzzEachEncodedView(f *testing.F) {
	for _, s := range viewSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkSamePieces(t, b)
	})
}

type benchViewInput struct {
	name string
	body []byte
}

// benchViewInputs are 1 MiB bodies: the bench harness's echo body (one
// JSON string of 'x' padding, one long base64-alphabet run), random
// standard base64, and English-like text (short runs: words).
func benchViewInputs() []benchViewInput {
	const size = 1 << 20
	rnd := rand.New(rand.NewPCG(1, 2))
	raw := make([]byte, size*3/4)
	for i := range raw {
		raw[i] = byte(rnd.Uint32())
	}
	words := strings.Fields("the of and to a in is that for it as was with be by on not he this are or his from at which " +
		"but have an they you were her she there one all we their been has when who will more no if out so said what up " +
		"its about into than them can only other new some could time these two may then do first any my now such like " +
		"our over man me even most made after also did many before must through back years where much your way well " +
		"information government development international understanding particularly relationship, responsibility.")
	var text bytes.Buffer
	for text.Len() < size {
		text.WriteString(words[rnd.IntN(len(words))])
		text.WriteString([]string{" ", " ", " ", " ", ", ", ". ", "\n"}[rnd.IntN(7)])
	}
	return []benchViewInput{
		{"x-in-json", []byte(`{"amount":42.0,"pad":"` + strings.Repeat("x", size) + `"}`)},
		{"random-base64", []byte(base64.StdEncoding.EncodeToString(raw))},
		{"english", text.Bytes()[:size]},
	}
}

// benchCheck is a check like the proxy's: a matcher of the long tokens
// and stand-ins, and a scan for the '_' of a token's shape (package
// intercept's containsTokenShape, with a cheaper look past "av_" than its
// regexp: the benchmark measures the views, not the regexp).
func benchCheck() func([]byte) bool {
	m := tokens.NewMatcher([]tokens.Pattern{
		{Value: []byte(tokNumber), ID: 0},
		{Value: []byte(tokCVV), ID: 1},
		{Value: []byte(standInPW), ID: 2},
		{Value: []byte(tokForbid), ID: 3},
	})
	shape := regexp.MustCompile(`^(?i)(card|login|identity|address)_`)
	return func(v []byte) bool {
		for i := 2; i < len(v); i++ {
			j := bytes.IndexByte(v[i:], '_')
			if j < 0 {
				break
			}
			i += j
			if v[i-2]|0x20 == 'a' && v[i-1]|0x20 == 'v' && shape.Match(v[i+1:min(i+10, len(v))]) {
				return false
			}
		}
		return !m.Contains(v)
	}
}

// BenchmarkEachEncodedView: the hidden-value check's views of 1 MiB
// bodies with a realistic check, the current code (new) and the code
// before issue 12 (ref), in the same run.
func BenchmarkEachEncodedView(b *testing.B) {
	check := benchCheck()
	for _, in := range benchViewInputs() {
		for _, impl := range []struct {
			name string
			each func([]byte, func([]byte) bool) bool
		}{{"new", EachEncodedView}, {"ref", refEachEncodedView}} {
			b.Run(fmt.Sprintf("%s/%s", in.name, impl.name), func(b *testing.B) {
				if !impl.each(in.body, check) {
					b.Fatal("check refused the input")
				}
				b.SetBytes(int64(len(in.body)))
				for b.Loop() {
					impl.each(in.body, check)
				}
			})
		}
	}
}
