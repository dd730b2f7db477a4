package intercept

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/agentvault/agentvault"
)

// Ranges refused as destinations on top of what netip.Addr's predicates
// cover. Sources: RFC 6598 (CGNAT), RFC 6052/8215 (NAT64), RFC 6890 special
// purpose registries, RFC 4380 (Teredo) and RFC 3056 (6to4), which can embed
// a private IPv4 address.
var privatePrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("100::/64"),
	netip.MustParsePrefix("2001::/32"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("2002::/16"),
	netip.MustParsePrefix("fc00::/7"),
	netip.MustParsePrefix("fec0::/10"),
}

// IsPrivateAddr reports whether ip is anything but a public unicast address:
// loopback, RFC 1918, link-local (cloud metadata 169.254.169.254), CGNAT,
// NAT64, multicast, unspecified, ULA, documentation and reserved ranges. An
// IPv4-mapped IPv6 address is judged by its IPv4 address.
func IsPrivateAddr(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsUnspecified() ||
		ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast() ||
		ip.IsMulticast() || ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return true
	}
	for _, p := range privatePrefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Resolver looks names up; *net.Resolver is one. Tests use a fixed table
// (like /etc/hosts) to give loopback upstreams real names.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Dialer resolves a destination once, vets every address and dials only a
// vetted one (P3), so a DNS answer cannot change between check and connect.
// A destination that is one of the proxy's own listeners is always refused
// (P16), whatever UnsafeAllowPrivateRanges says.
type Dialer struct {
	// UnsafeAllowPrivateRanges lets the proxy reach private and loopback
	// addresses. Only tests with loopback upstreams set it.
	UnsafeAllowPrivateRanges bool
	Resolver                 Resolver // nil: net.DefaultResolver
	Timeout                  time.Duration
	// Upstream, when set, is the proxy every connection to a site goes
	// through (egress.go); nil: direct.
	Upstream *UpstreamProxy

	mu   sync.RWMutex
	self []netip.AddrPort
}

// AddSelf records one of the proxy's own listening addresses.
func (d *Dialer) AddSelf(addr net.Addr) {
	ap, err := netip.ParseAddrPort(addr.String())
	if err != nil {
		return
	}
	d.mu.Lock()
	d.self = append(d.self, netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()))
	d.mu.Unlock()
}

func (d *Dialer) isSelf(ap netip.AddrPort) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	ip := ap.Addr().Unmap()
	for _, s := range d.self {
		if s.Port() != ap.Port() {
			continue
		}
		if s.Addr() == ip {
			return true
		}
		// Connecting to the unspecified address (0.0.0.0, ::) reaches this
		// host itself (Linux routes it to loopback), so on a port we listen
		// on it is a loop whatever address the listener is bound to.
		if ip.IsUnspecified() {
			return true
		}
		// A listener on the unspecified address answers on loopback and on
		// every local interface address.
		if s.Addr().IsUnspecified() && (ip.IsLoopback() || ip.IsUnspecified() || isLocalInterfaceAddr(ip)) {
			return true
		}
	}
	return false
}

func isLocalInterfaceAddr(ip netip.Addr) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Unmap() == ip {
			return true
		}
	}
	return false
}

// Vet resolves dest and returns the addresses that may be dialed, or the
// refusal. Every resolved address must pass: one bad answer refuses the
// destination, so a rebinding resolver cannot mix a private address in.
func (d *Dialer) Vet(ctx context.Context, dest Destination) ([]netip.AddrPort, error) {
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(dest.Host); err == nil {
		ips = []netip.Addr{ip.Unmap()}
	} else {
		var r Resolver = net.DefaultResolver
		if d.Resolver != nil {
			r = d.Resolver
		}
		got, err := r.LookupNetIP(ctx, "ip", dest.Host)
		if err != nil || len(got) == 0 {
			return nil, agentvault.Wrap(agentvault.CodeUpstream, err, "destination does not resolve")
		}
		for _, ip := range got {
			ips = append(ips, ip.Unmap())
		}
	}
	out := make([]netip.AddrPort, 0, len(ips))
	for _, ip := range ips {
		ap := netip.AddrPortFrom(ip, uint16(dest.Port))
		if d.isSelf(ap) {
			return nil, agentvault.Errorf(agentvault.CodeProxyLoop, "destination is this proxy")
		}
		if IsPrivateAddr(ip) && !d.UnsafeAllowPrivateRanges {
			return nil, agentvault.Errorf(agentvault.CodePrivateDestination, "destination resolves to a private or reserved address")
		}
		out = append(out, ap)
	}
	return out, nil
}

// DialContext is an http.Transport DialContext: it vets addr and connects to
// the first vetted address that answers.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	dest, err := NormalizeDestination(addr, 443)
	if err != nil {
		return nil, err
	}
	aps, err := d.Vet(ctx, dest)
	if err != nil {
		return nil, err
	}
	nd := net.Dialer{Timeout: d.Timeout}
	if nd.Timeout == 0 {
		nd.Timeout = 10 * time.Second
	}
	var last error
	for _, ap := range aps {
		if d.Upstream != nil {
			c, err := d.dialUpstreamProxy(ctx, &nd, ap)
			if err == nil || agentvault.ErrorCode(err) == agentvault.CodeEgressUnavailable {
				return c, err // the next address would ask the same proxy
			}
			last = err
			continue
		}
		c, err := nd.DialContext(ctx, "tcp", net.JoinHostPort(ap.Addr().String(), strconv.Itoa(int(ap.Port()))))
		if err == nil {
			return c, nil
		}
		last = err
	}
	if agentvault.ErrorCode(last) == agentvault.CodeUpstream {
		return nil, last
	}
	return nil, agentvault.Wrap(agentvault.CodeUpstream, last, "destination unreachable")
}
