package broker

import (
	"bytes"
	"context"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/vault"
	"golang.org/x/net/html"
)

// TOTP enrolment (seed 004, declare_page_hint login.totp_secret). The
// authenticator seed an enrolment page shows is read here, from the bytes of
// the response that delivered the page, never by the agent and never by the
// browser: mcpd arms a capture for the session with the element's locator
// (computed by the browser without reading it), reloads the page, and the
// proxy hands that document's bytes to CaptureTOTP before the browser gets
// them. The seed is kept in the capture until TakeTOTPCapture hands it to
// the vault (owner.Accounts.EnrollTOTP), and it is masked out of the bytes
// the browser is sent, so the agent cannot read it back from the page.

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

// maxCaptureBody bounds the document a capture parses.
const maxCaptureBody = 2 << 20

// TOTPMask replaces the seed in what the browser is sent.
const TOTPMask = "[stored in vault]"

type totpCapture struct {
	id      string
	item    vault.Item
	host    string
	loc     TOTPLocator
	expires time.Time
	done    chan struct{}
	seed    vault.Secret // base32 or an otpauth:// URI
	err     error
}

// ArmTOTPCapture arms a capture of login label's seed from the next HTML
// document host sends session s. The session must have signed in as that
// login (its password released in this session) and host must be in the
// login's scope: sensitive_data_blocked otherwise, the same answer whether
// or not the login exists.
func (ss *Broker) ArmTOTPCapture(ctx context.Context, s *Session, label, host string, loc TOTPLocator) (string, error) {
	notSignedIn := agentvault.Errorf(agentvault.CodeSensitiveDataBlocked, "this session has not signed in as that login: sign in with fill_login first")
	if loc.ID == "" && (loc.Tag == "" || loc.Index < 0) {
		return "", agentvault.Errorf(agentvault.CodeHintUnresolved, "the hint does not point at an element")
	}
	item, err := ss.Vault.GetByLabel(ctx, s.Key.Org, vault.KindLogin, label)
	if err != nil {
		return "", notSignedIn
	}
	if !ss.policy().ScopeAdmits(item, host) {
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
	c := &totpCapture{id: randomID("tc_", 12), item: item, host: host, loc: loc,
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

// TOTPCaptureWanted reports whether s has an armed capture waiting for a
// document from host: the proxy hands response bytes over only then.
func (ss *Broker) TOTPCaptureWanted(s *Session, host string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.capture
	return c != nil && c.host == host && c.seed.IsZero() && c.err == nil && ss.now().Before(c.expires)
}

// CaptureTOTP takes the decoded body of an HTML document host sent s and,
// when a capture is armed for it, reads the seed where the locator points
// and returns the body with the seed masked. Any other body comes back as
// it was. A document where the element holds no seed ends the capture with
// hint_unresolved (the page is sent on unchanged: it held no seed).
func (ss *Broker) CaptureTOTP(s *Session, host string, body []byte) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.capture
	if c == nil || c.host != host || !c.seed.IsZero() || c.err != nil || !ss.now().Before(c.expires) {
		return body
	}
	defer close(c.done)
	if len(body) > maxCaptureBody {
		c.err = agentvault.Errorf(agentvault.CodeHintUnresolved, "the enrolment page is too large to read")
		return body
	}
	shown, seed, ok := findTOTPSeed(body, c.loc)
	if !ok {
		c.err = agentvault.Errorf(agentvault.CodeHintUnresolved, "no authenticator secret where the hint points")
		return body
	}
	c.seed = vault.NewSecret([]byte(seed))
	return maskTOTP(body, shown)
}

// TOTPCaptured is a finished capture: the login and its seed, which the
// caller stores and wipes.
type TOTPCaptured struct {
	Item vault.Item
	Seed vault.Secret
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
	return TOTPCaptured{Item: c.item, Seed: c.seed}, nil
}

var (
	base32Run   = regexp.MustCompile(`[A-Za-z2-7][A-Za-z2-7 \-]{14,}[A-Za-z2-7]=*`)
	otpauthInAt = regexp.MustCompile(`otpauth://totp/[^\s"'<>]+`)
)

// findTOTPSeed reads the element loc names in an HTML document: an
// otpauth://totp URI in its attributes or text, else a base32 run of 16 to
// 128 characters (spaces and hyphens between groups allowed) in its text or
// value. shown lists the forms the seed takes in the bytes, to mask.
func findTOTPSeed(body []byte, loc TOTPLocator) (shown []string, seed string, ok bool) {
	doc, err := html.Parse(bytes.NewReader(body))
	if err != nil {
		return nil, "", false
	}
	el := locate(doc, loc)
	if el == nil {
		return nil, "", false
	}
	var texts []string
	for _, a := range el.Attr {
		texts = append(texts, a.Val)
	}
	texts = append(texts, textOf(el))
	for _, t := range texts {
		if u := otpauthInAt.FindString(t); u != "" {
			pu, err := url.Parse(html.UnescapeString(u))
			if err != nil {
				continue
			}
			sec := normBase32(pu.Query().Get("secret"))
			if !validBase32(sec) {
				continue
			}
			return []string{u, html.UnescapeString(u), pu.Query().Get("secret"), sec}, pu.String(), true
		}
	}
	for _, t := range texts {
		for _, run := range base32Run.FindAllString(t, -1) {
			sec := normBase32(run)
			if validBase32(sec) {
				return []string{strings.TrimSpace(run), sec, strings.ToLower(sec)}, sec, true
			}
		}
	}
	return nil, "", false
}

func normBase32(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == ' ' || r == '-' || r == '=' {
			return -1
		}
		return r
	}, s)
	return strings.ToUpper(s)
}

func validBase32(s string) bool {
	if len(s) < 16 || len(s) > 128 {
		return false
	}
	for _, r := range s {
		if !(r >= 'A' && r <= 'Z' || r >= '2' && r <= '7') {
			return false
		}
	}
	return true
}

func locate(doc *html.Node, loc TOTPLocator) *html.Node {
	var found *html.Node
	n := 0
	var walk func(*html.Node)
	walk = func(x *html.Node) {
		if found != nil {
			return
		}
		if x.Type == html.ElementNode {
			if loc.ID != "" {
				for _, a := range x.Attr {
					if a.Key == "id" && a.Val == loc.ID {
						found = x
						return
					}
				}
			} else if strings.EqualFold(x.Data, loc.Tag) {
				if n == loc.Index {
					found = x
					return
				}
				n++
			}
		}
		for c := x.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return found
}

func textOf(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(x *html.Node) {
		if x.Type == html.TextNode {
			b.WriteString(x.Data)
		}
		for c := x.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}

// maskTOTP replaces every form of the seed in body by TOTPMask, longest
// first so a URI goes whole.
func maskTOTP(body []byte, shown []string) []byte {
	forms := append([]string(nil), shown...)
	for i := range forms {
		for j := i + 1; j < len(forms); j++ {
			if len(forms[j]) > len(forms[i]) {
				forms[i], forms[j] = forms[j], forms[i]
			}
		}
	}
	out := body
	for _, f := range forms {
		if len(f) < 16 {
			continue
		}
		out = bytes.ReplaceAll(out, []byte(f), []byte(TOTPMask))
	}
	// The same seed shown in groups elsewhere on the page ("JBSW Y3DP ...").
	var secs []string
	for _, f := range forms {
		if n := normBase32(f); validBase32(n) {
			secs = append(secs, n)
		}
	}
	return base32Run.ReplaceAllFunc(out, func(m []byte) []byte {
		n := normBase32(string(m))
		for _, s := range secs {
			if strings.Contains(n, s) {
				return []byte(TOTPMask)
			}
		}
		return m
	})
}
