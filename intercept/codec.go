package intercept

import (
	"bytes"
	"io"
)

// Content codings are package rewrite's: rewrite.Decode and rewrite.Body
// for whole bodies, rewrite.NewDecoder for streamed responses.

type nopCloser struct{ io.Reader }

func (nopCloser) Close() error { return nil }

func nopBody(b []byte) io.ReadCloser { return nopCloser{bytes.NewReader(b)} }
