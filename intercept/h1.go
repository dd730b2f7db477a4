package intercept

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentvault/agentvault"
)

const maxHeaderBytes = 64 << 10

// serveH1 reads HTTP/1.1 requests from the decrypted tunnel one at a time.
// The raw header block is checked before Go parses it (P8), and any refusal
// closes the connection.
func (s *Server) serveH1(t *tunnel, conn net.Conn) {
	// The reader (68 KiB, a whole header block must fit for the raw check)
	// and the writer (32 KiB) are taken from pools for one request and
	// given back while the tunnel idles between requests: an idle
	// keep-alive tunnel holds neither (P14: memory per idle tunnel). A
	// reader still holding pipelined bytes is kept for the next request.
	var br *bufio.Reader
	first := &firstByte{r: conn}
	defer func() { putH1Reader(br) }()
	for !s.closing.Load() {
		_ = conn.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
		if br == nil {
			// Wait for the next request's first byte without a buffer.
			if err := first.wait(); err != nil {
				return
			}
			br = h1Readers.Get().(*bufio.Reader)
			br.Reset(first)
		} else if _, err := br.Peek(1); err != nil {
			return
		}
		t.setActive(true)
		_ = conn.SetReadDeadline(time.Now().Add(s.cfg.ReadHeaderTimeout))
		if err := checkRawHeader(br); err != nil {
			s.refuse(t.sess, err, "", t.dest.Host)
			_ = errorResponse(nil, err).Write(conn)
			return
		}
		req, err := http.ReadRequest(br)
		if err != nil {
			err := agentvault.Wrap(agentvault.CodeMalformedRequest, err, "malformed request")
			s.refuse(t.sess, err, "", t.dest.Host)
			_ = errorResponse(nil, err).Write(conn)
			return
		}
		if req.Body != http.NoBody {
			// The body is read with the idle allowance, not the header's.
			_ = conn.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
		}
		if strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
			req.Header.Del("Expect")
			_, _ = io.WriteString(conn, "HTTP/1.1 100 Continue\r\n\r\n")
		}
		resp := s.handle(t, req, "HTTP/1.1")
		if wb, ok := resp.Body.(*wsBody); ok {
			// 101: write the handshake answer, then relay frames.
			bw := getH1Writer(conn)
			resp.Header.Set("Connection", "Upgrade")
			resp.Header.Set("Upgrade", "websocket")
			_, _ = io.WriteString(bw, "HTTP/1.1 101 Switching Protocols\r\n")
			_ = resp.Header.Write(bw)
			_, _ = io.WriteString(bw, "\r\n")
			err := bw.Flush()
			putH1Writer(bw)
			if err != nil {
				wb.Close()
				return
			}
			_ = conn.SetReadDeadline(time.Time{})
			sc := s.scrubberFor(wb.sb.ctx, t.sess, t.dest.Host) // as forward gets it
			s.relayWebSocket(t, wb.sb, sc, br, conn, wb.ReadWriteCloser)
			wb.cancel()
			return
		}
		keep := !resp.Close && !req.Close
		resp.ProtoMajor, resp.ProtoMinor, resp.Proto = 1, 1, "HTTP/1.1"
		if resp.ContentLength < 0 && req.Method != http.MethodHead && resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusNotModified {
			resp.TransferEncoding = []string{"chunked"} // stream with a length known only at the end
		}
		var out io.Writer = conn
		var sent *countWriter
		if s.dialer.Upstream != nil {
			sent = &countWriter{w: conn}
			out = sent
		}
		bw := getH1Writer(out)
		werr := resp.Write(bw)
		if werr == nil {
			werr = bw.Flush()
		}
		putH1Writer(bw)
		if sent != nil && sent.n == 0 && agentvault.ErrorCode(werr) == agentvault.CodeEgressLost {
			// The egress dropped the answer while all of it was still in
			// our buffer: the browser gets the refusal, not an empty reply
			// (egressBody logged and counted it).
			_ = errorResponse(req, werr).Write(conn)
		}
		resp.Body.Close()
		// Drain what the client sent that we did not read, within reason.
		if req.Body != http.NoBody {
			_, _ = io.CopyN(io.Discard, req.Body, 256<<10)
		}
		req.Body.Close()
		t.setActive(false)
		if werr != nil || !keep {
			return
		}
		if br.Buffered() == 0 {
			putH1Reader(br)
			br = nil
		}
	}
}

var (
	h1Readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, maxHeaderBytes+4096) }}
	h1Writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 32<<10) }}
)

func getH1Writer(w io.Writer) *bufio.Writer {
	bw := h1Writers.Get().(*bufio.Writer)
	bw.Reset(w)
	return bw
}

// putH1Writer drops what bw did not write (after a failed flush) and
// pools it.
func putH1Writer(bw *bufio.Writer) {
	bw.Reset(nil)
	h1Writers.Put(bw)
}

// putH1Reader drops br's buffered bytes and pools it (nil: nothing).
func putH1Reader(br *bufio.Reader) {
	if br != nil {
		br.Reset(nil)
		h1Readers.Put(br)
	}
}

// firstByte reads a connection through one byte read ahead: wait blocks
// for the next byte without a buffer, and Read hands it out first.
type firstByte struct {
	r   io.Reader
	b   [1]byte
	has bool
}

func (f *firstByte) wait() error {
	for !f.has {
		n, err := f.r.Read(f.b[:])
		if n == 1 {
			f.has = true
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (f *firstByte) Read(p []byte) (int, error) {
	if f.has && len(p) > 0 {
		p[0], f.has = f.b[0], false
		return 1, nil
	}
	return f.r.Read(p)
}

// checkRawHeader looks at the raw header block before Go's parser
// normalises it away: obs-fold, bare LF, duplicate Content-Length, both
// Content-Length and Transfer-Encoding, a Transfer-Encoding other than
// chunked, and Connection naming an end-to-end header are refused (P8,
// RFC 9112 sections 5.2, 6.1 and 6.3; RFC 9110 section 7.6.1).
func checkRawHeader(br *bufio.Reader) error {
	bad := func(why string) error { return agentvault.Errorf(agentvault.CodeMalformedRequest, "%s", why) }
	var block []byte
	for n := 1; ; {
		b, err := br.Peek(n)
		if buffered := min(br.Buffered(), maxHeaderBytes); buffered > len(b) {
			b, _ = br.Peek(buffered) // scan all that has arrived
		}
		if i := indexHeaderEnd(b); i >= 0 {
			block = b[:i]
			break
		}
		if errors.Is(err, bufio.ErrBufferFull) || n >= maxHeaderBytes {
			return bad("request header too large")
		}
		if err != nil {
			return agentvault.Wrap(agentvault.CodeTimeout, err, "request header not received")
		}
		n = min(len(b)+1, maxHeaderBytes)
	}
	cl, te := 0, 0
	rest := block[:len(block)-1]
	for i := 0; ; i++ {
		line, tail, more := bytes.Cut(rest, []byte("\n"))
		rest = tail
		if !bytes.HasSuffix(line, []byte("\r")) {
			return bad("bare LF in request header")
		}
		line = line[:len(line)-1]
		if i == 0 || len(line) == 0 {
			if !more {
				break
			}
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			return bad("obsolete header line folding")
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok || len(name) == 0 || bytes.ContainsAny(name, " \t") {
			return bad("malformed header line")
		}
		value = bytes.TrimSpace(value)
		switch {
		case lowerIs(name, "content-length"):
			cl++
		case lowerIs(name, "transfer-encoding"):
			te++
			if !bytes.EqualFold(value, []byte("chunked")) {
				return bad("unsupported transfer encoding")
			}
		case lowerIs(name, "connection"):
			for _, tok := range strings.Split(string(value), ",") {
				switch strings.ToLower(strings.TrimSpace(tok)) {
				case "", "keep-alive", "close", "upgrade":
				default:
					return bad("Connection header names an end-to-end header")
				}
			}
		}
		if !more {
			break
		}
	}
	if cl > 1 || te > 1 || (cl > 0 && te > 0) {
		return bad("ambiguous message length")
	}
	return nil
}

// lowerIs reports whether strings.ToLower(string(name)) == lower, without
// the copy for an ASCII name. A name outside ASCII takes the Unicode path:
// "İ" lower-cases to "i" there, and the header check reads names as that.
func lowerIs(name []byte, lower string) bool {
	for _, c := range name {
		if c >= utf8.RuneSelf {
			return strings.ToLower(string(name)) == lower
		}
	}
	if len(name) != len(lower) {
		return false
	}
	for i, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// indexHeaderEnd returns the length of the header block including its
// final CRLF CRLF (or LF LF), or -1.
func indexHeaderEnd(b []byte) int {
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '\n' {
			if b[i+1] == '\n' {
				return i + 2
			}
			if i+2 < len(b) && b[i+1] == '\r' && b[i+2] == '\n' {
				return i + 3
			}
		}
	}
	return -1
}
