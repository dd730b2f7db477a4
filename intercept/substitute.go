package intercept

import (
	"context"
	"net/http"
	"net/url"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/intercept/rewrite"
	"github.com/agentvault/agentvault/tokens"
	"github.com/agentvault/agentvault/vault"
)

// substitution is one request's substitution state: each grant hit is
// checked against the effective destination and the owner's current state,
// and released once (audited).
type substitution struct {
	ctx   context.Context
	srv   *Server
	sess  *Session
	dest  Destination
	reals map[*binding][]byte
	count int
	kinds []vault.Kind
	// held are the one-purchase grants this request holds in flight; done
	// settles them from the site's answer.
	held []*binding
	// ws: the request became a WebSocket; its messages are substituted
	// with this state for the connection's life.
	ws bool
}

func (sb *substitution) wipe() {
	for _, r := range sb.reals {
		clear(r)
	}
}

// keep remembers the value released for b for the rest of the request
// (wiped with it). The map is made on first use: most requests release
// nothing.
func (sb *substitution) keep(b *binding, raw []byte) {
	if sb.reals == nil {
		sb.reals = map[*binding][]byte{}
	}
	if old, ok := sb.reals[b]; ok {
		clear(old)
	}
	sb.reals[b] = raw
}

// done settles the grants the request used: a site that accepted the
// request (2xx or 3xx) spent each card grant on it; any other answer, or
// none, leaves the grant for a retry until it expires (P21). status is 0
// when no answer came.
func (sb *substitution) done(status int) {
	if sb == nil || len(sb.held) == 0 {
		return
	}
	s := sb.sess
	s.mu.Lock()
	for _, b := range sb.held {
		b.inFlight = false
		if status >= 200 && status < 400 {
			b.spent = true
		}
	}
	s.mu.Unlock()
	sb.held = nil
}

// resolve checks the grant (P21: origin, expiry, use rule), the item's
// scope (P2) and the owner's current state, then releases the real value
// for b (P12) and records the destination as one of its recipients (P10).
func (sb *substitution) resolve(b *binding) ([]byte, error) {
	if r, ok := sb.reals[b]; ok && !sb.ws {
		return r, nil // one request: released once
	}
	// A WebSocket message is decided afresh each time, so a revoke or a
	// spent grant ends an open connection's use of the value too.
	ss := sb.srv.sessions
	if err := ss.useGrant(sb, b); err != nil {
		return nil, err
	}
	// The item as it is now: removed, or its sites edited, counts at once.
	item, err := ss.Vault.GetByLabel(sb.ctx, sb.sess.Key.Org, b.item.Kind, b.item.Label)
	if err != nil || item.ID != b.item.ID {
		return nil, agentvault.Errorf(agentvault.CodeDestinationUnauthorized, "this value is no longer in the vault")
	}
	if !ss.policy().ScopeAdmits(item, sb.dest.Host) {
		return nil, agentvault.Errorf(agentvault.CodeScopeDenied, "this item may not be used on this destination")
	}
	if ss.Recheck != nil {
		if err := ss.Recheck(sb.ctx, DecideArgs{Session: sb.sess.ID, Token: b.token, Key: sb.sess.Key, Item: item,
			Field: b.field, Destination: sb.dest.Host}); err != nil {
			return nil, err
		}
	}
	var raw []byte
	if b.live {
		v, ok := sb.sess.liveValue(b.item.ID, b.field)
		if !ok {
			return nil, agentvault.Errorf(agentvault.CodeSessionEnded, "the typed value is gone")
		}
		raw = append([]byte(nil), v.InsecureRawBytes()...)
	} else {
		sec, err := ss.Vault.Release(sb.ctx, ReleaseArgs{
			Org: sb.sess.Key.Org, ItemID: b.item.ID, Field: b.field, Destination: sb.dest.Host,
			Session: sb.sess.ID, Actor: sb.sess.Key.ID, Purpose: PurposeSubstitute,
		})
		if err != nil {
			if agentvault.ErrorCode(err) == agentvault.CodeInternal {
				return nil, agentvault.Wrap(agentvault.CodeAuditUnavailable, err, "the release could not be audited")
			}
			return nil, err
		}
		raw = append([]byte(nil), sec.InsecureRawBytes()...)
		sec.Wipe()
	}
	ss.recipients.add(b.item, b.field, sb.dest.Host, raw, b.live)
	sb.keep(b, raw)
	sb.kinds = append(sb.kinds, b.item.Kind)
	return raw, nil
}

// replacer returns the request-side rewrite.Replacer: tokens and stand-ins
// become the real value (raw: package rewrite encodes it for where it sits),
// and any token-shaped string left in a rewritten field is refused.
func (sb *substitution) replacer(rm *requestMatch) rewrite.Replacer {
	tr := tokens.NewReplacer(rm.m, func(id int) ([]byte, error) {
		p := rm.pats[id]
		real, err := sb.resolve(p.b)
		if err != nil {
			return nil, err
		}
		sb.count++
		if p.sep != 0 && len(real) == len(p.b.standIn) {
			return group(real, p.groups, p.sep), nil
		}
		return real, nil
	})
	return checkedReplacer{tr}
}

// checkedReplacer refuses a field or text that still holds a mock token
// after replacement: a token the session never authorized.
type checkedReplacer struct{ r *tokens.Replacer }

func (c checkedReplacer) ReplaceField(dst, src []byte) ([]byte, int, error) {
	n0 := len(dst)
	out, n, err := c.r.ReplaceField(dst, src)
	if err == nil && containsTokenShape(out[n0:]) {
		return nil, 0, errTokenNotAllowed()
	}
	return out, n, err
}

// Contains lets package rewrite skip copying a large field with nothing
// to replace; a token-shaped string counts, so the refusal still happens.
func (c checkedReplacer) Contains(src []byte) bool {
	return c.r.Contains(src) || containsTokenShape(src)
}

var _ rewrite.Container = checkedReplacer{}

func (c checkedReplacer) ReplaceText(dst, src []byte) ([]byte, int, error) {
	n0 := len(dst)
	out, n, err := c.r.ReplaceText(dst, src)
	if err == nil && containsTokenShape(out[n0:]) {
		return nil, 0, errTokenNotAllowed()
	}
	return out, n, err
}

// substituteRequest rewrites req's URL, headers and body (P9) through
// package rewrite, which decodes each field (path segment, query value,
// form value, JSON string, multipart part, Basic credentials, cookie) and
// puts the real value back in the same encoding. body is the request body
// as received (encoded); the rewritten body is returned. Nothing is
// forwarded when this fails.
func (s *Server) substituteRequest(ctx context.Context, sess *Session, dest Destination, req *http.Request, body []byte) ([]byte, *substitution, error) {
	rm := sess.matchers()
	sb := &substitution{ctx: ctx, srv: s, sess: sess, dest: dest}
	r := sb.replacer(rm)
	if _, err := rewrite.URL(req.URL, r); err != nil {
		return nil, sb, err
	}
	if _, err := rewrite.Header(req.Header, r); err != nil {
		return nil, sb, err
	}
	out := body
	if len(body) > 0 {
		var err error
		if out, _, err = rewrite.Body(req.Header.Get("Content-Type"), req.Header.Get("Content-Encoding"), body, r, s.cfg.MaxBodyBytes); err != nil {
			return nil, sb, err
		}
	}
	if err := s.hiddenValues(rm, req, out); err != nil {
		return nil, sb, err
	}
	// Live-value audit and wire amount check (wire_amount.go).
	if err := s.checkSubstituted(sb, req, body); err != nil {
		return nil, sb, err
	}
	return out, sb, nil
}

// hiddenValues refuses a request that still carries a token or a long
// stand-in somewhere package rewrite could not rewrite in place (an
// encoding it treats as opaque): a mock value never goes upstream.
func (s *Server) hiddenValues(rm *requestMatch, req *http.Request, body []byte) error {
	// The URL and the header lines go in one buffer, a line each: no token
	// or stand-in holds a line break, so none can span two of them, and
	// one scan of each view replaces one per header.
	ep := req.URL.EscapedPath()
	n := len(ep) + len(req.URL.RawQuery) + 2
	for name, vs := range req.Header {
		for _, v := range vs {
			n += len(name) + len(v) + 3
		}
	}
	meta := make([]byte, 0, 2*n)
	meta = append(append(append(meta, ep...), '\n'), req.URL.RawQuery...)
	if p, err := url.PathUnescape(ep); err == nil && p != ep {
		meta = append(append(meta, '\n'), p...)
	}
	for name, vs := range req.Header {
		for _, v := range vs {
			meta = append(append(append(append(meta, '\n'), name...), ": "...), v...)
		}
	}
	views := [][]byte{meta}
	if len(body) > 0 {
		plain, err := rewrite.Decode(req.Header.Get("Content-Encoding"), body, s.cfg.MaxBodyBytes)
		if err != nil {
			return err
		}
		views = append(views, plain)
	}
	for _, v := range views[:len(views):len(views)] {
		views = append(views, rewrite.EncodedViews(v)...)
	}
	for _, v := range views {
		if containsTokenShape(v) {
			return errTokenNotAllowed()
		}
		if rm.long.Contains(v) {
			return agentvault.Errorf(agentvault.CodeSubstitution, "a value could not be substituted where it sits")
		}
	}
	return nil
}
