package control

import (
	"crypto/rand"
	"encoding/hex"
	"regexp"

	"github.com/agentvault/agentvault"
)

// browser_login's diagnostic captures (seed 000): mcpd keeps a masked
// screenshot of a sign-in that did not succeed and reports only its
// reference, so the owner can open it. The reference has one form, made
// here and checked here: the event can carry nothing else in that field.

// LoginOutcomes are the outcomes a login diagnostic may report: the
// portal refused the credential, or the sign-in did not conclude (the
// seed's two error codes).
var LoginOutcomes = map[string]bool{
	"refused":                 true,
	"browser.login_timeout":   true,
	"browser.captcha_pending": true,
}

var loginArtifactRe = regexp.MustCompile(`^login-[0-9a-f]{16}\.png$`)

// NewLoginArtifact is a fresh capture reference, the file name mcpd keeps
// the capture under: login-<16 hex>.png.
func NewLoginArtifact() string { return newArtifact("login-") }

// newArtifact is a fresh file name for a capture mcpd keeps:
// <prefix><16 hex>.png.
func newArtifact(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:]) + ".png"
}

// CheckLoginDiagnostic refuses a login_diagnostic event whose reference or
// outcome is not one mcpd makes (the site and the login are the
// receiver's to check: it knows host names and labels).
func CheckLoginDiagnostic(ev EventRequest) error {
	if !loginArtifactRe.MatchString(ev.Artifact) {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "a login diagnostic's artifact must be a reference of the form login-<16 hex>.png")
	}
	if !LoginOutcomes[ev.Outcome] {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "a login diagnostic's outcome must be refused, browser.login_timeout or browser.captcha_pending")
	}
	return nil
}

// get_session_outcome's receipt images (seed 004): on a corroborated
// checkout confirmation in a session that filled no token, mcpd keeps a
// masked screenshot of the page beside the login diagnostics and the
// confirmation event carries its reference.

var receiptArtifactRe = regexp.MustCompile(`^receipt-[0-9a-f]{16}\.png$`)

// NewReceiptArtifact is a fresh receipt reference, the file name mcpd
// keeps the image under: receipt-<16 hex>.png.
func NewReceiptArtifact() string { return newArtifact("receipt-") }

// CheckReceipt refuses a confirmation event whose receipt reference is
// not one mcpd makes.
func CheckReceipt(ev EventRequest) error {
	if !receiptArtifactRe.MatchString(ev.Receipt) {
		return agentvault.Errorf(agentvault.CodeInvalidInput, "a confirmation's receipt must be a reference of the form receipt-<16 hex>.png")
	}
	return nil
}
