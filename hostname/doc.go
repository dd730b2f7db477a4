// Package hostname is the one place host names are normalised and compared
// (after tailscale's util/dnsname). The proxy's destinations (CONNECT
// authority, SNI, Host, absolute URLs: P2), the owner's authorized sites and
// sign-ups, card and login sites in the vault, the token catalog's URL filter
// and policy's scope checks all call it; none keeps a copy of these rules,
// because two copies drift apart and the gap between them is a bypass.
//
// The canonical form of a host is:
//
//   - lowercase ASCII; internationalised names mapped and validated by UTS 46
//     (nontransitional, as browsers do) and written as punycode ("bücher.example"
//     is "xn--bcher-kva.example"); a punycode label that does not decode to a
//     valid name is refused rather than guessed at;
//   - no trailing dot ("a.com." is "a.com");
//   - an IP literal in its canonical text (IPv4-mapped IPv6 unmapped, so
//     "[::ffff:1.2.3.4]" is "1.2.3.4"; no zone); a name whose last label is a
//     number ("127.1", "0x7f.1") is what a browser would read as a
//     shorthand IPv4 address and is refused: only the canonical dotted quad
//     names an IPv4 address here;
//   - labels of 1 to 63 bytes of [a-z0-9-_], at most 253 bytes in all; empty
//     labels ("a..b"), leading or trailing hyphens and "--" in the third and
//     fourth place of a label that is not punycode are refused (RFC 5891
//     5.4 via UTS 46 CheckHyphens).
//
// Three rules are decided here on purpose:
//
//   - An IP address is a host and a site of its own: its registrable domain
//     is itself and it has no subdomains (Registrable, Under). So an owner
//     may authorize 203.0.113.7 or bind a card to it, and it covers exactly
//     that address. A site is what Site accepts: an IP address, or a name
//     with a registrable domain; a bare public suffix and a single label
//     ("localhost") are hosts but never sites. Every package that reads a
//     site an owner typed asks Site, so none answers "is this an IP or a
//     site" its own way.
//   - "_" is allowed in labels. Browsers accept it in host names (the WHATWG
//     URL standard forbids neither it nor leaves it to STD3), real sites use
//     it, and refusing a name the browser will connect to would only make the
//     proxy and the browser disagree.
//   - "www." is never stripped or ignored. www.shop.example is a distinct host
//     from shop.example; both share the registrable domain shop.example
//     (Registrable), which is what rules that mean "the same site" compare.
//
// Parse reads a destination ("host[:port]", what the proxy sees) into an
// Origin; the scheme is always https for us. Host reads what an owner
// types (a bare host, "host:port", or a URL such as
// https://shop.example/path, whose host it takes), Site the same when it
// must name a site, and Bare accepts a bare host or IP literal and nothing
// else. Registrable gives the eTLD+1 by the public suffix list; Under says
// whether a host is a base host or below it.
//
// This package imports only the standard library, golang.org/x/net/idna,
// golang.org/x/net/publicsuffix and the root errors package: never another
// project package, never I/O, never a resolver.
package hostname
