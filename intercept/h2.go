package intercept

import (
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/agentvault/agentvault"
)

// h2CopyBufs are serveH2's copy buffers: each h2 stream runs on a
// goroutine of its own, so a buffer made per stream was 32 KiB of garbage
// per request (most of the GC work of small h2 requests).
var h2CopyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// serveH2 runs one h2 stream through the same path as HTTP/1.1.
func (s *Server) serveH2(t *tunnel, w http.ResponseWriter, r *http.Request) {
	resp := s.handle(t, r, "HTTP/2.0")
	defer func() { resp.Body.Close() }()
	bp := h2CopyBufs.Get().(*[]byte)
	defer h2CopyBufs.Put(bp)
	buf := *bp
	// Through an upstream proxy, the answer's first bytes are read before
	// its headers go out (serveH1's buffer does the same): when the egress
	// drops it before any arrived, the browser gets the refusal, 502
	// egress_lost, not a stream reset with nothing to read.
	var n int
	var err error
	primed := false
	if s.dialer.Upstream != nil {
		n, err = resp.Body.Read(buf)
		primed = true
		if n == 0 && agentvault.ErrorCode(err) == agentvault.CodeEgressLost {
			resp.Body.Close()
			resp, primed = errorResponse(r, err), false
		}
	}
	h := w.Header()
	for k, vs := range resp.Header {
		if isHopByHop(k) {
			continue
		}
		h[k] = vs
	}
	if resp.ContentLength >= 0 {
		h.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	w.WriteHeader(resp.StatusCode)
	var sent int64
	for {
		if !primed {
			n, err = resp.Body.Read(buf)
		}
		primed = false
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			sent += int64(n)
			// A body whose declared length has all been written is
			// flushed by the handler's return, in the frame that ends
			// the stream: no flush of its own (one write less).
			if resp.ContentLength < 0 || sent < resp.ContentLength {
				if f, ok := w.(http.Flusher); ok {
					f.Flush()
				}
			}
		}
		if err == io.EOF {
			// The site's trailers, scrubbed at the body's end (scrubResponse),
			// go on as h2 trailers.
			for k, vs := range resp.Trailer {
				if !isHopByHop(k) && len(vs) > 0 {
					h[http.TrailerPrefix+k] = vs
				}
			}
		}
		if err != nil {
			if err != io.EOF {
				// The answer broke mid-body (the site or the upstream
				// proxy dropped it): reset the stream, so the browser sees
				// a failed load, not a short body ending as if whole.
				panic(http.ErrAbortHandler)
			}
			return
		}
	}
}
