package rewrite

import (
	"bytes"
	"encoding/base64"
	"math/rand/v2"
	"testing"
)

// hidesIn reports whether a base64 view of b (what EachEncodedView builds
// beyond the text views) holds needle.
func hidesIn(b, needle []byte) bool {
	found := false
	eachBase64View(b, 4, func(v []byte) bool {
		found = bytes.Contains(v, needle)
		return !found
	})
	return found
}

// mixAlphabets writes each character of value 62 or 63 of a standard
// base64 text in either alphabet, at random.
func mixAlphabets(rnd *rand.Rand, s []byte) []byte {
	out := bytes.Clone(s)
	for i, c := range out {
		if rnd.IntN(2) == 0 {
			continue
		}
		switch c {
		case '+':
			out[i] = '-'
		case '/':
			out[i] = '_'
		}
	}
	return out
}

func containsAny(b []byte, frags [][]byte) bool {
	for _, f := range frags {
		if bytes.Contains(b, f) {
			return true
		}
	}
	return false
}

// TestP9_Base64FragmentsCoverEveryView: whenever a base64 view of a text
// holds a needle (at any byte offset of the decoded run, the run glued to
// other base64 characters, either alphabet or both mixed, cut short or
// padded), the text holds one of the needle's Base64Fragments. A scan for
// those may therefore stand in for building the views (EachEncodedViewIf).
func TestP9_Base64FragmentsCoverEveryView(t *testing.T) {
	rnd := rand.New(rand.NewPCG(27, 9))
	randBytes := func(n int, alphabet string) []byte {
		b := make([]byte, n)
		for i := range b {
			if alphabet == "" {
				b[i] = byte(rnd.Uint32())
			} else {
				b[i] = alphabet[rnd.IntN(len(alphabet))]
			}
		}
		return b
	}
	needles := [][]byte{[]byte("av_"), []byte("AV_"), []byte("aV_"), []byte("av_card_1_number_u7x2k"), []byte("4242427384424242"),
		{0xfb, 0xff, 0xbf}, {0xff, 0xff, 0xff, 0xfe}, []byte("Pa$$w0rd-stand-in")}
	for range 300 {
		needles = append(needles, randBytes(3+rnd.IntN(20), ""))
	}
	const b64chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_"
	hidden := 0
	for _, needle := range needles {
		frags := Base64Fragments(needle)
		if len(frags) == 0 {
			t.Fatalf("no fragments for a needle of %d bytes", len(needle))
		}
		for range 40 {
			raw := append(append(randBytes(rnd.IntN(6), ""), needle...), randBytes(rnd.IntN(6), "")...)
			enc := []byte(base64.StdEncoding.EncodeToString(raw))
			if rnd.IntN(2) == 0 {
				enc = bytes.TrimRight(enc, "=")
			}
			enc = mixAlphabets(rnd, enc)
			if rnd.IntN(3) == 0 {
				enc = enc[:len(enc)-rnd.IntN(min(4, len(enc)))] // cut short
			}
			text := append(append(append(randBytes(rnd.IntN(12), "{}\" :,.xyz"), randBytes(rnd.IntN(4), b64chars)...), enc...),
				randBytes(rnd.IntN(4), b64chars)...)
			text = append(text, randBytes(rnd.IntN(12), "\" ,;")...)
			if !hidesIn(text, needle) {
				continue
			}
			hidden++
			if !containsAny(text, frags) {
				t.Fatalf("a base64 view of %q holds %x, but no fragment %q is in it", text, needle, frags)
			}
		}
	}
	if hidden < 2000 {
		t.Fatalf("only %d texts hid their needle: the test builds too few real cases", hidden)
	}
}

// TestP9_EachEncodedViewIfSkipsOnlyWhatItMay: a false mayHide skips the
// base64 views of that text, and only those (the text views still come);
// a needle hidden in base64 is found with the fragment scan as mayHide.
func TestP9_EachEncodedViewIfSkipsOnlyWhatItMay(t *testing.T) {
	needle := []byte("av_card_1_number_u7x2k")
	frags := Base64Fragments(needle)
	mayHide := func(b []byte) bool { return containsAny(b, frags) }
	find := func(b []byte, mayHide func([]byte) bool) (found bool, calls int) {
		EachEncodedViewIf(b, mayHide, func(v []byte) bool {
			calls++
			found = bytes.Contains(v, needle)
			return !found
		})
		return found, calls
	}
	hidden := []byte(`{"pad":"xxxxxxxxxxxxxxxxxxxxxxxx","blob":"` + base64.URLEncoding.EncodeToString(append([]byte("zz"), needle...)) + `"}`)
	if found, _ := find(hidden, mayHide); !found {
		t.Fatal("the needle in base64 was not found with the fragment scan as mayHide")
	}
	clean := []byte(`{"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx","q":"a%20b"}`)
	if _, calls := find(clean, nil); calls < 2 {
		t.Fatalf("without mayHide: %d views, want the text view and the base64 ones", calls)
	}
	if _, calls := find(clean, mayHide); calls != 1 {
		t.Fatalf("with a false mayHide: %d views, want the percent-decoded text view alone", calls)
	}
}
