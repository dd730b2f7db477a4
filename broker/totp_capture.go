package broker

import (
	"context"
	"net/url"
	"strings"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/hostname"
	"github.com/agentvault/agentvault/vault"
)

// TOTP enrolment (seed 004, declare_page_hint login.totp_secret). The
// authenticator seed an enrolment page shows is read from the bytes of the
// response that delivered the page, never by the agent and never by the
// browser: mcpd arms a capture for the session with the page's URL and the
// element's locator (computed by the browser without reading it), reloads
// the page, and the proxy hands that document to the capture before the
// browser gets it. The HTML reading is intercept/rewrite's (FindTOTPSeed,
// MaskTOTP); this file decides what may be taken (P24, "a stored secret
// changes only from a source the owner trusts"):
//
//   - Binding. A capture reads one document: the answer to a GET of
//     exactly the URL the hint was declared on (origin by package
//     hostname, path and query as sent). Any other document, from the
//     same host or not, passes untouched and leaves the capture armed,
//     until its short expiry.
//   - Reflection. A page may show text the request carried, and the agent
//     chooses that text: the URL, the body, the Referer (the page it came
//     from) and the cookies (a page script may set them from what the
//     agent typed). A seed that shares a run of reflectRun base32
//     characters with any of them, or with the armed URL, is refused
//     (totp_seed_untrusted) and nothing is taken.
//
// A seed that passes is kept in the capture until TakeTOTPCapture hands it
// to the vault (owner.Accounts.EnrollTOTP, which only adds: replacing a
// login's seed waits for the owner), and it is masked out of the bytes the
// browser is sent, so the agent cannot read it back from the page.

// TOTPLocator says where the seed sits on the page as the browser found
// the element the hint named: its id when it has one, else its tag and its
// index among the elements of that tag in document order.
type TOTPLocator struct {
	ID    string `json:"id,omitempty"`
	Tag   string `json:"tag"`
	Index int    `json:"index"`
}

// totpCaptureTTL is how long an armed capture waits for its document.
const totpCaptureTTL = 30 * time.Second

// MaxTOTPDocument bounds the document a capture reads.
const MaxTOTPDocument = 2 << 20

// reflectRun is how many consecutive base32 characters a seed may share
// with text the request carried before it counts as reflected: 40 bits,
// which a random seed matches by chance far less than once in a billion
// captures, and short enough to catch a seed the page built from the
// agent's text and its own words ("Results for JBSW...").
const reflectRun = 8

// TOTPRequest is the request of a document the proxy received for a
// session, as it went upstream.
type TOTPRequest struct {
	Method string
	// Origin is the tunnel's destination (the scheme is always https).
	Origin hostname.Origin
	// Path is the escaped path and RawQuery the query, as sent.
	Path     string
	RawQuery string
	// Body, Referer and Cookie are what else of the request a page may
	// show back.
	Body    []byte
	Referer string
	Cookie  string
}

// TOTPFound is what the proxy's HTML reading found where the locator points.
type TOTPFound struct {
	OK       bool   // the element holds a seed
	TooLarge bool   // the document is over MaxTOTPDocument: not read
	Value    string // the seed to store: a base32 key or an otpauth:// URI
	Key      string // its base32 key, normalised (rewrite.NormBase32)
}

// boundPage is the one document a capture reads.
type boundPage struct {
	origin      hostname.Origin
	path, query string
}

// pageOf reads the URL a hint was declared on.
func pageOf(raw string) (boundPage, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || u.Opaque != "" {
		return boundPage{}, agentvault.Errorf(agentvault.CodeInvalidHint, "the page's address is not a URL: open the enrolment page first")
	}
	if u.Scheme != "https" {
		return boundPage{}, agentvault.Errorf(agentvault.CodeInsecurePage, "an authenticator secret is read only from an https:// page the proxy carries")
	}
	o, err := hostname.Parse(u.Host, 443)
	if err != nil {
		return boundPage{}, agentvault.Errorf(agentvault.CodeInvalidHint, "the page's host is not a host name")
	}
	return boundPage{origin: o, path: pathOrRoot(u.EscapedPath()), query: u.RawQuery}, nil
}

func pathOrRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// reads reports whether r is the request whose answer p is.
func (p boundPage) reads(r TOTPRequest) bool {
	return r.Method == "GET" && r.Origin == p.origin && pathOrRoot(r.Path) == p.path && r.RawQuery == p.query
}

type totpCapture struct {
	id      string
	item    vault.Item
	page    boundPage
	armed   string // the URL as mcpd gave it, fragment and all
	loc     TOTPLocator
	expires time.Time
	done    chan struct{}
	seed    vault.Secret // base32 or an otpauth:// URI
	err     error
}

// open reports whether c still waits for its document at now.
func (c *totpCapture) open(now time.Time) bool {
	return c != nil && c.seed.IsZero() && c.err == nil && now.Before(c.expires)
}

// ArmTOTPCapture arms a capture of login label's seed from the answer to
// the next GET of pageURL (the page the hint was declared on) in session s.
// The session must have signed in as that login (its password released in
// this session) and the page's host must be in the login's scope:
// sensitive_data_blocked otherwise, the same answer whether or not the
// login exists.
func (ss *Broker) ArmTOTPCapture(ctx context.Context, s *Session, label, pageURL string, loc TOTPLocator) (string, error) {
	notSignedIn := agentvault.Errorf(agentvault.CodeSensitiveDataBlocked, "this session has not signed in as that login: sign in with fill_login first")
	if loc.ID == "" && (loc.Tag == "" || loc.Index < 0) {
		return "", agentvault.Errorf(agentvault.CodeHintUnresolved, "the hint does not point at an element")
	}
	page, err := pageOf(pageURL)
	if err != nil {
		return "", err
	}
	item, err := ss.cfg.Vault.GetByLabel(ctx, s.Key.Org, vault.KindLogin, label)
	if err != nil {
		return "", notSignedIn
	}
	if !ss.policy().ScopeAdmits(item, page.origin.Host) {
		return "", notSignedIn
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", agentvault.Errorf(agentvault.CodeSessionEnded, "the session has ended")
	}
	if !s.signedIn[item.ID] {
		return "", notSignedIn
	}
	if c := s.capture; c != nil {
		c.seed.Wipe()
	}
	c := &totpCapture{id: randomID("tc_", 12), item: item, page: page, armed: pageURL, loc: loc,
		expires: ss.now().Add(totpCaptureTTL), done: make(chan struct{})}
	s.capture = c
	return c.id, nil
}

// markSignedIn records that s released item's password (Release).
func (s *Session) markSignedIn(itemID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.signedIn == nil {
		s.signedIn = map[string]bool{}
	}
	s.signedIn[itemID] = true
}

// TOTPCaptureFor reports whether s has an armed capture bound to the
// answer of r, and where its seed sits: the proxy reads a document only
// then. Every other response passes untouched and leaves the capture as
// it was.
func (ss *Broker) TOTPCaptureFor(s *Session, r TOTPRequest) (TOTPLocator, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.capture
	if !c.open(ss.now()) || !c.page.reads(r) {
		return TOTPLocator{}, false
	}
	return c.loc, true
}

// CaptureTOTP decides on what the proxy read from the answer to r: it
// reports whether the seed was taken, in which case the proxy masks it in
// what the browser gets. A document with no seed where the hint points, a
// document too large to read, and a seed the request itself carried end
// the capture with the reason (hint_unresolved, totp_seed_untrusted) and
// the page is sent on unchanged. A request the capture is not bound to
// changes nothing.
func (ss *Broker) CaptureTOTP(s *Session, r TOTPRequest, found TOTPFound) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.capture
	if !c.open(ss.now()) || !c.page.reads(r) {
		return false
	}
	defer close(c.done)
	switch {
	case found.TooLarge:
		c.err = agentvault.Errorf(agentvault.CodeHintUnresolved, "the enrolment page is too large to read")
	case !found.OK || found.Key == "":
		c.err = agentvault.Errorf(agentvault.CodeHintUnresolved, "no authenticator secret where the hint points")
	case reflected(found.Key, r, c.armed):
		c.err = agentvault.Errorf(agentvault.CodeTOTPSeedUntrusted,
			"the secret where the hint points is text the page echoed from its own address, form, referrer or cookies, not one the site issued: nothing was stored; declare the hint on the site's enrolment page, or let the owner enter the secret on the dashboard")
	default:
		c.seed = vault.NewSecret([]byte(found.Value))
		return true
	}
	return false
}

// reflected reports whether key shares a run of reflectRun base32
// characters with anything r carried or with the armed URL, each read raw
// and percent-decoded (up to three times: a page may decode twice).
func reflected(key string, r TOTPRequest, armed string) bool {
	if len(key) < reflectRun {
		return true
	}
	for _, src := range []string{r.Path, r.RawQuery, string(r.Body), r.Referer, r.Cookie, armed} {
		for range 4 {
			if sharesRun(base32Letters(src), key) {
				return true
			}
			dec := percentDecode(src)
			if dec == src {
				break
			}
			src = dec
		}
	}
	return false
}

// sharesRun reports whether text holds any reflectRun characters of key in
// a row.
func sharesRun(text, key string) bool {
	if len(text) < reflectRun {
		return false
	}
	for i := 0; i+reflectRun <= len(key); i++ {
		if strings.Contains(text, key[i:i+reflectRun]) {
			return true
		}
	}
	return false
}

// base32Letters keeps the characters of the base32 alphabet in s, upper
// case: whatever a page puts between them (spaces, dashes, punctuation,
// '=' padding, parameter names' separators) it can drop when it shows
// them.
func base32Letters(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= '2' && c <= '7':
			b.WriteByte(c)
		case c >= 'a' && c <= 'z':
			b.WriteByte(c - 'a' + 'A')
		}
	}
	return b.String()
}

// percentDecode decodes %XX escapes and '+' as a form does, leaving a
// malformed escape as it is (a page decodes leniently too).
func percentDecode(s string) string {
	if !strings.ContainsAny(s, "%+") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
		case c == '+':
			b.WriteByte(' ')
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// TOTPCaptured is a finished capture: the login, its seed (which the
// caller stores and wipes) and the page it came from.
type TOTPCaptured struct {
	Item vault.Item
	Seed vault.Secret
	// Page is the URL the hint was declared on, Site its host.
	Page string
	Site string
}

// TakeTOTPCapture waits (up to wait) for capture id of s and hands its seed
// over once; the capture is then gone.
func (ss *Broker) TakeTOTPCapture(ctx context.Context, s *Session, id string, wait time.Duration) (TOTPCaptured, error) {
	s.mu.Lock()
	c := s.capture
	s.mu.Unlock()
	if c == nil || c.id != id {
		return TOTPCaptured{}, agentvault.Errorf(agentvault.CodeHintUnresolved, "no capture is armed: declare the hint again")
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.capture == c {
		s.capture = nil
	}
	if c.err != nil {
		return TOTPCaptured{}, c.err
	}
	if c.seed.IsZero() {
		return TOTPCaptured{}, agentvault.Errorf(agentvault.CodeHintUnresolved, "the enrolment page was not seen again in time: declare the hint again")
	}
	return TOTPCaptured{Item: c.item, Seed: c.seed, Page: c.armed, Site: c.page.origin.Host}, nil
}
