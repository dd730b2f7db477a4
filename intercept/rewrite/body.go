package rewrite

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"encoding/json"
	"errors"
	"io"
	"math/bits"
	"mime"
	"strings"
	"unicode/utf8"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"

	agentvault "github.com/agentvault/agentvault"
)

// Body rewrites a message body. It undoes the Content-Encoding (gzip,
// deflate in its zlib and raw forms, br, zstd, stacked in the order listed),
// never inflating past limit bytes at any stage (zip bombs are refused with
// CodeBodyTooLarge), rewrites the decoded body according to its media type,
// and encodes the result again with the same codings. When nothing matched,
// the original body is returned as it was, not recompressed.
//
// Media types: application/x-www-form-urlencoded (Form), application/json and
// */*+json (JSON), multipart/* (Multipart); anything else (text/*, XML,
// unknown) is free text, unless it parses as JSON (fetch sends JSON as
// text/plain by default), in which case it is walked as JSON. A
// Content-Encoding this package cannot undo is refused with CodeSubstitution,
// since it could hide a value.
//
// limit <= 0 means DefaultLimit.
func Body(contentType, contentEncoding string, body []byte, r Replacer, limit int64) ([]byte, int, error) {
	return bodyRewrite(contentType, contentEncoding, body, r, limit, false)
}

// BodyInPlace is Body for a caller that hands body over: the rewritten body
// may be body itself, written over (a JSON body whose every replacement
// keeps its length), and body must not be read as it was afterwards. No
// byte of body is written before the walk has visited every value, so a
// Replacer reading body while it runs (through a FieldVisitor's walk of
// its own) sees it as received, and an error leaves it untouched.
func BodyInPlace(contentType, contentEncoding string, body []byte, r Replacer, limit int64) ([]byte, int, error) {
	return bodyRewrite(contentType, contentEncoding, body, r, limit, true)
}

func bodyRewrite(contentType, contentEncoding string, body []byte, r Replacer, limit int64, inPlace bool) ([]byte, int, error) {
	r, sr := withScratch(r)
	defer sr.release()
	plain, forms, err := decodeAll(contentEncoding, body, limit)
	if err != nil {
		return nil, 0, err
	}
	rep, n, err := byMediaType(contentType, plain, r, inPlace)
	if err != nil {
		return nil, 0, err
	}
	if n == 0 {
		return body, 0, nil
	}
	for _, c := range forms {
		if rep, err = encode(c, rep); err != nil {
			return nil, 0, err
		}
	}
	return rep, n, nil
}

// Decode undoes a body's Content-Encoding with the same rules and caps as
// Body, for callers that need to look at the plain bytes (the proxy's scan
// for tokens before it asks the vault for anything).
func Decode(contentEncoding string, body []byte, limit int64) ([]byte, error) {
	plain, _, err := decodeAll(contentEncoding, body, limit)
	return plain, err
}

// decodeAll returns the plain body and the codings to apply again, in order.
func decodeAll(contentEncoding string, body []byte, limit int64) ([]byte, []coding, error) {
	if len(body) == 0 {
		// Nothing to decode: a HEAD or 204 answer keeps its coding header.
		return body, nil, nil
	}
	limit = limitOrDefault(limit)
	if int64(len(body)) > limit {
		return nil, nil, tooLarge()
	}
	codings, err := parseCodings(contentEncoding)
	if err != nil {
		return nil, nil, err
	}
	plain := body
	for i := len(codings) - 1; i >= 0; i-- {
		plain, codings[i], err = decode(codings[i], plain, limit)
		if err != nil {
			return nil, nil, err
		}
	}
	return plain, codings, nil
}

// ScrubBody is Body for responses, with the scrubbing replacer (real values to
// stand-ins). It is the same code path on purpose: a format Body can rewrite
// is a format ScrubBody can scrub.
func ScrubBody(contentType, contentEncoding string, body []byte, scrub Replacer, limit int64) ([]byte, int, error) {
	return Body(contentType, contentEncoding, body, scrub, limit)
}

func tooLarge() error {
	return agentvault.Errorf(agentvault.CodeBodyTooLarge, "body exceeds the size limit once decoded")
}

// Body's ways of walking a decoded body (mediaKind).
const (
	walkText = iota
	walkForm
	walkJSON
	walkMultipart
)

// mediaKind is how Body walks b: the one rule for it (MayWalk is its cheap
// over-approximation). boundary is a multipart body's.
func mediaKind(contentType string, b []byte) (kind int, boundary string) {
	mt, params := "", map[string]string(nil)
	if contentType != "" {
		var err error
		mt, params, err = mime.ParseMediaType(contentType)
		if err != nil {
			mt = ""
		}
	}
	switch {
	case mt == "application/x-www-form-urlencoded":
		return walkForm, ""
	case isJSONType(mt):
		return walkJSON, ""
	case strings.HasPrefix(mt, "multipart/"):
		return walkMultipart, params["boundary"]
	case looksLikeJSON(b):
		return walkJSON, ""
	}
	return walkText, ""
}

// byMediaType rewrites b by its media type; inPlace as BodyInPlace.
func byMediaType(contentType string, b []byte, r Replacer, inPlace bool) ([]byte, int, error) {
	if len(b) == 0 {
		return b, 0, nil
	}
	switch kind, boundary := mediaKind(contentType, b); kind {
	case walkForm:
		return Form(b, r)
	case walkJSON:
		return jsonRewrite(b, r, inPlace)
	case walkMultipart:
		return Multipart(boundary, b, r)
	}
	if v := visitor(r); v != nil {
		v.emit(Field{Source: SourceText, Group: v.newGroup(), Value: b})
	}
	return text(r, b)
}

// MayWalk reports, without parsing, whether Body may walk b as a form, JSON
// or multipart body rather than as plain text. It never says false where
// Body walks one (it over-approximates mediaKind: no media type parsing, no
// json.Valid), so a caller that only needs the structured pass for such
// bodies (the proxy's response scrub) may skip it when MayWalk says false.
func MayWalk(contentType string, b []byte) bool {
	// Lower-cased as ASCII without a copy; anything else as Unicode.
	ct, fold := strings.TrimSpace(contentType), true
	for i := 0; i < len(ct); i++ {
		if ct[i] >= utf8.RuneSelf {
			ct, fold = strings.ToLower(ct), false
			break
		}
	}
	is := func(s, p string) bool { return s == p || fold && strings.EqualFold(s, p) }
	for _, p := range []string{"application/x-www-form-urlencoded", "multipart/", "application/json", "text/json", "application/x-ndjson"} {
		if len(ct) >= len(p) && is(ct[:len(p)], p) {
			return true
		}
	}
	mt, _, _ := strings.Cut(ct, ";")
	if mt = strings.TrimSpace(mt); len(mt) >= 5 && is(mt[len(mt)-5:], "+json") {
		return true
	}
	t := bytes.TrimLeft(b, " \t\r\n\ufeff")
	return len(t) > 0 && (t[0] == '{' || t[0] == '[' || t[0] == '"')
}

// Literal reports whether a body of this media type and coding is read by
// Body and EncodedViews as its bytes stand, base64 apart: no content coding,
// not multipart (a part has headers and a transfer encoding of its own),
// and none of the bytes that start an escape in a form ('%', '+'), in JSON
// ('\\') or in HTML ('&'). Then every value Body offers a Replacer is a run
// of b, Body cannot fail on b unless the Replacer does, and EncodedViews
// returns only b's base64 views; a caller that finds nothing in b (and no
// Base64Fragments of what it looks for) may skip both. One pass of
// IndexByte a byte: the cost of a large body that carries nothing.
func Literal(contentType, contentEncoding string, b []byte) bool {
	if cs, err := parseCodings(contentEncoding); err != nil || len(cs) > 0 {
		return false
	}
	if strings.Contains(strings.ToLower(contentType), "multipart") {
		return false
	}
	for _, c := range []byte(literalBreakers) {
		if bytes.IndexByte(b, c) >= 0 {
			return false
		}
	}
	return true
}

// literalBreakers are the bytes that start an escape some decoding of
// Body's or textViews' undoes.
const literalBreakers = "%+\\&"

func isJSONType(mt string) bool {
	return mt == "application/json" || strings.HasSuffix(mt, "+json") ||
		mt == "text/json" || mt == "application/x-ndjson"
}

func looksLikeJSON(b []byte) bool {
	t := bytes.TrimLeft(b, " \t\r\n\ufeff")
	return len(t) > 0 && (t[0] == '{' || t[0] == '[' || t[0] == '"') && json.Valid(bytes.TrimPrefix(bytes.TrimSpace(b), []byte("\ufeff")))
}

type coding int

const (
	codingGzip coding = iota
	codingDeflateZlib
	codingDeflateRaw
	codingBrotli
	codingZstd
)

func parseCodings(h string) ([]coding, error) {
	var out []coding
	for _, f := range strings.Split(h, ",") {
		switch strings.ToLower(strings.TrimSpace(f)) {
		case "", "identity":
		case "gzip", "x-gzip":
			out = append(out, codingGzip)
		case "deflate":
			out = append(out, codingDeflateZlib)
		case "br":
			out = append(out, codingBrotli)
		case "zstd":
			out = append(out, codingZstd)
		default:
			return nil, agentvault.Errorf(agentvault.CodeSubstitution, "unsupported Content-Encoding")
		}
	}
	return out, nil
}

// decode undoes one coding, reading at most limit decoded bytes. For deflate
// it reports which form (zlib-wrapped per RFC 9110, or the raw stream some
// servers send) it found, so encode can answer in kind.
func decode(c coding, b []byte, limit int64) ([]byte, coding, error) {
	var rd io.Reader
	switch c {
	case codingGzip:
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, c, corrupt()
		}
		rd = zr
	case codingDeflateZlib:
		if isZlibHeader(b) {
			zr, err := zlib.NewReader(bytes.NewReader(b))
			if err == nil {
				out, err := readCapped(zr, limit)
				if err == nil || agentvault.ErrorCode(err) == agentvault.CodeBodyTooLarge {
					return out, c, err
				}
			}
			// Two bytes of a raw stream can pass the zlib header check
			// by chance; try the raw form before giving up.
		}
		c = codingDeflateRaw
		rd = flate.NewReader(bytes.NewReader(b))
	case codingBrotli:
		rd = brotli.NewReader(bytes.NewReader(b))
	case codingZstd:
		zr, err := zstd.NewReader(bytes.NewReader(b),
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxMemory(uint64(limit)+1),
			zstd.WithDecoderMaxWindow(uint64(min(limit+1, 1<<29))))
		if err != nil {
			return nil, c, corrupt()
		}
		defer zr.Close()
		rd = zr
	}
	out, err := readCapped(rd, limit)
	return out, c, err
}

func readCapped(rd io.Reader, limit int64) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(rd, limit+1))
	if int64(len(out)) > limit {
		return nil, tooLarge()
	}
	if err != nil {
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
			return nil, tooLarge()
		}
		return nil, corrupt()
	}
	return out, nil
}

func corrupt() error {
	return agentvault.Errorf(agentvault.CodeMalformedRequest, "body does not match its Content-Encoding")
}

// isZlibHeader checks the RFC 1950 header: CM 8 and a check value that makes
// the first two bytes a multiple of 31.
func isZlibHeader(b []byte) bool {
	return len(b) >= 2 && b[0]&0x0f == 8 && (uint16(b[0])<<8|uint16(b[1]))%31 == 0
}

func encode(c coding, b []byte) ([]byte, error) {
	var buf bytes.Buffer
	var w io.WriteCloser
	switch c {
	case codingGzip:
		w = gzip.NewWriter(&buf)
	case codingDeflateZlib:
		w = zlib.NewWriter(&buf)
	case codingDeflateRaw:
		fw, err := flate.NewWriter(&buf, flate.DefaultCompression)
		if err != nil {
			return nil, agentvault.Wrap(agentvault.CodeInternal, err, "deflate writer")
		}
		w = fw
	case codingBrotli:
		// Quality 4 rather than the default: recompressing on the request
		// path should cost about what gzip does. A window just large
		// enough for the body (the default is 4 MiB) saves the ring
		// buffer allocation.
		w = brotli.NewWriterOptions(&buf, brotli.WriterOptions{
			Quality: 4,
			LGWin:   min(max(bits.Len(uint(len(b))), 16), 24),
		})
	case codingZstd:
		zw, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, agentvault.Wrap(agentvault.CodeInternal, err, "zstd writer")
		}
		w = zw
	}
	if _, err := w.Write(b); err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "re-encoding body")
	}
	if err := w.Close(); err != nil {
		return nil, agentvault.Wrap(agentvault.CodeInternal, err, "re-encoding body")
	}
	return buf.Bytes(), nil
}
