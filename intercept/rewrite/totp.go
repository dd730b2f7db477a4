package rewrite

import (
	"bytes"
	"net/url"
	"regexp"
	"strings"

	"golang.org/x/net/html"
)

// Reading an authenticator enrolment page (seed 004, declare_page_hint
// login.totp_secret). The proxy hands an HTML document's decoded bytes here
// when the broker has a capture bound to that document: FindTOTPSeed reads
// the seed where the hint's locator points, MaskTOTP takes every form of it
// out of what the browser is sent. Whether the seed is taken at all (the
// document is the one the hint was declared on, the seed is not text the
// request carried) is the broker's decision, not this file's.

// TOTPLocator says where the seed sits on the page as the browser found the
// element the hint named: its id when it has one, else its tag and its
// index among the elements of that tag in document order.
type TOTPLocator struct {
	ID    string
	Tag   string
	Index int
}

// TOTPSeed is a seed found in a document.
type TOTPSeed struct {
	// Value is what the vault stores: the base32 key, or the whole
	// otpauth://totp URI when the page gave one (it names the digits,
	// period and algorithm).
	Value string
	// Key is the base32 key alone, normalised (NormBase32).
	Key string
	// Shown lists the forms the seed takes in the bytes, to mask.
	Shown []string
}

// TOTPMask replaces the seed in what the browser is sent.
const TOTPMask = "[stored in vault]"

var (
	base32Run   = regexp.MustCompile(`[A-Za-z2-7][A-Za-z2-7 \-]{14,}[A-Za-z2-7]=*`)
	otpauthInAt = regexp.MustCompile(`otpauth://totp/[^\s"'<>]+`)
)

// FindTOTPSeed reads the element loc names in an HTML document: an
// otpauth://totp URI in its attributes or text, else a base32 run of 16 to
// 128 characters (spaces and hyphens between groups allowed) in its text or
// value.
func FindTOTPSeed(body []byte, loc TOTPLocator) (TOTPSeed, bool) {
	doc, err := html.Parse(bytes.NewReader(body))
	if err != nil {
		return TOTPSeed{}, false
	}
	el := locate(doc, loc)
	if el == nil {
		return TOTPSeed{}, false
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
			sec := NormBase32(pu.Query().Get("secret"))
			if !validBase32(sec) {
				continue
			}
			return TOTPSeed{Value: pu.String(), Key: sec,
				Shown: []string{u, html.UnescapeString(u), pu.Query().Get("secret"), sec}}, true
		}
	}
	for _, t := range texts {
		for _, run := range base32Run.FindAllString(t, -1) {
			sec := NormBase32(run)
			if validBase32(sec) {
				return TOTPSeed{Value: sec, Key: sec, Shown: []string{strings.TrimSpace(run), sec, strings.ToLower(sec)}}, true
			}
		}
	}
	return TOTPSeed{}, false
}

// NormBase32 is base32 text as a key: upper case, without the spaces,
// hyphens and '=' padding set-up screens show it with.
func NormBase32(s string) string {
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

// MaskTOTP replaces every form of s in body by TOTPMask, longest first so a
// URI goes whole, and the key shown in other groupings elsewhere on the
// page too.
func MaskTOTP(body []byte, s TOTPSeed) []byte {
	forms := append([]string(nil), s.Shown...)
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
		if n := NormBase32(f); validBase32(n) {
			secs = append(secs, n)
		}
	}
	return base32Run.ReplaceAllFunc(out, func(m []byte) []byte {
		n := NormBase32(string(m))
		for _, s := range secs {
			if strings.Contains(n, s) {
				return []byte(TOTPMask)
			}
		}
		return m
	})
}
