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
