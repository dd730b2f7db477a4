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

// captureTOTP hands the HTML document answering r to the broker for a
// session whose armed TOTP capture (declare_page_hint login.totp_secret)
// is bound to exactly that request: rewrite reads the seed where the
// locator points, the broker decides whether it is taken, and the page
// goes on with it masked when it was. Other responses, and every response
// of other sessions, never come here.
func (s *Server) captureTOTP(sess *broker.Session, r broker.TOTPRequest, loc broker.TOTPLocator, resp *http.Response) error {
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
	out := plain
	if len(plain) > broker.MaxTOTPDocument {
		s.broker.CaptureTOTP(sess, r, broker.TOTPFound{TooLarge: true})
	} else {
		seed, ok := rewrite.FindTOTPSeed(plain, rewrite.TOTPLocator{ID: loc.ID, Tag: loc.Tag, Index: loc.Index})
		if s.broker.CaptureTOTP(sess, r, broker.TOTPFound{OK: ok, Value: seed.Value, Key: seed.Key}) {
			out = rewrite.MaskTOTP(plain, seed)
		}
	}
	resp.Body = nopBody(out)
	resp.Header.Del("Content-Encoding")
	resp.ContentLength = int64(len(out))
	resp.Header.Set("Content-Length", strconv.Itoa(len(out)))
	return nil
}
