package rewrite

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
)

// The benchmarks rewrite ~64 KiB bodies holding one token each. The baseline
// is one ReplaceText pass over the JSON bytes, what a structure-blind proxy
// would do; compare the others to it (same run). The replacer is the real
// tokens.Replacer (REWRITE_BENCH_NAIVE=1 for the naive test one).
func BenchmarkBody(b *testing.B) {
	var js strings.Builder
	js.WriteString(`{"items":[`)
	for i := 1000; js.Len() < 64<<10; i++ {
		fmt.Fprintf(&js, `{"id":%d,"name":"item \u00e9 %d","price":12.50},`, i, i)
	}
	js.WriteString(`{"card":"` + tokNumber + `"}]}`)
	var form strings.Builder
	for i := 0; form.Len() < 64<<10; i++ {
		fmt.Fprintf(&form, "f%d=value+%%C3%%A9+%d&", i, i)
	}
	form.WriteString("number=" + tokNumber)
	parts := []testPart{formField("number", tokNumber)}
	for i := 0; i < 64; i++ {
		parts = append(parts, formField(fmt.Sprint("f", i), strings.Repeat("z", 1000)))
	}
	mp, boundary := buildMultipart(b, parts)
	gz := compress(b, "gzip", []byte(js.String()))
	br := compress(b, "br", []byte(js.String()))

	cases := []struct {
		name, ct, ce string
		body         []byte
	}{
		{"xml-as-text", "application/xml", "", []byte("<x>" + js.String() + "</x>")},
		{"json", "application/json", "", []byte(js.String())},
		{"form", "application/x-www-form-urlencoded", "", []byte(form.String())},
		{"multipart", "multipart/form-data; boundary=" + boundary, "", mp},
		{"json-gzip", "application/json", "gzip", gz},
		{"json-br", "application/json", "br", br},
	}
	var r Replacer = testReplacer()
	if os.Getenv("REWRITE_BENCH_NAIVE") == "" {
		r = realTokensReplacer()
	}
	b.Run("baseline-text-pass", func(b *testing.B) {
		body := []byte(js.String())
		b.SetBytes(int64(len(body)))
		for i := 0; i < b.N; i++ {
			r.ReplaceText(nil, body)
		}
	})
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			for i := 0; i < b.N; i++ {
				if _, n, err := Body(c.ct, c.ce, c.body, r, 0); err != nil || n != 1 {
					b.Fatalf("n=%d err=%v", n, err)
				}
			}
		})
	}
}

func BenchmarkFrameRewriter(b *testing.B) {
	msg := bytes.Repeat([]byte("hello world "), 1000)
	msg = append(msg, tokNumber...)
	var in []byte
	for i := 0; i < 16; i++ {
		in = append(in, frame(true, 0, opText, msg, []byte{1, 2, 3, 4})...)
	}
	b.SetBytes(int64(len(in)))
	var out bytes.Buffer
	for i := 0; i < b.N; i++ {
		out.Reset()
		if err := NewFrameRewriter(realTokensReplacer(), true, 1<<20).Run(&out, bytes.NewReader(in)); err != nil {
			b.Fatal(err)
		}
	}
}
