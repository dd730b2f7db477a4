// Package rewrite swaps values inside HTTP messages the proxy has already read:
// the URL (path segments and query), headers (including Basic credentials and
// cookies), bodies by media type (form, JSON, multipart, text) under any stack
// of Content-Encodings, and WebSocket frames. What to swap is decided by a
// Replacer the caller passes in (tokens.Replacer for requests, a scrubbing
// replacer for responses); this package only knows where values live in each
// format and how to put a changed value back without disturbing the bytes
// around it. A Replacer that is also a FieldVisitor is told every field
// a walk offers it, with its name path: the one parse of a request body,
// which the wire amount check reads instead of parsing again.
//
// It must never touch the network, import goproxy, log, or keep any value it
// sees. Every function fails closed: when a message cannot be parsed well
// enough to be sure every value was visited, it returns a coded error and the
// caller refuses the message; it never returns a half-rewritten one. Errors
// carry lengths and positions at most, never the bytes being rewritten.
package rewrite
