package owner

import (
	"slices"
	"time"
)

// LoginDiagnostic is a sign-in browser_login did not complete (seed 000):
// the portal refused the credential, or the sign-in did not conclude, and
// mcpd kept a masked capture of the page. Only the capture's reference is
// here, never the capture, the user or the password.
type LoginDiagnostic struct {
	Time     time.Time
	APIKeyID string
	Session  string
	Login    string // the stored login's label
	Site     string // the sign-in page's host
	Outcome  string // refused, browser.login_timeout, browser.captcha_pending
	Artifact string // the capture's reference in mcpd's artifact directory
}

// maxLoginDiagnostics bounds the diagnostics kept for the Activity page,
// and the receipts.
const maxLoginDiagnostics = 100

// RecordLoginDiagnostic keeps a login diagnostic for the owner's Activity
// page and writes it to the log. The latest 100 are kept, in this
// process's memory: the log line is the lasting record.
func (s *Service) RecordLoginDiagnostic(d LoginDiagnostic) {
	if d.Time.IsZero() {
		d.Time = s.now().UTC()
	}
	s.log.Info("login diagnostic kept", "artifact", d.Artifact, "outcome", d.Outcome, "login", d.Login, "site", d.Site,
		"session", d.Session, "api_key", d.APIKeyID)
	s.diagMu.Lock()
	defer s.diagMu.Unlock()
	s.diags = append(s.diags, d)
	if n := len(s.diags) - maxLoginDiagnostics; n > 0 {
		s.diags = slices.Delete(s.diags, 0, n)
	}
}

// LoginDiagnostics lists the kept login diagnostics, newest first.
func (s *Service) LoginDiagnostics() []LoginDiagnostic {
	s.diagMu.Lock()
	defer s.diagMu.Unlock()
	out := slices.Clone(s.diags)
	slices.Reverse(out)
	return out
}

// Receipt is a checkout confirmation for which mcpd kept a masked image
// of the receipt page (seed 004, get_session_outcome): only for a session
// that filled no token, such as a saved-payment checkout. Only the
// image's reference is here, never the image.
type Receipt struct {
	Time     time.Time
	APIKeyID string
	Session  string
	Site     string // the confirmation page's host
	Artifact string // the image's reference in mcpd's artifact directory
}

// RecordReceipt keeps a receipt's reference for the owner's Activity page
// and writes it to the log, bounded and kept like the login diagnostics.
func (s *Service) RecordReceipt(r Receipt) {
	if r.Time.IsZero() {
		r.Time = s.now().UTC()
	}
	s.log.Info("receipt image kept", "artifact", r.Artifact, "site", r.Site, "session", r.Session, "api_key", r.APIKeyID)
	s.diagMu.Lock()
	defer s.diagMu.Unlock()
	s.receipts = append(s.receipts, r)
	if n := len(s.receipts) - maxLoginDiagnostics; n > 0 {
		s.receipts = slices.Delete(s.receipts, 0, n)
	}
}

// Receipts lists the kept receipts, newest first.
func (s *Service) Receipts() []Receipt {
	s.diagMu.Lock()
	defer s.diagMu.Unlock()
	out := slices.Clone(s.receipts)
	slices.Reverse(out)
	return out
}
