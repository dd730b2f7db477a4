package hostname_test

import (
	"strings"
	"testing"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/hostname"
)

// parseCases is P2's table plus the cases five earlier normalisers
// disagreed on. want "" means refused.
var parseCases = []struct{ name, in, want string }{
	{"case and trailing dot", "A.COM.", "a.com:443"},
	{"explicit port", "a.com:443", "a.com:443"},
	{"leading zero port", "a.com:0443", "a.com:443"},
	{"other port", "a.com:8443", "a.com:8443"},
	{"lookalike suffix is its own host", "a.com.evil.com", "a.com.evil.com:443"},
	{"ipv4-mapped ipv6 unmapped", "[::ffff:1.2.3.4]:443", "1.2.3.4:443"},
	{"bare ipv6", "::1", "[::1]:443"},
	{"ipv6 canonical", "[0:0::1]:8443", "[::1]:8443"},
	{"ipv4", "1.2.3.4:8443", "1.2.3.4:8443"},
	{"ipv4 trailing dot", "1.2.3.4.", "1.2.3.4:443"},
	{"homograph to punycode", "аpple.test", "xn--pple-43d.test:443"}, // Cyrillic а
	{"idn", "Bücher.Example", "xn--bcher-kva.example:443"},
	{"fullwidth mapped", "ＡＢＣ.com", "abc.com:443"},
	{"ideographic full stop", "example。com", "example.com:443"},
	{"fullwidth digits are an ip", "１２７.０.０.１", "127.0.0.1:443"},
	{"underscore accepted", "a_b.example", "a_b.example:443"},
	{"leading underscore accepted", "_dmarc.example", "_dmarc.example:443"},
	{"www kept", "WWW.Shop.Example", "www.shop.example:443"},
	{"path", "evil.com/a.com", ""},
	{"userinfo", "a.com@evil.com", ""},
	{"backslash", "evil.com\\a.com", ""},
	{"query", "a.com?x", ""},
	{"percent", "a%2ecom", ""},
	{"space", "a .com", ""},
	{"empty label", "a..com", ""},
	{"leading dot", ".a.com", ""},
	{"only a dot", ".", ""},
	{"empty", "", ""},
	{"two trailing dots", "a.com..", ""},
	{"port out of range", "a.com:99999", ""},
	{"port zero", "a.com:0", ""},
	{"signed port", "a.com:+1", ""},
	{"zone", "[fe80::1%25eth0]:443", ""},
	{"zone unescaped", "fe80::1%eth0", ""},
	{"name in brackets", "[a.com]:443", ""},
	{"ipv4 in brackets", "[1.2.3.4]", ""},
	{"leading hyphen", "-a.com", ""},
	{"trailing hyphen", "a-.com", ""},
	{"hyphens at 3 and 4", "ab--c.com", ""},
	{"bad punycode", "xn--zz.example", ""},
	{"star", "*.a.com", ""},
	{"invalid utf-8", "a\xff.com", ""},
	{"long label", strings.Repeat("a", 64) + ".com", ""},
	{"long name", strings.Repeat("a.", 127) + "com", ""},
	{"shorthand ipv4", "127.1", ""},
	{"hex ipv4", "0x7f.0.0.1", ""},
	{"octal-looking ipv4", "0177.0.0.1", ""},
	{"numeric last label", "a.123", ""},
}

func TestP2_Parse(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			o, err := hostname.Parse(tc.in, 443)
			got := ""
			if err == nil {
				got = o.String()
			} else if agentvault.ErrorCode(err) != agentvault.CodeDestinationUnauthorized {
				t.Errorf("code %q, want destination_unauthorized", agentvault.ErrorCode(err))
			}
			if got != tc.want {
				t.Errorf("Parse(%q) = %q (%v), want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

// TestP2_ParseBehaviourChanges names what the earlier intercept normaliser
// decided differently: underscores were refused (STD3 rules), a bracketed
// name and a numeric last label were accepted.
func TestP2_ParseBehaviourChanges(t *testing.T) {
	for in, want := range map[string]bool{
		"a_b.example":  true,
		"[a.com]:443":  false,
		"[1.2.3.4]":    false,
		"127.1":        false,
		"0x7f.1":       false,
		"shop.example": true,
	} {
		if _, err := hostname.Parse(in, 443); (err == nil) != want {
			t.Errorf("Parse(%q) accepted=%v, want %v", in, err == nil, want)
		}
	}
}

func TestHost(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"bare", "shop.example", "shop.example"},
		{"space case dot", "  Shop.Example.  ", "shop.example"},
		{"url with path", "https://shop.example/path?q=1#f", "shop.example"},
		{"url with port", "https://Shop.Example:8443/x", "shop.example"},
		{"http url", "http://shop.example", "shop.example"},
		{"scheme-less path", "shop.example/login", "shop.example"},
		{"host and port", "shop.example:8443", "shop.example"},
		{"idn url", "https://bücher.example/", "xn--bcher-kva.example"},
		{"ip", "1.2.3.4", "1.2.3.4"},
		{"ipv6 url", "https://[::ffff:1.2.3.4]:443/", "1.2.3.4"},
		{"bracketed ipv6", "[::1]", "::1"},
		{"www kept", "https://www.shop.example/", "www.shop.example"},
		{"underscore", "my_shop.example", "my_shop.example"},
		{"userinfo refused", "https://shop.example@evil.example/", ""},
		{"bare userinfo refused", "shop.example@evil.example", ""},
		{"ftp refused", "ftp://shop.example/", ""},
		{"javascript refused", "javascript:alert(1)", ""},
		{"bad port", "https://shop.example:99999/", ""},
		{"empty", "  ", ""},
		{"empty label", "https://a..b/", ""},
		{"wildcard", "*.shop.example", ""},
		{"mailto", "mailto:a@shop.example", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := hostname.Host(tc.in)
			if err != nil {
				got = ""
				if agentvault.ErrorCode(err) != agentvault.CodeInvalidInput {
					t.Errorf("code %q", agentvault.ErrorCode(err))
				}
			}
			if got != tc.want {
				t.Errorf("Host(%q) = %q (%v), want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestBare(t *testing.T) {
	for in, want := range map[string]string{
		"A.COM.": "a.com", "::FFFF:1.2.3.4": "1.2.3.4", "[::1]": "::1", "аpple.test": "xn--pple-43d.test",
		"a.com:443": "", "https://a.com": "", "a.com/x": "", " a.com": "", "[a.com]": "", "": "",
	} {
		got, err := hostname.Bare(in)
		if err != nil {
			got = ""
		}
		if got != want {
			t.Errorf("Bare(%q) = %q (%v), want %q", in, got, err, want)
		}
	}
}

func TestRegistrable(t *testing.T) {
	for in, want := range map[string]string{
		"shop.example.co.uk": "example.co.uk",
		"www.shop.example":   "shop.example",
		"Shop.Example.":      "shop.example",
		"github.com":         "github.com",
		"a.b.github.io":      "b.github.io",
		"1.2.3.4":            "1.2.3.4",
		"::ffff:1.2.3.4":     "1.2.3.4",
		"bücher.example":     "xn--bcher-kva.example",
		"com":                "",
		"co.uk":              "",
		"github.io":          "",
		"localhost":          "",
		"a.com/x":            "",
	} {
		got, err := hostname.Registrable(in)
		if err != nil {
			got = ""
		}
		if got != want {
			t.Errorf("Registrable(%q) = %q (%v), want %q", in, got, err, want)
		}
	}
}

// TestSite: the one answer to "is this an IP or a site". An IP address is
// a site of its own; a public suffix or a single label is no site; a URL
// or host:port names its host, "www." kept.
func TestSite(t *testing.T) {
	for in, want := range map[string]string{
		"shop.example.co.uk":              "shop.example.co.uk",
		" WWW.Shop.Example. ":             "www.shop.example",
		"https://pay.shop.example:8443/x": "pay.shop.example",
		"203.0.113.7":                     "203.0.113.7",
		"[::ffff:203.0.113.7]":            "203.0.113.7",
		"https://[2001:db8::1]/checkout":  "2001:db8::1",
		"bücher.example":                  "xn--bcher-kva.example",
		"com":                             "",
		"co.uk":                           "",
		"github.io":                       "",
		"localhost":                       "",
		"https://shop.example@evil.test/": "",
		"a..com":                          "",
		"ftp://shop.example/":             "",
		"":                                "",
	} {
		got, err := hostname.Site(in)
		if err != nil {
			got = ""
		}
		if got != want {
			t.Errorf("Site(%q) = %q (%v), want %q", in, got, err, want)
		}
	}
}

func TestP2_Under(t *testing.T) {
	for _, tc := range []struct {
		host, base string
		want       bool
	}{
		{"shop.example", "shop.example", true},
		{"pay.shop.example", "shop.example", true},
		{"a.b.shop.example", "shop.example", true},
		{"notshop.example", "shop.example", false},
		{"shop.example.evil.example", "shop.example", false},
		{"shop.example", "pay.shop.example", false},
		// www. is a distinct host: the bare domain is not under it.
		{"shop.example", "www.shop.example", false},
		{"www.shop.example", "shop.example", true},
		{"1.2.3.4", "1.2.3.4", true},
		{"5.1.2.3.4", "1.2.3.4", false},
		{"", "", false},
		{"shop.example", "", false},
	} {
		if got := hostname.Under(tc.host, tc.base); got != tc.want {
			t.Errorf("Under(%q, %q) = %v, want %v", tc.host, tc.base, got, tc.want)
		}
	}
}

// naive is the reference for plain ASCII names: lowercase, one trailing dot
// dropped. Parse must agree with it whenever it accepts such a name.
func naive(s string) string {
	return strings.TrimSuffix(strings.ToLower(s), ".")
}

func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return s != ""
}

// FuzzP2_Parse: never panics; output is canonical (every entry point maps
// it to itself); it holds only host-name bytes; plain ASCII names agree with
// the naive reference; a registrable domain is always above its host.
func FuzzP2_Parse(f *testing.F) {
	for _, tc := range parseCases {
		f.Add(tc.in)
	}
	for _, s := range []string{"https://shop.example/x", "a.com:", "[::]:7700", "0.0.0.0", "xn--pple-43d.test", "ab--c.xn--p1ai"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if h, err := hostname.Host(in); err == nil {
			if again, err := hostname.Bare(h); err != nil || again != h {
				t.Fatalf("Host not canonical: %q -> %q -> %q (%v)", in, h, again, err)
			}
		}
		o, err := hostname.Parse(in, 443)
		if err != nil {
			return
		}
		again, err := hostname.Parse(o.String(), 443)
		if err != nil || again != o {
			t.Fatalf("not canonical: %q -> %q -> %q (%v)", in, o.String(), again.String(), err)
		}
		for _, f := range []func(string) (string, error){hostname.Bare, hostname.Host} {
			if h, err := f(o.Host); err != nil || h != o.Host {
				t.Fatalf("%q -> %q -> %q (%v)", in, o.Host, h, err)
			}
		}
		if strings.ContainsAny(o.Host, "@/\\?#% \t\r\n") || o.Host != strings.ToLower(o.Host) || strings.HasSuffix(o.Host, ".") {
			t.Fatalf("bad host %q from %q", o.Host, in)
		}
		if plainASCII(in) && !hostname.IsIP(o.Host) && o.Host != naive(in) {
			t.Fatalf("Parse(%q) = %q, naive reference says %q", in, o.Host, naive(in))
		}
		if rd, err := hostname.Registrable(o.Host); err == nil && !hostname.Under(o.Host, rd) {
			t.Fatalf("%q is not under its registrable domain %q", o.Host, rd)
		}
	})
}
