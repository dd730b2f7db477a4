package policy

import (
	"net/url"
	"strings"
	"unicode/utf8"
)

// MaxPageLen bounds the page an approval shows (ShownPage).
const MaxPageLen = 200

// ShownPage is the one reduction of the page an agent was filling to what
// the owner is shown with an approval: scheme, host (with its port) and
// path, never the user information, the query or the fragment, which may
// carry personal data (an email, an order or session id), cut to
// MaxPageLen bytes on a character boundary. A page that does not parse as
// an absolute URL is shown as "".
func ShownPage(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	s := u.Scheme + "://" + u.Host + u.EscapedPath()
	if len(s) > MaxPageLen {
		s = s[:MaxPageLen]
		for len(s) > 0 && !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		if i := strings.LastIndexByte(s, '%'); i >= 0 && i >= len(s)-2 {
			s = s[:i] // not half an escape
		}
	}
	return s
}
