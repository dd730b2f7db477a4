package intercept

import (
	"bytes"
	"io"
	"testing"

	"github.com/agentvault/agentvault/vault"
)

// chunkReader returns its data n bytes at a time.
type chunkReader struct {
	b []byte
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	k := min(c.n, len(c.b), len(p))
	copy(p, c.b[:k])
	c.b = c.b[k:]
	return k, nil
}

func testScrubber() *replacer {
	var ps []pair
	ps = append(ps, variantPairs("4242424242424242", "4242420000004242", vault.KindCard, nil)...)
	ps = append(ps, variantPairs("737", "123", vault.KindCard, nil)...)
	ps = append(ps, variantPairs("p&ss w0rd", "q#tt x1sf", vault.KindLogin, nil)...)
	return newReplacer(ps)
}

func TestP10_ShortValuesOnlyBetweenDelimiters(t *testing.T) {
	r := testScrubber()
	for in, want := range map[string]string{
		"cvv=737":             "cvv=123",
		"cvv=737&x=1":         "cvv=123&x=1",
		"17375":               "17375",
		"737":                 "123",
		"Length: 7370":        "Length: 7370",
		"4242 4242 4242 4242": "4242 4200 0000 4242",
	} {
		got, _, _ := r.apply([]byte(in), nil)
		if string(got) != want {
			t.Errorf("apply(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzP10_StreamingScrubMatchesWhole checks the streaming scrubber against
// the whole-buffer one for every chunking: a value split across reads is
// still replaced.
func FuzzP10_StreamingScrubMatchesWhole(f *testing.F) {
	f.Add([]byte("a 4242424242424242 b 737 c p%26ss+w0rd"), 1)
	f.Add([]byte("4242 4242 4242 4242|737|cHAmc3MgdzByZA=="), 3)
	f.Add([]byte("x737"), 2)
	f.Fuzz(func(t *testing.T, data []byte, n int) {
		if n <= 0 || n > 64 {
			n = 1 + (n&63+64)%64
		}
		r := testScrubber()
		want, _, _ := r.apply(data, nil)
		got, err := io.ReadAll(r.reader(&chunkReader{b: bytes.Clone(data), n: n}, nil))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("chunk %d: stream %q, whole %q", n, got, want)
		}
	})
}
