package rewrite

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"

	agentvault "github.com/agentvault/agentvault"
)

// Header rewrites every header value in place:
//   - Authorization: Basic: the base64 user:pass is decoded, each half
//     rewritten as a field, and re-encoded in the same base64 form;
//   - Cookie: each cookie's value is a field (names are searched as text);
//   - Set-Cookie: the cookie value is a field, its attributes text;
//   - Location, Content-Location, Referer, Origin: rewritten as URLs;
//   - framing and negotiation headers (Content-Length, Content-Encoding, ...):
//     searched as text only, so a short number there is never taken for a CVV;
//   - anything else: the whole value is one field.
//
// Hop-by-hop headers are the proxy's business: it must strip them (and
// anything Connection names) before or after calling Header.
func Header(h http.Header, r Replacer) (int, error) {
	r, sr := withScratch(r)
	defer sr.release()
	type change struct {
		name string
		i    int
		val  string
	}
	var changed []change
	total := 0
	for name, vals := range h {
		if _, n, err := text(r, []byte(name)); err != nil || n > 0 {
			if err != nil {
				return 0, err
			}
			// No site names a header after a secret; renaming one would
			// only hide it from the proxy's hop-by-hop handling.
			return 0, agentvault.Errorf(agentvault.CodeSubstitution, "a header name holds a value to replace")
		}
		for i, v := range vals {
			rep, n, err := headerValue(name, []byte(v), r)
			if err != nil {
				return 0, err
			}
			if n > 0 {
				if bytes.ContainsAny(rep, "\r\n\x00") {
					// A value with a line break would split the header
					// (RFC 9110 section 5.5): never forward it.
					return 0, agentvault.Errorf(agentvault.CodeSubstitution, "replacement does not fit in a header value")
				}
				changed = append(changed, change{name, i, string(rep)})
				total += n
			}
		}
	}
	// Apply only once every value was rewritten, so a refusal leaves h as
	// it was.
	for _, c := range changed {
		h[c.name][c.i] = c.val
	}
	return total, nil
}

// textOnlyHeaders carry framing or negotiation, never a typed value; they are
// searched as free text so a token is still caught.
var textOnlyHeaders = map[string]bool{
	"Content-Length": true, "Content-Encoding": true, "Content-Type": true,
	"Transfer-Encoding": true, "Content-Range": true, "Range": true,
	"Date": true, "Age": true, "Expires": true, "Last-Modified": true,
	"If-Modified-Since": true, "If-Unmodified-Since": true, "Max-Forwards": true,
	"Accept": true, "Accept-Encoding": true, "Accept-Language": true,
	"Cache-Control": true, "Connection": true, "Keep-Alive": true,
	"Upgrade": true, "Te": true, "Trailer": true, "Host": true,
	"Sec-Websocket-Version": true, "Sec-Websocket-Key": true, "Sec-Websocket-Accept": true,
}

func headerValue(name string, v []byte, r Replacer) ([]byte, int, error) {
	switch name = http.CanonicalHeaderKey(name); {
	case name == "Authorization":
		return authorization(v, r)
	case name == "Cookie":
		return cookies(v, r)
	case name == "Set-Cookie":
		return setCookie(v, r)
	case name == "Location" || name == "Content-Location" || name == "Referer" || name == "Origin":
		return urlValue(v, r)
	case textOnlyHeaders[name]:
		return text(r, v)
	}
	return field(r, v)
}

func authorization(v []byte, r Replacer) ([]byte, int, error) {
	sp := bytes.IndexByte(v, ' ')
	if sp < 0 || !strings.EqualFold(string(v[:sp]), "basic") {
		return field(r, v)
	}
	cred := bytes.TrimSpace(v[sp+1:])
	enc := base64.StdEncoding
	if len(cred)%4 != 0 {
		enc = base64.RawStdEncoding // some clients drop the padding
	}
	dec, err := enc.DecodeString(string(cred))
	if err != nil {
		// Not valid base64: search what is there.
		return field(r, v)
	}
	user, pass, hasPass := bytes.Cut(dec, []byte(":"))
	nu, n1, err := field(r, user)
	if err != nil {
		return nil, 0, err
	}
	np, n2 := pass, 0
	if hasPass {
		if np, n2, err = field(r, pass); err != nil {
			return nil, 0, err
		}
	}
	if n1+n2 == 0 {
		return v, 0, nil
	}
	plain := append(append([]byte{}, nu...), ':')
	if !hasPass {
		plain = plain[:len(plain)-1]
	}
	plain = append(plain, np...)
	out := append([]byte{}, v[:sp+1]...)
	out = append(out, enc.EncodeToString(plain)...)
	return out, n1 + n2, nil
}

// cookies rewrites a Cookie request header: "a=1; b=2". A value may be
// double-quoted (RFC 6265 cookie-value); the quotes stay.
func cookies(v []byte, r Replacer) ([]byte, int, error) {
	var out []byte
	total, last := 0, 0
	splice := func(start, end int, rep []byte) {
		out = append(out, v[last:start]...)
		out = append(out, rep...)
		last = end
	}
	for start := 0; start < len(v); {
		end := bytes.IndexByte(v[start:], ';')
		if end < 0 {
			end = len(v)
		} else {
			end += start
		}
		n, err := cookiePair(v, start, end, r, splice)
		if err != nil {
			return nil, 0, err
		}
		total += n
		start = end + 1
	}
	if total == 0 {
		return v, 0, nil
	}
	return append(out, v[last:]...), total, nil
}

// cookiePair rewrites the name (as text) and value (as a field) of the pair
// v[start:end].
func cookiePair(v []byte, start, end int, r Replacer, splice func(int, int, []byte)) (int, error) {
	pair := v[start:end]
	eq := bytes.IndexByte(pair, '=')
	if eq < 0 {
		rep, n, err := text(r, pair)
		if n > 0 {
			splice(start, end, rep)
		}
		return n, err
	}
	total := 0
	rep, n, err := text(r, pair[:eq])
	if err != nil {
		return 0, err
	}
	if n > 0 {
		splice(start, start+eq, rep)
		total += n
	}
	vs, ve := start+eq+1, end
	for vs < ve && v[vs] == ' ' {
		vs++
	}
	for ve > vs && v[ve-1] == ' ' {
		ve--
	}
	quoted := ve-vs >= 2 && v[vs] == '"' && v[ve-1] == '"'
	if quoted {
		vs, ve = vs+1, ve-1
	}
	if vs == ve {
		return total, nil
	}
	val := v[vs:ve]
	rep, n, err = field(r, val)
	if err != nil {
		return 0, err
	}
	if n == 0 && bytes.IndexByte(val, '%') >= 0 {
		// Scripts often store cookie values URL-encoded.
		if rep, n, err = field(r, percentDecode(val, false)); err != nil {
			return 0, err
		}
		if n > 0 {
			rep = []byte(url.QueryEscape(string(rep)))
		}
	}
	if n > 0 && (bytes.IndexByte(rep, ';') >= 0 || quoted && bytes.IndexByte(rep, '"') >= 0) {
		// Would split the cookie in two (RFC 6265 section 4.2.1).
		return 0, agentvault.Errorf(agentvault.CodeSubstitution, "replacement does not fit in a cookie value")
	}
	if n > 0 {
		splice(vs, ve, rep)
		total += n
	}
	return total, nil
}

// setCookie rewrites "name=value; Path=/; ...": the pair as in Cookie, the
// attributes as text.
func setCookie(v []byte, r Replacer) ([]byte, int, error) {
	var out []byte
	last := 0
	splice := func(start, end int, rep []byte) {
		out = append(out, v[last:start]...)
		out = append(out, rep...)
		last = end
	}
	end := bytes.IndexByte(v, ';')
	if end < 0 {
		end = len(v)
	}
	total, err := cookiePair(v, 0, end, r, splice)
	if err != nil {
		return nil, 0, err
	}
	if end < len(v) {
		rep, n, err := text(r, v[end:])
		if err != nil {
			return nil, 0, err
		}
		if n > 0 {
			splice(end, len(v), rep)
			total += n
		}
	}
	if total == 0 {
		return v, 0, nil
	}
	return append(out, v[last:]...), total, nil
}

func urlValue(v []byte, r Replacer) ([]byte, int, error) {
	u, err := url.Parse(string(v))
	if err != nil {
		return field(r, v)
	}
	n, err := URL(u, r)
	if err != nil {
		return nil, 0, err
	}
	if n == 0 {
		// Parts URL does not visit (host, fragment) are searched as text.
		return text(r, v)
	}
	out := []byte(u.String())
	rep, m, err := text(r, out)
	if err != nil {
		return nil, 0, err
	}
	return rep, n + m, nil
}
