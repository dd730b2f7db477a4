package owner

import (
	"slices"
	"sync"
	"time"
)

// latest keeps the newest entries of a record the Activity page shows,
// at most maxKept, in this process's memory: the log line written beside
// each is the lasting record.
type latest[T any] struct {
	mu   sync.Mutex
	kept []T
}

func (l *latest[T]) add(v T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.kept = append(l.kept, v)
	if n := len(l.kept) - maxKept; n > 0 {
		l.kept = slices.Delete(l.kept, 0, n)
	}
}

// list returns the kept entries, newest first.
func (l *latest[T]) list() []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Clone(l.kept)
	slices.Reverse(out)
	return out
}

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

// maxKept bounds the login diagnostics and the receipts kept for the
// Activity page.
const maxKept = 100

// RecordLoginDiagnostic keeps a login diagnostic for the owner's Activity
// page and writes it to the log. The latest 100 are kept, in this
// process's memory: the log line is the lasting record.
func (s *Service) RecordLoginDiagnostic(d LoginDiagnostic) {
	if d.Time.IsZero() {
		d.Time = s.now().UTC()
	}
	s.log.Info("login diagnostic kept", "artifact", d.Artifact, "outcome", d.Outcome, "login", d.Login, "site", d.Site,
		"session", d.Session, "api_key", d.APIKeyID)
	s.diags.add(d)
}

// LoginDiagnostics lists the kept login diagnostics, newest first.
func (s *Service) LoginDiagnostics() []LoginDiagnostic {
	return s.diags.list()
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
	s.receipts.add(r)
}

// Receipts lists the kept receipts, newest first.
func (s *Service) Receipts() []Receipt {
	return s.receipts.list()
}
