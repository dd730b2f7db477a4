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

func testScrubber() *scrubber {
	return newScrubber([]released{
		{real: vault.NewSecret([]byte("4242424242424242")), standIn: "4242420000004242", kind: vault.KindCard},
		{real: vault.NewSecret([]byte("737")), standIn: "123", kind: vault.KindCard},
		{real: vault.NewSecret([]byte("p&ss w0rd")), standIn: "q#tt x1sf", kind: vault.KindLogin},
	})
}

func TestP10_ShortValuesOnlyBetweenDelimiters(t *testing.T) {
	r := testScrubber()
	for in, want := range map[string]string{
		"cvv=737":             "cvv=123",
		"cvv=737&x=1":         "cvv=123&x=1",
		"17375":               "17375",
		"737":                 "123",
		"Length: 7370":        "Length: 7370",
		"CVV 737.":            "CVV 123.",
		"code/737-x":          "code/123-x",
		"v737":                "v737",
		"4242 4242 4242 4242": "4242 4200 0000 4242",
	} {
		got, _ := r.apply([]byte(in), nil)
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
		want, _ := r.apply(data, nil)
		got, err := io.ReadAll(r.reader(&chunkReader{b: bytes.Clone(data), n: n}, nil))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("chunk %d: stream %q, whole %q", n, got, want)
		}
		// Read into buffers smaller than what the scrub emits at once,
		// so part of it is held for the next Read.
		rd := r.reader(&chunkReader{b: bytes.Clone(data), n: n}, nil)
		got = got[:0]
		buf := make([]byte, 1+n%7)
		for {
			k, err := rd.Read(buf)
			got = append(got, buf[:k]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		rd.Close()
		if !bytes.Equal(got, want) {
			t.Fatalf("chunk %d, reads of %d: stream %q, whole %q", n, len(buf), got, want)
		}
		// One Read, then WriteTo (an HTTP/1.1 answer is copied by it):
		// what the Read left held goes first, the rest straight to w.
		rd = r.reader(&chunkReader{b: bytes.Clone(data), n: n}, nil)
		k, _ := rd.Read(buf)
		var out bytes.Buffer
		out.Write(buf[:k])
		if _, err := rd.(io.WriterTo).WriteTo(&out); err != nil {
			t.Fatal(err)
		}
		rd.Close()
		if !bytes.Equal(out.Bytes(), want) {
			t.Fatalf("chunk %d, WriteTo after a read of %d: stream %q, whole %q", n, len(buf), out.Bytes(), want)
		}
	})
}

// TestP10_WholeBodyScrubbedByMediaType: a whole body is walked by its media
// type first, so a value behind an escape no variant lists is still found,
// then scanned as text.
func TestP10_WholeBodyScrubbedByMediaType(t *testing.T) {
	r := testScrubber()
	cases := []struct{ name, ct, in, want string }{
		{"json odd escape", "application/json", `{"pw":"p&ss\u0020w0rd"}`, `{"pw":"q#tt x1sf"}`},
		{"json sniffed", "text/plain", `["4242424242424242"]`, `["4242420000004242"]`},
		{"json key", "application/json", `{"4242424242424242":1}`, `{"4242420000004242":1}`},
		{"broken json as text", "application/json", `{"cc":"4242424242424242"`, `{"cc":"4242420000004242"`},
		{"html", "text/html", `<b>4242 4242 4242 4242</b> cvv <i>737</i>`, `<b>4242 4200 0000 4242</b> cvv <i>123</i>`},
		{"nothing", "text/html", `<b>17375</b>`, `<b>17375</b>`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kinds := 0
			got, n := r.body(tc.ct, []byte(tc.in), 1<<20, func(vault.Kind) { kinds++ })
			if string(got) != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			if (n > 0) != (tc.in != tc.want) || kinds != n {
				t.Fatalf("count %d, hits %d", n, kinds)
			}
		})
	}
}

// TestScrubReaderCloseEarly: a body closed before its end stops the stream
// and the reader refuses further reads.
func TestScrubReaderCloseEarly(t *testing.T) {
	r := testScrubber()
	rd := r.reader(&chunkReader{b: bytes.Repeat([]byte("x 4242424242424242 "), 10000), n: 1000}, nil)
	buf := make([]byte, 100)
	if _, err := io.ReadFull(rd, buf); err != nil {
		t.Fatal(err)
	}
	if err := rd.Close(); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := rd.Read(buf)
		if err != nil {
			if err == io.EOF {
				t.Fatal("closed stream ended as if complete")
			}
			break
		}
	}
}

func TestContainsTokenShape(t *testing.T) {
	for in, want := range map[string]bool{
		"av_card_1_number_u7x2k":         true,
		"x=AV_CARD_1_NUMBER_U7X2K&y":     true,
		"Av_login_github_password_abcde": true,
		"_av_card_1_cvv_abcde":           true,
		"av_":                            false,
		"utm_source=av_x":                false,
		"":                               false,
		"a_v_card_1_number_u7x2k":        false,
	} {
		if got := containsTokenShape([]byte(in)); got != want {
			t.Errorf("containsTokenShape(%q) = %v", in, got)
		}
	}
}
