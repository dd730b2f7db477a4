package rewrite

import (
	"bytes"
	"html"
)

// EncodedViews returns b decoded in the ways a value can hide in text that
// Body treats as opaque: percent-decoded (with '+' as a space),
// JSON-unescaped (\uXXXX and friends), HTML-unescaped, and percent- then
// JSON-decoded (JSON inside a form value). Only views that differ from b are
// returned.
//
// The proxy runs its token matcher over these views of a rewritten body: a
// token still found there sat in an encoding Body could not rewrite in place
// (an XML entity, JSON inside a text/plain field, ...), and the request must
// be refused rather than forward a mock token. Use a matcher of the long
// tokens only: decoding adds spaces and quotes, so a short whole-field value
// could seem to stand alone where it did not.
func EncodedViews(b []byte) [][]byte {
	var views [][]byte
	add := func(v []byte) []byte {
		if !bytes.Equal(v, b) {
			views = append(views, v)
		}
		return v
	}
	var p []byte
	if bytes.IndexByte(b, '%') >= 0 || bytes.IndexByte(b, '+') >= 0 {
		p = add(percentDecode(b, true))
	}
	if bytes.IndexByte(b, '\\') >= 0 {
		add(jsonUnescape(b))
	}
	if bytes.IndexByte(b, '&') >= 0 {
		add([]byte(html.UnescapeString(string(b))))
	}
	if p != nil && bytes.IndexByte(p, '\\') >= 0 {
		add(jsonUnescape(p))
	}
	return views
}
