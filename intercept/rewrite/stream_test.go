package rewrite

import (
	"bytes"
	"compress/flate"
	"io"
	"testing"

	agentvault "github.com/agentvault/agentvault"
)

func TestNewDecoderStreamsEveryCoding(t *testing.T) {
	plain := bytes.Repeat([]byte("a streamed page 4111111111111111 "), 4000)
	var raw bytes.Buffer
	fw, _ := flate.NewWriter(&raw, flate.DefaultCompression)
	_, _ = fw.Write(plain)
	_ = fw.Close()
	cases := []struct {
		name, header string
		body         []byte
	}{
		{"identity", "", plain},
		{"gzip", "gzip", compress(t, "gzip", plain)},
		{"deflate zlib", "deflate", compress(t, "deflate", plain)},
		{"deflate raw", "deflate", raw.Bytes()},
		{"br", "br", compress(t, "br", plain)},
		{"zstd", "zstd", compress(t, "zstd", plain)},
		{"stacked", "gzip, br", compress(t, "br", compress(t, "gzip", plain))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := NewDecoder(tc.header, bytes.NewReader(tc.body), 0)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			got, err := io.ReadAll(d)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, plain) {
				t.Fatalf("decoded %d bytes, want %d", len(got), len(plain))
			}
		})
	}
}

func TestNewDecoderRefusesUnknownAndCorrupt(t *testing.T) {
	if _, err := NewDecoder("compress", bytes.NewReader(nil), 0); agentvault.ErrorCode(err) != agentvault.CodeSubstitution {
		t.Fatalf("unknown coding: %v", err)
	}
	bad := compress(t, "gzip", bytes.Repeat([]byte("x"), 1000))
	bad[len(bad)/2] ^= 0xff
	d, err := NewDecoder("gzip", bytes.NewReader(bad), 0)
	if err == nil {
		_, err = io.ReadAll(d)
		d.Close()
	}
	if agentvault.ErrorCode(err) != agentvault.CodeMalformedRequest {
		t.Fatalf("corrupt gzip: %v", err)
	}
}

// countingReplacer replaces every "yyyy" by "zzzz", records how many bytes
// reach ReplaceField and answers Contains from a fixed flag.
type countingReplacer struct {
	has   bool
	asked *int
}

func (c countingReplacer) Contains([]byte) bool { return c.has }

func (c countingReplacer) ReplaceField(dst, src []byte) ([]byte, int, error) {
	*c.asked += len(src)
	n := bytes.Count(src, []byte("yyyy"))
	return append(dst, bytes.ReplaceAll(src, []byte("yyyy"), []byte("zzzz"))...), n, nil
}

func (c countingReplacer) ReplaceText(dst, src []byte) ([]byte, int, error) {
	return c.ReplaceField(dst, src)
}

// TestLargeFieldNotCopiedWhenNothingMatches: a field larger than the scratch
// buffer is not handed to the replacer (and copied) when Contains says
// nothing is there; when Contains says yes, it is rewritten as before.
func TestLargeFieldNotCopiedWhenNothingMatches(t *testing.T) {
	big := bytes.Repeat([]byte("y"), 1<<20)
	body := append([]byte("a=1&big="), big...)
	n := 0
	out, k, err := Form(body, countingReplacer{has: false, asked: &n})
	if err != nil || k != 0 || &out[0] != &body[0] || n >= len(big) {
		t.Fatalf("skip: err %v, count %d, same %v, bytes asked %d", err, k, &out[0] == &body[0], n)
	}
	out, k, err = Form(body, countingReplacer{has: true, asked: &n})
	if err != nil || k == 0 || bytes.Contains(out, []byte("yyyy")) {
		t.Fatalf("rewrite: err %v, count %d", err, k)
	}
}
