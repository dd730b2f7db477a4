package rewrite

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"io"
	"mime/multipart"
	"net/textproto"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"

	agentvault "github.com/agentvault/agentvault"
)

func compress(t testing.TB, coding string, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	switch coding {
	case "gzip":
		w = gzip.NewWriter(&buf)
	case "deflate":
		w = zlib.NewWriter(&buf)
	case "deflate-raw":
		w, _ = flate.NewWriter(&buf, flate.BestSpeed)
	case "br":
		w = brotli.NewWriter(&buf)
	case "zstd":
		w, _ = zstd.NewWriter(&buf)
	default:
		t.Fatalf("unknown coding %s", coding)
	}
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func decompress(t testing.TB, coding string, b []byte) []byte {
	t.Helper()
	var r io.Reader
	var err error
	switch coding {
	case "gzip":
		r, err = gzip.NewReader(bytes.NewReader(b))
	case "deflate":
		r, err = zlib.NewReader(bytes.NewReader(b))
	case "deflate-raw":
		r = flate.NewReader(bytes.NewReader(b))
	case "br":
		r = brotli.NewReader(bytes.NewReader(b))
	case "zstd":
		var d *zstd.Decoder
		d, err = zstd.NewReader(bytes.NewReader(b))
		r = d
	}
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestP9_CompressedBodies(t *testing.T) {
	plain := []byte(`{"number":"\u0061v_card_1_number_u7x2k","cvv":"123","note":"` + strings.Repeat("padding ", 200) + `"}`)
	want := []byte(`{"number":"` + realNumber + `","cvv":"` + realCVV + `","note":"` + strings.Repeat("padding ", 200) + `"}`)
	for _, stack := range [][]string{{"gzip"}, {"deflate"}, {"deflate-raw"}, {"br"}, {"zstd"}, {"gzip", "br"}, {"zstd", "deflate", "gzip"}} {
		name := strings.Join(stack, ",")
		t.Run(name, func(t *testing.T) {
			body := plain
			header := []string{}
			for _, c := range stack {
				body = compress(t, c, body)
				header = append(header, strings.TrimSuffix(c, "-raw"))
			}
			out, n, err := Body("application/json", strings.Join(header, ", "), body, testReplacer(), 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if n != 2 {
				t.Fatalf("%d replacements, want 2", n)
			}
			for i := len(stack) - 1; i >= 0; i-- {
				out = decompress(t, stack[i], out)
			}
			if !bytes.Equal(out, want) {
				t.Fatalf("round trip gave %d bytes, not the expected %d", len(out), len(want))
			}
		})
	}
}

func TestP9_BodyUnchangedIsIdentical(t *testing.T) {
	body := compress(t, "gzip", []byte(`{"a":"nothing here"}`))
	out, n, err := Body("application/json", "gzip", body, testReplacer(), 0)
	if err != nil || n != 0 || &out[0] != &body[0] {
		t.Fatalf("unchanged body was not returned as is (n=%d, err=%v)", n, err)
	}
}

func TestP9_UnknownContentEncodingRefused(t *testing.T) {
	for _, ce := range []string{"compress", "gzip, foo", "x-custom"} {
		_, _, err := Body("text/plain", ce, []byte("x"), testReplacer(), 0)
		if agentvault.ErrorCode(err) != agentvault.CodeSubstitution {
			t.Fatalf("%s: code = %s, want %s", ce, show(agentvault.ErrorCode(err)), show(agentvault.CodeSubstitution))
		}
	}
	// "identity" and no coding are fine.
	if _, _, err := Body("text/plain", "identity", []byte("x"), testReplacer(), 0); err != nil {
		t.Fatal(err)
	}
}

func TestP9_EmptyEncodedBody(t *testing.T) {
	for _, ce := range []string{"gzip", "br", "zstd", "deflate"} {
		if out, n, err := Body("application/json", ce, nil, testReplacer(), 0); err != nil || n != 0 || len(out) != 0 {
			t.Fatalf("%s: empty body: n=%d err=%v", ce, n, err)
		}
	}
}

func TestP9_CorruptCompressedBodyRefused(t *testing.T) {
	for _, c := range []string{"gzip", "deflate", "br", "zstd"} {
		body := compress(t, c, []byte(tokNumber+strings.Repeat("x", 100)))
		body = body[:len(body)/2]
		_, _, err := Body("text/plain", c, body, testReplacer(), 0)
		if err == nil {
			t.Fatalf("%s: truncated body accepted", c)
		}
	}
}

func TestP9_ZipBombRefused(t *testing.T) {
	zeros := make([]byte, 8<<20)
	for _, c := range []string{"gzip", "deflate", "deflate-raw", "br", "zstd"} {
		t.Run(c, func(t *testing.T) {
			bomb := compress(t, c, zeros)
			_, _, err := Body("text/plain", strings.TrimSuffix(c, "-raw"), bomb, testReplacer(), 1<<20)
			if agentvault.ErrorCode(err) != agentvault.CodeBodyTooLarge {
				t.Fatalf("%d-byte bomb: code = %s, want %s", len(bomb), show(agentvault.ErrorCode(err)), show(agentvault.CodeBodyTooLarge))
			}
		})
	}
	// Each stage of a stack is capped.
	bomb := compress(t, "gzip", compress(t, "gzip", zeros))
	_, _, err := Body("text/plain", "gzip, gzip", bomb, testReplacer(), 1<<20)
	if agentvault.ErrorCode(err) != agentvault.CodeBodyTooLarge {
		t.Fatalf("stacked bomb: code = %s", show(agentvault.ErrorCode(err)))
	}
	// A plain body over the cap.
	_, _, err = Body("text/plain", "", zeros, testReplacer(), 1<<20)
	if agentvault.ErrorCode(err) != agentvault.CodeBodyTooLarge {
		t.Fatalf("plain body: code = %s", show(agentvault.ErrorCode(err)))
	}
}

func TestP9_BodyMediaTypes(t *testing.T) {
	cases := []struct{ name, ct, in, want string }{
		{"form", "application/x-www-form-urlencoded; charset=UTF-8", "cvc=" + standInCVV, "cvc=" + realCVV},
		{"json", "application/json", `{"cvc":"123"}`, `{"cvc":"737"}`},
		{"+json", "application/vnd.api+json", `{"cvc":"123"}`, `{"cvc":"737"}`},
		{"sniffed json in text/plain", "text/plain;charset=UTF-8", `{"cvc":"\u0031\u0032\u0033"}`, `{"cvc":"737"}`},
		{"sniffed json without type", "", ` [{"n":"\u0061v_card_1_number_u7x2k"}]`, ` [{"n":"` + realNumber + `"}]`},
		{"text: short value not replaced", "text/plain", "cvc 123 and " + tokNumber, "cvc 123 and " + realNumber},
		{"xml", "application/xml", "<n>" + tokNumber + "</n><c>123</c>", "<n>" + realNumber + "</n><c>123</c>"},
		{"unknown", "application/x-thing", tokCVV, realCVV},
		{"bad content type", "%%%", tokCVV, realCVV},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := Body(tc.ct, "", []byte(tc.in), testReplacer(), 0)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tc.want {
				t.Fatalf("got %s, want %s", show(out), show(tc.want))
			}
		})
	}
}

func TestP10_ScrubBody(t *testing.T) {
	scrub := naiveReplacer{pairs: [][2]string{{realNumber, "4111119999991111"}, {realCVV, standInCVV}}}
	html := []byte("<p>Card " + realNumber + " saved</p>")
	out, n, err := ScrubBody("text/html", "br", compress(t, "br", html), scrub, 0)
	if err != nil || n != 1 {
		t.Fatalf("n=%d err=%v", n, err)
	}
	if got := decompress(t, "br", out); bytes.Contains(got, []byte(realNumber)) {
		t.Fatal("real card number survived the scrub")
	}
	out, n, err = ScrubBody("application/json", "", []byte(`{"cvv":"737","n":"\u0034111111111111111"}`), scrub, 0)
	if err != nil || n != 2 || string(out) != `{"cvv":"123","n":"4111119999991111"}` {
		t.Fatalf("json scrub: n=%d err=%v", n, err)
	}
}

// buildMultipart writes parts with mime/multipart and returns body and boundary.
func buildMultipart(t testing.TB, parts []testPart) ([]byte, string) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		for k, v := range p.header {
			h.Set(k, v)
		}
		pw, err := w.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		pw.Write([]byte(p.body))
	}
	w.Close()
	return buf.Bytes(), w.Boundary()
}

type testPart struct {
	header map[string]string
	body   string
}

func formField(name, body string) testPart {
	return testPart{map[string]string{"Content-Disposition": `form-data; name="` + name + `"`}, body}
}

func TestP9_SubstitutesMultipart(t *testing.T) {
	file := testPart{map[string]string{
		"Content-Disposition": `form-data; name="doc"; filename="card.txt"`,
		"Content-Type":        "application/octet-stream",
	}, "line one\r\ncard: " + tokNumber + "\r\n"}
	jsonPart := testPart{map[string]string{
		"Content-Disposition": `form-data; name="meta"`,
		"Content-Type":        "application/json",
	}, `{"cvv":"\u0031\u0032\u0033"}`}
	b64 := testPart{map[string]string{
		"Content-Disposition":       `form-data; name="b"`,
		"Content-Transfer-Encoding": "base64",
	}, "YXZfY2FyZF8xX2N2dl91N3gyaw=="} // base64 of the CVV token
	in, boundary := buildMultipart(t, []testPart{
		formField("cvc", standInCVV), formField("zip", "41234"), file, jsonPart, b64, formField("n", tokNumber),
	})
	out, n, err := Body("multipart/form-data; boundary="+boundary, "", in, testReplacer(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if n != 5 {
		t.Fatalf("%d replacements, want 5", n)
	}
	want := map[string]string{"cvc": realCVV, "zip": "41234", "doc": "line one\r\ncard: " + realNumber + "\r\n",
		"meta": `{"cvv":"737"}`, "b": realCVV, "n": realNumber}
	mr := multipart.NewReader(bytes.NewReader(out), boundary)
	seen := 0
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(p)
		if p.FormName() == "b" {
			got = mustBase64(t, string(got))
		}
		if string(got) != want[p.FormName()] {
			t.Fatalf("part %s = %s, want %s", show(p.FormName()), show(got), show(want[p.FormName()]))
		}
		seen++
	}
	if seen != len(want) {
		t.Fatalf("%d parts after rewrite, want %d", seen, len(want))
	}
	// Everything outside the changed bodies is byte-identical: swapping the
	// values back gives the input.
	back := naiveReplacer{pairs: [][2]string{{realNumber, tokNumber}}}
	restored, _, _ := back.ReplaceText(nil, out)
	if !bytes.Contains(restored, []byte(`Content-Disposition: form-data; name="doc"; filename="card.txt"`+"\r\nContent-Type: application/octet-stream\r\n\r\nline one")) {
		t.Fatal("part headers were not kept")
	}
}

func TestP9_MultipartKeepsFraming(t *testing.T) {
	// LF line endings, preamble, transport padding and epilogue survive.
	in := "preamble\n--XyZ  \nContent-Disposition: form-data; name=\"a\"\n\n" + tokCVV + "\n--XyZ\nContent-Disposition: form-data; name=\"b\"\n\nkeep\n--XyZ--\nepilogue"
	want := strings.Replace(in, tokCVV, realCVV, 1)
	out, n, err := Multipart("XyZ", []byte(in), testReplacer())
	if err != nil || n != 1 || string(out) != want {
		t.Fatalf("got %s n=%d err=%v", show(out), n, err)
	}
}

func TestP9_MultipartMalformedRefused(t *testing.T) {
	cases := map[string]string{
		"no boundary":       "",
		"no closing":        "--B\r\n\r\n" + tokCVV,
		"no delimiter":      tokCVV,
		"garbage delimiter": "--B\r\n\r\nx\r\n--B junk\r\n\r\ny\r\n--B--",
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			b := "B"
			if name == "no boundary" {
				b = ""
			}
			_, _, err := Multipart(b, []byte(in), testReplacer())
			if agentvault.ErrorCode(err) != agentvault.CodeMalformedRequest {
				t.Fatalf("code = %s, want %s", show(agentvault.ErrorCode(err)), show(agentvault.CodeMalformedRequest))
			}
		})
	}
	// A part with an unknown transfer encoding could hide a value.
	in := "--B\r\nContent-Transfer-Encoding: x-uuencode\r\n\r\nabc\r\n--B--"
	if _, _, err := Multipart("B", []byte(in), testReplacer()); agentvault.ErrorCode(err) != agentvault.CodeSubstitution {
		t.Fatalf("unknown CTE: code = %s", show(agentvault.ErrorCode(err)))
	}
}

func TestP9_MultipartReplacementBreakingFramingRefused(t *testing.T) {
	r := naiveReplacer{pairs: [][2]string{{"standin-long", "x\r\n--B--\r\n"}}}
	in := "--B\r\n\r\nstandin-long\r\n--B--\r\n"
	if _, _, err := Multipart("B", []byte(in), r); agentvault.ErrorCode(err) != agentvault.CodeSubstitution {
		t.Fatalf("code = %s, want %s", show(agentvault.ErrorCode(err)), show(agentvault.CodeSubstitution))
	}
}

func TestP9_MultipartPreambleAndEpilogue(t *testing.T) {
	in := "note " + tokNumber + "\r\n--B\r\n\r\nx\r\n--B--\r\nbye " + tokCVV
	want := "note " + realNumber + "\r\n--B\r\n\r\nx\r\n--B--\r\nbye " + realCVV
	out, n, err := Multipart("B", []byte(in), testReplacer())
	if err != nil || n != 2 || string(out) != want {
		t.Fatalf("got %s n=%d err=%v", show(out), n, err)
	}
	// No parts at all: the whole body is preamble, closing line, epilogue.
	out, n, err = Multipart("B", []byte(tokCVV+"\r\n--B--\r\n"+tokCVV), testReplacer())
	if err != nil || n != 2 || string(out) != realCVV+"\r\n--B--\r\n"+realCVV {
		t.Fatalf("zero parts: got %s n=%d err=%v", show(out), n, err)
	}
}

func TestP9_MultipartTokenInPartHeader(t *testing.T) {
	in := "--B\r\nContent-Disposition: form-data; name=\"f\"; filename=\"" + tokNumber + ".txt\"\r\n\r\n" + tokCVV + "\r\n--B--\r\n"
	want := "--B\r\nContent-Disposition: form-data; name=\"f\"; filename=\"" + realNumber + ".txt\"\r\n\r\n" + realCVV + "\r\n--B--\r\n"
	out, n, err := Multipart("B", []byte(in), testReplacer())
	if err != nil || n != 2 || string(out) != want {
		t.Fatalf("got %s n=%d err=%v", show(out), n, err)
	}
}
