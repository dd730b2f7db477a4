package intercept

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"io"
	"net/http"
	"strings"

	"github.com/agentvault/agentvault"
	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

type nopCloser struct{ io.Reader }

func (nopCloser) Close() error { return nil }

func nopBody(b []byte) io.ReadCloser { return nopCloser{bytes.NewReader(b)} }

// contentEncoding returns the single coding of a message, "" for identity.
// Stacked codings are refused: they are a way to hide a value.
func contentEncoding(h http.Header) (string, error) {
	vals := h.Values("Content-Encoding")
	var cs []string
	for _, v := range vals {
		for _, c := range strings.Split(v, ",") {
			c = strings.ToLower(strings.TrimSpace(c))
			if c != "" && c != "identity" {
				cs = append(cs, c)
			}
		}
	}
	switch len(cs) {
	case 0:
		return "", nil
	case 1:
		switch cs[0] {
		case "gzip", "x-gzip", "deflate", "br", "zstd":
			return cs[0], nil
		}
	}
	return "", agentvault.Errorf(agentvault.CodeSubstitution, "unsupported content encoding")
}

// decoder undoes one coding as a stream.
func decoder(coding string, r io.Reader) (io.ReadCloser, error) {
	bad := func(err error) (io.ReadCloser, error) {
		return nil, agentvault.Wrap(agentvault.CodeSubstitution, err, "body does not decode")
	}
	switch coding {
	case "":
		return io.NopCloser(r), nil
	case "gzip", "x-gzip":
		z, err := gzip.NewReader(r)
		if err != nil {
			return bad(err)
		}
		return z, nil
	case "deflate":
		z, err := zlib.NewReader(r)
		if err != nil {
			return bad(err)
		}
		return z, nil
	case "br":
		return io.NopCloser(brotli.NewReader(r)), nil
	case "zstd":
		z, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(256<<20))
		if err != nil {
			return bad(err)
		}
		return z.IOReadCloser(), nil
	}
	return bad(nil)
}

// decodeAll decodes b, refusing output beyond limit (zip bombs).
func decodeAll(coding string, b []byte, limit int64) ([]byte, error) {
	if coding == "" {
		return b, nil
	}
	d, err := decoder(coding, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	out, err := io.ReadAll(io.LimitReader(d, limit+1))
	if err != nil {
		return nil, agentvault.Wrap(agentvault.CodeSubstitution, err, "body does not decode")
	}
	if int64(len(out)) > limit {
		return nil, agentvault.Errorf(agentvault.CodeBodyTooLarge, "decoded body is over the limit")
	}
	return out, nil
}

// encodeAll applies coding to b.
func encodeAll(coding string, b []byte) ([]byte, error) {
	var buf bytes.Buffer
	var w io.WriteCloser
	switch coding {
	case "":
		return b, nil
	case "gzip", "x-gzip":
		w = gzip.NewWriter(&buf)
	case "deflate":
		w = zlib.NewWriter(&buf)
	case "br":
		w = brotli.NewWriter(&buf)
	case "zstd":
		z, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, agentvault.Wrap(agentvault.CodeSubstitution, err, "encode body")
		}
		w = z
	default:
		return nil, agentvault.Errorf(agentvault.CodeSubstitution, "unsupported content encoding")
	}
	if _, err := w.Write(b); err != nil {
		return nil, agentvault.Wrap(agentvault.CodeSubstitution, err, "encode body")
	}
	if err := w.Close(); err != nil {
		return nil, agentvault.Wrap(agentvault.CodeSubstitution, err, "encode body")
	}
	return buf.Bytes(), nil
}
