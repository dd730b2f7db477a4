package recipes

import (
	"net/url"
	"strings"

	"github.com/agentvault/agentvault/hostname"
)

// StripURL is what a lookup may see of a page URL: scheme, host and path,
// without the query, the fragment, any user info, and without a
// hosted-checkout token in the path (and whatever follows it). A string
// that does not parse as an absolute URL comes back unchanged: the lookup
// then reads it as a bare host or finds nothing.
//
// Hosted checkouts put the session's key in the path (Stripe Checkout's
// /c/pay/cs_live_…, Shopify's /checkouts/cn/<token>): it lets anyone who
// has it resume the buyer's checkout, so it must not reach a registry, a
// log or a store.
func StripURL(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Scheme == "" || u.Host == "" || u.Opaque != "" {
		return raw
	}
	u.User = nil
	u.RawQuery, u.ForceQuery = "", false
	u.Fragment, u.RawFragment = "", ""
	segs := strings.Split(u.Path, "/")
	for i, s := range segs {
		if isCheckoutToken(s) || i > 0 && isCheckoutMarker(segs[i-1]) && s != "" && !isPlainWord(s) {
			segs = segs[:i]
			break
		}
	}
	u.Path = strings.Join(segs, "/")
	u.RawPath = ""
	return u.String()
}

// isCheckoutToken reports a path segment shaped like a checkout session's
// key: a known prefix, or a long opaque run of letters and digits.
func isCheckoutToken(s string) bool {
	for _, p := range []string{"cs_live_", "cs_test_", "pi_", "seti_", "ppage_", "bps_", "plink_", "cn_"} {
		if strings.HasPrefix(s, p) && len(s) > len(p)+8 {
			return true
		}
	}
	if len(s) < 24 {
		return false
	}
	var letters, digits int
	for _, c := range []byte(s) {
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			letters++
		case c == '-' || c == '_' || c == '%' || c == '=' || c == '.':
		default:
			return false
		}
	}
	return letters > 0 && digits > 0
}

// isCheckoutMarker is a path segment after which hosted checkouts put the
// session key ("/checkouts/<token>", "/checkouts/cn/<token>", "/c/pay/…").
func isCheckoutMarker(s string) bool {
	switch strings.ToLower(s) {
	case "checkouts", "cn", "pay", "session", "sessions":
		return true
	}
	return false
}

// isPlainWord is a path segment that reads as a word ("thank-you",
// "information"), not a key.
func isPlainWord(s string) bool {
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c == '-' || c == '_') {
			return false
		}
	}
	return len(s) <= 20
}

// HostOf is the host a lookup is for: the canonical host of a URL or a bare
// host, or "" when there is none.
func HostOf(urlOrHost string) string {
	h, err := hostname.Host(urlOrHost)
	if err != nil {
		return ""
	}
	return h
}

// StoreOf is the store a host belongs to: its registrable domain (an IP
// address is its own, hostname.Site's rule), or the host itself where there
// is none (localhost). Two recipes of one store are combined.
func StoreOf(host string) string {
	if rd, err := hostname.Registrable(host); err == nil {
		return rd
	}
	return host
}
