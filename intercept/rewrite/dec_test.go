package rewrite

import (
	"bytes"
	"encoding/base64"
	"testing"
)

// TestDecodeBase64RunMatchesStdlib: the run decoder agrees with
// encoding/base64 on both alphabets and every tail length.
func TestDecodeBase64RunMatchesStdlib(t *testing.T) {
	for n := range 40 {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*37 + n)
		}
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			if got := decodeBase64Run([]byte("x"), []byte(enc.EncodeToString(b))); !bytes.Equal(got, append([]byte("x"), b...)) {
				t.Fatalf("%d bytes: got %x", n, got)
			}
		}
	}
}
