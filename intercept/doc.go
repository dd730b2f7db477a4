// Package intercept is the MITM egress proxy: the only package that imports
// goproxy. It owns the deployment's MITM CA and its leaf cache, proxy
// sessions and their bindings (stand-in or token → vault item, field and
// destinations), the control API server, the HTTPS-only rules, the SSRF-safe
// dialer, the HTTP/1.1 and HTTP/2 request path inside a tunnel, the limits
// and the metrics.
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
