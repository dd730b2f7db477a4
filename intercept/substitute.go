package intercept

import (
	"bytes"
	"context"
	"encoding/base64"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/vault"
)

// wireContext says how a real value must be encoded where it is inserted.
type wireContext int

const (
	ctxRaw wireContext = iota
	ctxQuery
	ctxPath
	ctxJSON
)

// substitution is one request's substitution state: each binding hit is
// checked against the effective destination and released once (audited).
type substitution struct {
	ctx   context.Context
	srv   *Server
	sess  *Session
	dest  Destination
	reals map[*binding][]byte
	count int
	kinds []vault.Kind
}

func (sb *substitution) wipe() {
	for _, r := range sb.reals {
		clear(r)
	}
}

// resolve checks scope (P2) and releases the real value for b (P12).
func (sb *substitution) resolve(b *binding) ([]byte, error) {
	if r, ok := sb.reals[b]; ok {
		return r, nil
	}
	if !slices.Contains(b.hosts, sb.dest.Host) {
		return nil, agentvault.Errorf(agentvault.CodeDestinationUnauthorized, "this token is not authorized for this destination")
	}
	if !ScopeAdmits(b.item, sb.dest.Host) {
		return nil, agentvault.Errorf(agentvault.CodeScopeDenied, "this item may not be used on this destination")
	}
	sec, err := sb.srv.sessions.Vault.Release(sb.ctx, ReleaseArgs{
		Org: sb.sess.Key.Org, ItemID: b.item.ID, Field: b.field, Destination: sb.dest.Host,
		Session: sb.sess.ID, Actor: sb.sess.Key.ID, Purpose: PurposeSubstitute,
	})
	if err != nil {
		if agentvault.ErrorCode(err) == agentvault.CodeInternal {
			return nil, agentvault.Wrap(agentvault.CodeAuditUnavailable, err, "the release could not be audited")
		}
		return nil, err
	}
	raw := append([]byte(nil), sec.InsecureRawBytes()...)
	sec.Wipe()
	sb.reals[b] = raw
	sb.kinds = append(sb.kinds, b.item.Kind)
	return raw, nil
}

// hitFunc returns the replacement callback for a wire context.
func (sb *substitution) hitFunc(wc wireContext) func(*pair) ([]byte, error) {
	return func(p *pair) ([]byte, error) {
		real, err := sb.resolve(p.ref)
		if err != nil {
			return nil, err
		}
		sb.count++
		enc := int(p.to[0])
		if enc == 0 { // matched the raw form: encode for where it sits
			switch wc {
			case ctxQuery:
				enc = 1
			case ctxPath:
				enc = 2
			case ctxJSON:
				enc = 3
			}
		}
		return []byte(requestEncodings[enc](string(real))), nil
	}
}

// substituteRequest rewrites req's URL, headers and body in place. body is
// the full (encoded) request body; the rewritten body is returned. Nothing
// of the request is forwarded when it fails.
func (s *Server) substituteRequest(ctx context.Context, sess *Session, dest Destination, req *http.Request, body []byte) ([]byte, *substitution, error) {
	repl, _ := sess.replacers()
	sb := &substitution{ctx: ctx, srv: s, sess: sess, dest: dest, reals: map[*binding][]byte{}}

	// URL path and query.
	if p := req.URL.EscapedPath(); p != "" {
		np, _, err := repl.apply([]byte(p), sb.hitFunc(ctxPath))
		if err != nil {
			return nil, sb, err
		}
		if string(np) != p {
			dec, err := url.PathUnescape(string(np))
			if err != nil {
				return nil, sb, agentvault.Errorf(agentvault.CodeSubstitution, "path does not decode after substitution")
			}
			req.URL.Path, req.URL.RawPath = dec, string(np)
		}
	}
	nq, _, err := repl.apply([]byte(req.URL.RawQuery), sb.hitFunc(ctxQuery))
	if err != nil {
		return nil, sb, err
	}
	req.URL.RawQuery = string(nq)
	if containsTokenShape([]byte(req.URL.RawPath)) || containsTokenShape([]byte(req.URL.Path)) || containsTokenShape(nq) {
		return nil, sb, errTokenNotAllowed()
	}
	if uq, err := url.QueryUnescape(req.URL.RawQuery); err == nil && containsTokenShape([]byte(uq)) {
		return nil, sb, errTokenNotAllowed()
	}

	// Headers, Basic credentials decoded.
	for name, vals := range req.Header {
		for i, v := range vals {
			nv, err := sb.header(repl, name, v)
			if err != nil {
				return nil, sb, err
			}
			vals[i] = nv
		}
	}

	// Body, decoded.
	if len(body) == 0 {
		return body, sb, nil
	}
	coding, err := contentEncoding(req.Header)
	if err != nil {
		return nil, sb, err
	}
	plain, err := decodeAll(coding, body, s.cfg.MaxBodyBytes)
	if err != nil {
		return nil, sb, err
	}
	wc := ctxRaw
	if mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type")); err == nil {
		switch {
		case mt == "application/x-www-form-urlencoded":
			wc = ctxQuery
		case mt == "application/json" || strings.HasSuffix(mt, "+json"):
			wc = ctxJSON
		}
	}
	out, n, err := repl.apply(plain, sb.hitFunc(wc))
	if err != nil {
		return nil, sb, err
	}
	if containsTokenShape(out) {
		return nil, sb, errTokenNotAllowed()
	}
	if wc == ctxQuery && bytes.IndexByte(out, '%') >= 0 {
		if u, err := url.QueryUnescape(string(out)); err == nil && containsTokenShape([]byte(u)) {
			return nil, sb, errTokenNotAllowed()
		}
	}
	if n == 0 {
		return body, sb, nil
	}
	enc, err := encodeAll(coding, out)
	if err != nil {
		return nil, sb, err
	}
	return enc, sb, nil
}

func (sb *substitution) header(repl *replacer, name, v string) (string, error) {
	nv, _, err := repl.apply([]byte(v), sb.hitFunc(ctxRaw))
	if err != nil {
		return "", err
	}
	out := string(nv)
	if (name == "Authorization" || name == "Proxy-Authorization") && len(out) > 6 && strings.EqualFold(out[:6], "basic ") {
		dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(out[6:]))
		if err == nil {
			nd, n, err := repl.apply(dec, sb.hitFunc(ctxRaw))
			if err != nil {
				return "", err
			}
			if containsTokenShape(nd) {
				return "", errTokenNotAllowed()
			}
			if n > 0 {
				out = out[:6] + base64.StdEncoding.EncodeToString(nd)
			}
		}
	}
	if strings.ContainsAny(out, "\r\n\x00") {
		return "", agentvault.Errorf(agentvault.CodeSubstitution, "a substituted header value is not valid")
	}
	if containsTokenShape([]byte(out)) {
		return "", errTokenNotAllowed()
	}
	if u, err := url.QueryUnescape(out); err == nil && containsTokenShape([]byte(u)) {
		return "", errTokenNotAllowed()
	}
	return out, nil
}
