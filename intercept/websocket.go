package intercept

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/intercept/rewrite"
	"github.com/agentvault/agentvault/tokens"
	"github.com/agentvault/agentvault/vault"
)

// isWebSocket reports a WebSocket handshake (RFC 6455 section 4.1).
func isWebSocket(req *http.Request) bool {
	return req.Method == http.MethodGet &&
		headerHasToken(req.Header, "Connection", "upgrade") &&
		strings.EqualFold(strings.TrimSpace(req.Header.Get("Upgrade")), "websocket")
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// relayWebSocket runs an upgraded connection: client text messages are
// substituted (a message with an unauthorized token ends the connection);
// server messages, text and binary, are scrubbed by sc (P10) as one stream
// (see wsScrub), and pass untouched when sc is nil (nothing to scrub).
func (s *Server) relayWebSocket(t *tunnel, sb *substitution, sc *scrubber, clientR *bufio.Reader, client net.Conn, upstream io.ReadWriteCloser) {
	defer sb.wipe()
	rm := s.matchers(t.sess)
	up := rewrite.NewFrameRewriter(sb.replacer(rm), true, int(s.cfg.MaxBodyBytes))
	var scrub rewrite.Replacer = passThrough{}
	var stream *wsScrub
	if sc != nil {
		scrub = sc.replacer(s.metrics.scrub)
		stream = newWSScrub(sc, s.metrics.scrub, s.cfg.MaxBodyBytes)
		defer stream.wipe()
	}
	down := rewrite.NewFrameRewriter(scrub, false, int(s.cfg.MaxBodyBytes))
	if stream != nil {
		down.Stream = stream
	}
	var once sync.Once
	closeBoth := func() { once.Do(func() { _ = upstream.Close(); _ = client.Close() }) }
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.wsEnded(t, down.Run(client, upstream), false)
		closeBoth()
	}()
	s.wsEnded(t, up.Run(upstream, clientR), true)
	closeBoth()
	<-done
	s.log.LogAttrs(context.Background(), slog.LevelDebug, "websocket relay ended",
		slog.String("session", t.sess.ID), slog.String("host", t.dest.Host))
}

// wsEnded logs how one direction of a relay ended. A coded error is the
// proxy's decision: on the client's side it refused a message (a token the
// session may not send, a malformed frame) and counts in the run report like
// any refused request; on the site's side it cut a stream it could not
// scrub safely, which is logged but refuses no fill, so it is not counted
// (seed 004: deniedCount counts the fills the proxy refused). The
// connection ending is no error at all: a peer that went away, or this side
// closed by closeBoth once the other direction was over, which is how every
// WebSocket ends. Anything else is the proxy's own failure, logged as one
// and not counted either.
func (s *Server) wsEnded(t *tunnel, err error, fromClient bool) {
	if err == nil || connEnded(err) {
		return
	}
	var coded *agentvault.Error
	if !errors.As(err, &coded) {
		s.log.LogAttrs(context.Background(), slog.LevelError, "websocket relay failed",
			slog.String("code", string(agentvault.CodeInternal)),
			slog.String("session", t.sess.ID),
			slog.String("host", t.dest.Host))
		return
	}
	if fromClient {
		s.refuse(t.sess, err, "WEBSOCKET", t.dest.Host)
		return
	}
	s.metrics.refusal(err)
	s.log.LogAttrs(context.Background(), slog.LevelWarn, "websocket closed",
		slog.String("code", string(coded.Code)),
		slog.String("reason", agentvault.ErrorMessage(err)),
		slog.String("session", t.sess.ID),
		slog.String("host", t.dest.Host))
}

// connEnded reports an error that only says a connection is over.
func connEnded(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// wsScrub scrubs the server's data messages of one WebSocket connection as
// one stream, so a value split across messages (or fragments, which the
// FrameRewriter joins first) is still found, while every message keeps its
// boundaries and its type. A text message is first scrubbed whole (walked as
// JSON when it is JSON, as the request side does); then the bytes of all
// messages are scanned as one text.
//
// The hold-back rule. At the end of the bytes received so far, a value may
// have begun that the next message would complete. A message is held back
// (not sent, together with every later one, in order) only while it holds
// bytes that could begin a value and are not the same bytes its stand-in
// begins with; bytes that could begin a value but equal the start of its
// stand-in (a card's first six digits) are sent, since they show nothing
// the stand-in would not, and are kept as context for the next scan. A match
// that more input could still lengthen is held the same way. When the next
// message arrives, or a close frame, or the connection ends, the held bytes
// are decided: a value found across messages is replaced by its stand-in,
// each message receiving the part of the stand-in at the same offsets (the
// last part takes what is left when the lengths differ), and the messages go
// out with their boundaries. The end of the bytes so far counts as a word
// boundary for a short value (a CVV at a message's end is scrubbed even if
// the next message goes on with a digit: a spurious replacement only masks
// three digits).
//
// Bounds: a held message overlaps the last MaxLen bytes of the stream, so at
// most one long message and MaxLen short ones are held, plus empty messages,
// which are capped at maxHeldMessages (more ends the connection). The delay
// is until the server's next message: there is no timer, because a timer
// would let a site beat the rule by waiting. A site that sends a message
// ending in the first bytes of a value and then waits for the client stalls
// until it sends again or closes.
type wsScrub struct {
	sc    *scrubber
	hit   func(vault.Kind)
	limit int64

	buf   []byte        // context, then the held messages' bytes
	msgs  []wsHeld      // held messages, in order, as ranges of buf
	spans []tokens.Span // decided matches not yet sent in full (offsets in buf)
	done  int           // buf[:done] is decided
	found []tokens.Span // scratch
}

type wsHeld struct {
	binary     bool
	start, end int
}

// maxHeldMessages caps the messages held back at once.
const maxHeldMessages = 1024

func newWSScrub(sc *scrubber, hit func(vault.Kind), limit int64) *wsScrub {
	return &wsScrub{sc: sc, hit: hit, limit: limit}
}

// Message implements rewrite.MessageStream.
func (w *wsScrub) Message(binary bool, p []byte) ([]rewrite.Message, error) {
	if len(w.msgs) >= maxHeldMessages {
		return nil, agentvault.Errorf(agentvault.CodeSubstitution, "too many WebSocket messages held back for scrubbing")
	}
	if !binary && len(p) > 0 {
		// A value behind a JSON \u escape is seen only decoded.
		out, _, err := rewrite.ScrubBody("", "", p, w.sc.replacer(w.hit), w.limit)
		if err != nil {
			return nil, err
		}
		p = out
	}
	start := len(w.buf)
	w.buf = append(w.buf, p...)
	w.msgs = append(w.msgs, wsHeld{binary: binary, start: start, end: len(w.buf)})
	return w.advance(false), nil
}

// Flush implements rewrite.MessageStream: the held bytes are decided as
// they are.
func (w *wsScrub) Flush() ([]rewrite.Message, error) {
	return w.advance(true), nil
}

// advance scans the undecided bytes, decides what it can (all of it when
// final) and returns the messages that may go.
func (w *wsScrub) advance(final bool) []rewrite.Message {
	n := len(w.buf)
	open := n      // earliest byte a match could still begin at and grow from
	var held []int // starts of open prefixes that differ from their stand-in's
	if !final {
		w.sc.m.OpenPrefixes(w.buf, w.done, func(start, id int) {
			open = min(open, start)
			if !bytes.HasPrefix(w.sc.to[id], w.buf[start:]) {
				held = append(held, start)
			}
		})
	}
	hold := n // earliest byte that may not be sent yet
	w.found = w.sc.m.Spans(w.found[:0], w.buf, w.done)
	for _, f := range w.found {
		if f.Start >= open {
			// More input could still make this a longer match: undecided,
			// and not the stand-in, so it waits.
			hold = f.Start
			break
		}
		w.spans = append(w.spans, f)
		if w.hit != nil {
			w.hit(w.sc.kinds[f.ID])
		}
		w.done = f.End
	}
	clear(w.found)
	for _, st := range held {
		if st >= w.done { // one inside a decided match can no longer begin one
			hold = min(hold, st)
		}
	}
	w.done = max(w.done, open)

	k := 0
	for k < len(w.msgs) && w.msgs[k].end <= hold {
		k++
	}
	out := make([]rewrite.Message, 0, k)
	for _, m := range w.msgs[:k] {
		out = append(out, rewrite.Message{Binary: m.binary, Payload: w.render(m)})
	}
	w.msgs = w.msgs[k:]
	w.compact()
	return out
}

// render builds a message's bytes with the decided replacements.
func (w *wsScrub) render(m wsHeld) []byte {
	out := make([]byte, 0, m.end-m.start)
	pos := m.start
	for _, sp := range w.spans {
		if sp.End <= m.start || sp.Start >= m.end {
			continue
		}
		x, y := max(sp.Start, m.start), min(sp.End, m.end)
		out = append(out, w.buf[pos:x]...)
		to := w.sc.to[sp.ID]
		i, j := min(x-sp.Start, len(to)), min(y-sp.Start, len(to))
		if y == sp.End {
			j = len(to) // the last part takes the rest
		}
		out = append(out, to[i:j]...)
		pos = y
	}
	return append(out, w.buf[pos:m.end]...)
}

// compact drops the bytes no held message and no later scan needs (one
// byte before done stays as the left context of a short value), and wipes
// them.
func (w *wsScrub) compact() {
	cut := max(w.done-1, 0)
	if len(w.msgs) > 0 {
		cut = min(cut, w.msgs[0].start)
	}
	keep := w.spans[:0]
	for _, sp := range w.spans {
		if len(w.msgs) > 0 && sp.End > w.msgs[0].start {
			sp.Start, sp.End = sp.Start-cut, sp.End-cut
			keep = append(keep, sp)
		}
	}
	clear(w.spans[len(keep):])
	w.spans = keep
	if cut == 0 {
		return
	}
	n := copy(w.buf, w.buf[cut:])
	clear(w.buf[n:])
	w.buf = w.buf[:n]
	w.done -= cut
	for i := range w.msgs {
		w.msgs[i].start -= cut
		w.msgs[i].end -= cut
	}
}

// wipe clears what the stream still holds; the connection is over.
func (w *wsScrub) wipe() {
	clear(w.buf[:cap(w.buf)])
	w.buf, w.msgs, w.spans = nil, nil, nil
}

var _ rewrite.MessageStream = (*wsScrub)(nil)

// passThrough is the scrubber of a session that released no real value.
type passThrough struct{}

func (passThrough) ReplaceField(dst, src []byte) ([]byte, int, error) {
	return append(dst, src...), 0, nil
}
func (passThrough) ReplaceText(dst, src []byte) ([]byte, int, error) {
	return append(dst, src...), 0, nil
}
