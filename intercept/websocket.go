package intercept

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/agentvault/agentvault/intercept/rewrite"
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
// substituted (a message with an unauthorized token ends the connection),
// server text messages are scrubbed (P10), binary frames pass untouched.
func (s *Server) relayWebSocket(t *tunnel, sb *substitution, clientR *bufio.Reader, client net.Conn, upstream io.ReadWriteCloser) {
	defer sb.wipe()
	rm := t.sess.matchers()
	sc := s.sessions.scrubberFor(sb.ctx, t.sess, t.dest.Host)
	up := rewrite.NewFrameRewriter(sb.replacer(rm), true, int(s.cfg.MaxBodyBytes))
	var scrub rewrite.Replacer = passThrough{}
	if sc != nil {
		scrub = sc.replacer(s.metrics.scrub)
	}
	down := rewrite.NewFrameRewriter(scrub, false, int(s.cfg.MaxBodyBytes))
	var once sync.Once
	closeBoth := func() { once.Do(func() { _ = upstream.Close(); _ = client.Close() }) }
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := down.Run(client, upstream); err != nil {
			s.refuse(t.sess, err, "WEBSOCKET", t.dest.Host)
		}
		closeBoth()
	}()
	if err := up.Run(upstream, clientR); err != nil {
		s.refuse(t.sess, err, "WEBSOCKET", t.dest.Host)
	}
	closeBoth()
	<-done
}

// passThrough is the scrubber of a session that released no real value.
type passThrough struct{}

func (passThrough) ReplaceField(dst, src []byte) ([]byte, int, error) {
	return append(dst, src...), 0, nil
}
func (passThrough) ReplaceText(dst, src []byte) ([]byte, int, error) {
	return append(dst, src...), 0, nil
}
