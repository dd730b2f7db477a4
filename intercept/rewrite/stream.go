package rewrite

import (
	"bufio"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"io"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"
)

// NewDecoder undoes a body's Content-Encoding as a stream, with the same
// codings Body accepts (stacked ones undone last to first, deflate in its
// zlib or raw form). It is for bodies too large to hold whole, such as a
// streamed response on its way to be scrubbed: it does not cap the decoded
// size, the caller reads as much as it forwards. window bounds the memory a
// zstd frame may ask for. Closing the decoder does not close r.
func NewDecoder(contentEncoding string, r io.Reader, window int64) (io.ReadCloser, error) {
	codings, err := parseCodings(contentEncoding)
	if err != nil {
		return nil, err
	}
	if window <= 0 {
		window = DefaultLimit
	}
	d := &streamDecoder{Reader: r}
	for i := len(codings) - 1; i >= 0; i-- {
		if d.Reader, err = d.push(codings[i], d.Reader, window); err != nil {
			_ = d.Close()
			return nil, err
		}
	}
	return d, nil
}

type streamDecoder struct {
	io.Reader
	closers []func()
}

func (d *streamDecoder) push(c coding, r io.Reader, window int64) (io.Reader, error) {
	switch c {
	case codingGzip:
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, corrupt()
		}
		d.closers = append(d.closers, func() { _ = zr.Close() })
		return errorsAsCorrupt{zr}, nil
	case codingDeflateZlib:
		// RFC 9110 says zlib; some servers send a raw deflate stream.
		br := bufio.NewReader(r)
		if head, _ := br.Peek(2); isZlibHeader(head) {
			zr, err := zlib.NewReader(br)
			if err != nil {
				return nil, corrupt()
			}
			d.closers = append(d.closers, func() { _ = zr.Close() })
			return errorsAsCorrupt{zr}, nil
		}
		fr := flate.NewReader(br)
		d.closers = append(d.closers, func() { _ = fr.Close() })
		return errorsAsCorrupt{fr}, nil
	case codingBrotli:
		return errorsAsCorrupt{brotli.NewReader(r)}, nil
	default: // codingZstd
		zr, err := zstd.NewReader(r,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxMemory(uint64(window)),
			zstd.WithDecoderMaxWindow(uint64(min(window, 1<<29))))
		if err != nil {
			return nil, corrupt()
		}
		d.closers = append(d.closers, zr.Close)
		return errorsAsCorrupt{zr}, nil
	}
}

func (d *streamDecoder) Close() error {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
	d.closers = nil
	return nil
}

// errorsAsCorrupt reports any decoding failure with the package's stable
// code; the decoder's own message may quote input bytes.
type errorsAsCorrupt struct{ r io.Reader }

func (e errorsAsCorrupt) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		return n, corrupt()
	}
	return n, err
}
