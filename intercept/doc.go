// Package intercept is the MITM egress proxy: the only package that imports
// goproxy. It owns the deployment's MITM CA and its leaf cache, the
// HTTPS-only rules, the SSRF-safe dialer, the HTTP/1.1, HTTP/2 and WebSocket
// request path inside a tunnel, finding tokens and stand-ins in requests and
// real values in responses (matchers built from what package broker says),
// the limits and the metrics. Every release decision is broker's: intercept
// asks broker.Release for each value it substitutes and broker.ScrubSet for
// what a host's responses must not carry back.
//
// How the work is split with goproxy: goproxy serves the proxy listener,
// parses CONNECT, and hands us the hijacked client connection. We terminate
// TLS ourselves (our CA, ALPN h2 and http/1.1), read every request inside the
// tunnel ourselves (raw header checks before parsing, P8), and send it
// upstream with our own http.Transport (P5) over our own dialer (P3). goproxy's
// MITM, its CA and its transport are never used: they cannot do the SNI/Host
// agreement check (P2), terminate h2 (P7) or fail closed on every refusal.
//
// It must never: forward a request it could not fully substitute, forward
// plain http, dial an address it did not vet, put a secret (or a token or a
// host) into a log attribute, an error message or a metric label, or import
// playwright or the MCP SDK.
package intercept
