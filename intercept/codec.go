package intercept

import (
	"bytes"
	"io"
)

// Content codings are package rewrite's: rewrite.Decode and rewrite.Body
// for whole bodies, rewrite.NewDecoder for streamed responses.

type nopCloser struct{ io.Reader }

func (nopCloser) Close() error { return nil }

// nopBody is a body over b: one allocation, where nopCloser around a
// *bytes.Reader takes two.
func nopBody(b []byte) io.ReadCloser {
	r := &bytesBody{}
	r.Reset(b)
	return r
}

type bytesBody struct{ bytes.Reader }

func (*bytesBody) Close() error { return nil }
