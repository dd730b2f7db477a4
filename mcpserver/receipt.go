package mcpserver

import (
	"net/url"
	"os"
	"path/filepath"

	"github.com/agentvault/agentvault/control"
)

// keepReceipt keeps a masked screenshot of the confirmation page for the
// account owner (seed 004, get_session_outcome): only for a session that
// filled no token, such as a saved-payment checkout, so that no value of
// the vault can be in the image; Chromium paints every sensitive field
// over besides. It goes where browser_login keeps its diagnostic captures
// and returns its reference and the page's host, which the confirmation
// event carries, never the image. It returns "" when the session filled a
// token, no artifact directory is set or the capture failed: the answer
// then says no image was kept.
func (s *Server) keepReceipt(ss *Session) (ref, site string) {
	dir := s.cfg.ArtifactDir
	if dir == "" || ss.gate.Filled() {
		return "", ""
	}
	u, err := url.Parse(ss.page.URL())
	if err != nil || u.Hostname() == "" {
		return "", ""
	}
	b, err := ss.page.Screenshot(nil)
	if err != nil || len(b) == 0 {
		return "", ""
	}
	ref = control.NewReceiptArtifact()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		s.log.Warn("receipt image not kept")
		return "", ""
	}
	if err := os.WriteFile(filepath.Join(dir, ref), b, 0o600); err != nil {
		s.log.Warn("receipt image not kept")
		return "", ""
	}
	return ref, u.Hostname()
}

// dropReceipt removes a receipt image whose reference did not reach
// proxyd: no image is kept that the owner cannot find.
func (s *Server) dropReceipt(ref string) {
	_ = os.Remove(filepath.Join(s.cfg.ArtifactDir, ref))
}
