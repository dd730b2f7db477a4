package intercept

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentvault/agentvault"
	"golang.org/x/net/idna"
)

// hostProfile maps and validates names the way a browser's URL parser does
// before a lookup (UTS 46), then we check the ASCII result ourselves.
var hostProfile = idna.New(idna.MapForLookup(), idna.Transitional(false), idna.BidiRule())

// Destination is a normalised "host:port": lowercase, IDNA punycode, no
// trailing dot, canonical IP (IPv4-mapped IPv6 unmapped), explicit port.
type Destination struct {
	Host string
	Port int
}

func (d Destination) String() string {
	return net.JoinHostPort(d.Host, strconv.Itoa(d.Port))
}

// NormalizeDestination parses hostport (port optional, defaultPort used when
// absent) into its canonical form. Anything that is not a plain host name or
// IP literal (userinfo, paths, zones, empty labels) is refused.
func NormalizeDestination(hostport string, defaultPort int) (Destination, error) {
	bad := func() (Destination, error) {
		return Destination{}, agentvault.Errorf(agentvault.CodeDestinationUnauthorized, "destination is not a valid host")
	}
	if hostport == "" || !utf8.ValidString(hostport) || strings.ContainsAny(hostport, "@/\\?#% \t\r\n") {
		return bad()
	}
	host, portStr := hostport, ""
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		host, portStr = h, p
	} else if strings.HasPrefix(hostport, "[") && strings.HasSuffix(hostport, "]") {
		host = hostport[1 : len(hostport)-1]
	} else if strings.Count(hostport, ":") > 0 && !strings.Contains(hostport, "]") {
		// A bare IPv6 literal without brackets.
		if _, err := netip.ParseAddr(hostport); err != nil {
			return bad()
		}
	}
	port := defaultPort
	if portStr != "" {
		p, err := strconv.Atoi(portStr)
		if err != nil || p < 1 || p > 65535 || strings.HasPrefix(portStr, "+") {
			return bad()
		}
		port = p
	}
	host = strings.TrimSuffix(host, ".")
	if host == "" {
		return bad()
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return bad()
		}
		return Destination{Host: ip.Unmap().String(), Port: port}, nil
	}
	ascii, err := hostProfile.ToASCII(host)
	if err != nil {
		return bad()
	}
	ascii = strings.ToLower(ascii)
	// The ASCII form must be stable: a name whose punycode does not decode
	// back to a valid label (replacement characters, disallowed runes) is
	// refused rather than guessed at.
	if again, err := hostProfile.ToASCII(ascii); err != nil || again != ascii {
		return bad()
	}
	for _, label := range strings.Split(ascii, ".") {
		if label == "" || len(label) > 63 {
			return bad()
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return bad()
			}
		}
	}
	if len(ascii) > 253 {
		return bad()
	}
	return Destination{Host: ascii, Port: port}, nil
}
