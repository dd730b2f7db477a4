package hostname

import (
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentvault/agentvault"
	"golang.org/x/net/idna"
	"golang.org/x/net/publicsuffix"
)

// profile maps and validates names the way a browser's URL parser does
// before a lookup: UTS 46 nontransitional mapping, hyphen and joiner checks,
// the Bidi rule. STD3 rules are off because they refuse "_" (see doc.go); the
// ASCII result is checked byte by byte in canonical instead.
var profile = idna.New(
	idna.MapForLookup(),
	idna.StrictDomainName(false),
	idna.Transitional(false),
	idna.BidiRule(),
)

// Origin is a normalised destination: a canonical host and an explicit
// port. The scheme is always https.
type Origin struct {
	Host string
	Port int
}

// String is "host:port", with brackets around an IPv6 host.
func (o Origin) String() string {
	return net.JoinHostPort(o.Host, strconv.Itoa(o.Port))
}

// Parse reads hostport ("host", "host:port", "[v6]:port" or a bare IPv6
// literal; defaultPort when no port is given) into its canonical form.
// Anything that is not a plain host name or IP literal (userinfo, paths,
// zones, empty labels, invalid UTF-8) is refused with
// destination_unauthorized.
func Parse(hostport string, defaultPort int) (Origin, error) {
	bad := func() (Origin, error) {
		return Origin{}, agentvault.Errorf(agentvault.CodeDestinationUnauthorized, "destination is not a valid host")
	}
	if hostport == "" || !utf8.ValidString(hostport) || strings.ContainsAny(hostport, forbidden) {
		return bad()
	}
	host, portStr := hostport, ""
	// A bracketed host is an IPv6 literal and nothing else (RFC 3986 3.2.2).
	bracketed := strings.HasPrefix(hostport, "[")
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		host, portStr = h, p
	} else if strings.HasPrefix(hostport, "[") && strings.HasSuffix(hostport, "]") {
		host = hostport[1 : len(hostport)-1]
	} else if strings.Contains(hostport, ":") && !strings.Contains(hostport, "]") {
		// A bare IPv6 literal without brackets.
		if _, err := netip.ParseAddr(hostport); err != nil {
			return bad()
		}
	}
	port := defaultPort
	if portStr != "" {
		p, ok := parsePort(portStr)
		if !ok {
			return bad()
		}
		port = p
	}
	if bracketed && !isIPv6(host) {
		return bad()
	}
	h, ok := canonical(host)
	if !ok {
		return bad()
	}
	return Origin{Host: h, Port: port}, nil
}

// Bare canonicalises a bare host name or IP literal ("[::1]" or "::1"): no
// scheme, port, path or surrounding space. Use it where the input is
// already meant to be a host (a stored site, a policy argument).
func Bare(s string) (string, error) {
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		s = s[1 : len(s)-1]
		if !isIPv6(s) {
			return "", agentvault.Errorf(agentvault.CodeInvalidInput, "not a host name")
		}
	}
	h, ok := canonical(s)
	if !ok {
		return "", agentvault.Errorf(agentvault.CodeInvalidInput, "not a host name")
	}
	return h, nil
}

// Host canonicalises a site the owner typed: a bare host, "host:port", or a
// URL ("https://shop.example/path", "shop.example/path"), whose host it
// takes; surrounding space is ignored, the port and path are dropped. A
// URL with userinfo ("https://a.com@evil.com") is refused, not read either
// way, as is any scheme but http and https.
func Host(s string) (string, error) {
	bad := agentvault.Errorf(agentvault.CodeInvalidInput, "not a host name or URL")
	s = strings.TrimSpace(s)
	if s == "" || !utf8.ValidString(s) {
		return "", bad
	}
	if h, err := Bare(s); err == nil {
		return h, nil
	}
	raw := s
	if !strings.Contains(s, "://") {
		raw = "https://" + s
	}
	u, err := url.Parse(raw)
	if err != nil || u.User != nil || u.Opaque != "" || u.Host == "" ||
		(u.Scheme != "https" && u.Scheme != "http") {
		return "", bad
	}
	if p := u.Port(); p != "" {
		if _, ok := parsePort(p); !ok {
			return "", bad
		}
	}
	h, ok := canonical(u.Hostname())
	if !ok {
		return "", bad
	}
	return h, nil
}

// Site reads a site the owner names (an authorized destination, a card's or
// a login's site, a blocked merchant, a sign-up): Host's canonical form,
// which must be an IP address or a name with a registrable domain. An IP
// address is a site of its own (its own registrable domain, with no
// subdomains); a bare public suffix ("com", "co.uk", "github.io") or a
// single label ("localhost") is not a site, since it would stand for every
// site under it or for none.
func Site(s string) (string, error) {
	h, err := Host(s)
	if err != nil {
		return "", err
	}
	if _, err := Registrable(h); err != nil {
		return "", agentvault.Errorf(agentvault.CodeInvalidInput, "not a site: a public suffix or a single label stands for no one site")
	}
	return h, nil
}

// Registrable is host's registrable domain (eTLD+1) by the public suffix
// list: "shop.example.co.uk" gives "example.co.uk", "www.shop.example"
// gives "shop.example". An IP address is its own registrable domain. A
// bare public suffix ("com", "co.uk", "github.io") has none and is an error.
func Registrable(host string) (string, error) {
	h, err := Bare(host)
	if err != nil {
		return "", err
	}
	if IsIP(h) {
		return h, nil
	}
	rd, err := publicsuffix.EffectiveTLDPlusOne(h)
	if err != nil || !Under(h, rd) {
		return "", agentvault.Errorf(agentvault.CodeInvalidInput, "not a registrable domain (a public suffix has none)")
	}
	return rd, nil
}

// Under reports whether host is base or a subdomain of it. Both must be
// canonical (from Parse, Host or Bare); an IP address has no subdomains.
// It compares labels, so "a.com.evil.com" and "notshop.example" are not
// under "a.com" and "shop.example".
func Under(host, base string) bool {
	if host == "" || base == "" {
		return false
	}
	if host == base {
		return true
	}
	return !IsIP(base) && strings.HasSuffix(host, "."+base)
}

// IsIP reports whether host is an IP literal (canonical or not).
func IsIP(host string) bool {
	_, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	return err == nil
}

func isIPv6(s string) bool {
	ip, err := netip.ParseAddr(s)
	return err == nil && ip.Is6()
}

// forbidden are the bytes that never belong to a host: userinfo, path,
// query, fragment, escapes, space.
const forbidden = "@/\\?#% \t\r\n"

func parsePort(s string) (int, bool) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, false
	}
	p, err := strconv.Atoi(s)
	return p, err == nil && p >= 1 && p <= 65535
}

// canonical is the rule itself (see doc.go).
func canonical(host string) (string, bool) {
	if host == "" || !utf8.ValidString(host) || strings.ContainsAny(host, forbidden) {
		return "", false
	}
	host = strings.TrimSuffix(host, ".")
	if host == "" {
		return "", false
	}
	if ip, ok := canonicalIP(host); ok {
		return ip, ip != ""
	}
	ascii, err := profile.ToASCII(host)
	if err != nil {
		return "", false
	}
	ascii = strings.ToLower(ascii)
	// The ASCII form must be stable: a name whose punycode does not decode
	// back to a valid label (replacement characters, disallowed runes) is
	// refused rather than guessed at.
	if again, err := profile.ToASCII(ascii); err != nil || again != ascii {
		return "", false
	}
	// Mapping can turn a name into an IP literal ("１２７.０.０.１").
	if ip, ok := canonicalIP(ascii); ok {
		return ip, ip != ""
	}
	if len(ascii) > 253 {
		return "", false
	}
	labels := strings.Split(ascii, ".")
	for _, label := range labels {
		if label == "" || len(label) > 63 {
			return "", false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", false
			}
		}
	}
	if numeric(labels[len(labels)-1]) {
		return "", false
	}
	return ascii, true
}

// canonicalIP reports whether s is an IP literal; the string is its
// canonical form, or "" for a literal that is refused (a zone).
func canonicalIP(s string) (string, bool) {
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return "", false
	}
	if ip.Zone() != "" {
		return "", true
	}
	return ip.Unmap().String(), true
}

// numeric reports whether a last label makes a WHATWG URL parser read the
// whole host as an IPv4 address ("ends in a number": decimal digits, or
// 0x and hex digits).
func numeric(label string) bool {
	if strings.HasPrefix(label, "0x") {
		label = label[2:]
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(label); i++ {
		if label[i] < '0' || label[i] > '9' {
			return false
		}
	}
	return true
}
