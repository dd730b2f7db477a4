package intercept

import (
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/broker"
	"github.com/agentvault/agentvault/intercept/rewrite"
)

// captureTOTP hands an HTML document's decoded bytes to the broker for a
// session that armed a TOTP enrolment capture (declare_page_hint
// login.totp_secret) and sends on what the broker returns, the seed
// masked. The proxy reads nothing itself: finding the seed is the
// broker's. Other responses, and every response of other sessions, never
// come here.
func (s *Server) captureTOTP(sess *broker.Session, host string, resp *http.Response) error {
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/html" {
		return nil
	}
	limit := s.cfg.MaxBodyBytes
	raw, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	resp.Body.Close()
	if err != nil {
		return agentvault.Wrap(agentvault.CodeUpstream, err, "the site's response was cut short")
	}
	if int64(len(raw)) > limit {
		return agentvault.Errorf(agentvault.CodeUpstream, "the enrolment page is larger than the proxy reads")
	}
	plain, err := rewrite.Decode(resp.Header.Get("Content-Encoding"), raw, limit)
	if err != nil {
		return err
	}
	out := s.broker.CaptureTOTP(sess, host, plain)
	resp.Body = nopBody(out)
	resp.Header.Del("Content-Encoding")
	resp.ContentLength = int64(len(out))
	resp.Header.Set("Content-Length", strconv.Itoa(len(out)))
	return nil
}
