package intercept

import (
	"context"
	"net/http"
	"net/url"
	"sync"

	"github.com/agentvault/agentvault"
	"github.com/agentvault/agentvault/broker"
	"github.com/agentvault/agentvault/intercept/rewrite"
	"github.com/agentvault/agentvault/tokens"
	"github.com/agentvault/agentvault/vault"
)

// substitution is one request's substitution state: each grant hit is
// released once through the broker (which checks it against the effective
// destination and the owner's current state, and audits it).
type substitution struct {
	ctx   context.Context
	srv   *Server
	sess  *broker.Session
	dest  Destination
	use   *broker.Use
	reals map[*broker.Grant][]byte
	// grouped are real numbers written in groups for a grouped stand-in.
	grouped [][]byte
	count   int
	kinds   []vault.Kind
	// wire reads the request's fields for the broker's wire amount check
	// (wirefields.go).
	wire wireRequest
}

func (sb *substitution) wipe() {
	for _, r := range sb.reals {
		clear(r)
	}
	for _, r := range sb.grouped {
		clear(r)
	}
}

// keep remembers the value released for b for the rest of the request
// (wiped with it). The map is made on first use: most requests release
// nothing.
func (sb *substitution) keep(b *broker.Grant, raw []byte) {
	if sb.reals == nil {
		sb.reals = map[*broker.Grant][]byte{}
	}
	if old, ok := sb.reals[b]; ok {
		clear(old)
	}
	sb.reals[b] = raw
}

// resolve releases the real value for b through the broker, once per
// request. A WebSocket message is decided afresh each time, so a revoke or
// a spent grant ends an open connection's use of the value too.
func (sb *substitution) resolve(b *broker.Grant) ([]byte, error) {
	if r, ok := sb.reals[b]; ok && !sb.use.WS {
		return r, nil
	}
	var wire broker.WireFields // a WebSocket message: no fields (the request's were read)
	if !sb.use.WS {
		wire = sb.wire.read
	}
	raw, err := sb.srv.broker.Release(sb.ctx, sb.use, b, sb.dest, wire)
	if err != nil {
		return nil, err
	}
	sb.keep(b, raw)
	sb.kinds = append(sb.kinds, b.Item().Kind)
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
		if p.sep != 0 && len(real) == len(p.b.StandIn()) {
			g := group(real, p.groups, p.sep)
			sb.grouped = append(sb.grouped, g)
			return g, nil
		}
		return real, nil
	})
	return checkedReplacer{tr}
}

// checkedReplacer refuses a field or text that still holds a mock token
// after replacement: a token the session never authorized.
type checkedReplacer struct {
	r *tokens.Replacer
}

func (c checkedReplacer) ReplaceField(dst, src []byte) ([]byte, int, error) {
	out, n, err := c.r.ReplaceField(dst, src)
	return refuseLeftToken(len(dst), out, n, err)
}

// refuseLeftToken is the check of both: what a replacement appended to dst
// (from n0 on) must hold no token shape.
func refuseLeftToken(n0 int, out []byte, n int, err error) ([]byte, int, error) {
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
	out, n, err := c.r.ReplaceText(dst, src)
	return refuseLeftToken(len(dst), out, n, err)
}

// substituteRequest rewrites req's URL, headers and body (P9) through
// package rewrite, which decodes each field (path segment, query value,
// form value, JSON string, multipart part, Basic credentials, cookie) and
// puts the real value back in the same encoding. body is the request body
// as received (encoded); the rewritten body is returned. Nothing is
// forwarded when this fails.
func (s *Server) substituteRequest(ctx context.Context, sess *broker.Session, dest Destination, req *http.Request, body []byte) ([]byte, *substitution, error) {
	rm := s.matchers(sess)
	sb := &substitution{ctx: ctx, srv: s, sess: sess, dest: dest, use: sess.NewUse(), wire: s.requestWire(req, body)}
	r := sb.replacer(rm)
	if _, err := rewrite.URL(req.URL, r); err != nil {
		return nil, sb, err
	}
	if _, err := rewrite.Header(req.Header, r); err != nil {
		return nil, sb, err
	}
	out, err := s.substituteBody(rm, req, body, r)
	if err != nil {
		return nil, sb, err
	}
	return out, sb, nil
}

// substituteBody rewrites the request body (as received, encoded) with r
// and runs the hidden-value check on the request going upstream (its URL
// and headers, already rewritten, and the new body), which it returns.
func (s *Server) substituteBody(rm *requestMatch, req *http.Request, body []byte, r rewrite.Replacer) ([]byte, error) {
	out, view := body, body
	if ct, ce := req.Header.Get("Content-Type"), req.Header.Get("Content-Encoding"); len(body) > 0 && rm.holdsNothing(ct, ce, body) {
		view = nil // nothing for the rewrite or the hidden-value check to find in it
	} else if len(body) > 0 {
		// The body is rewritten over itself where the replacements keep
		// its length (no second 1 MiB buffer for a stand-in in a large
		// JSON body), except a GET's: forward hands a GET's body, as
		// received, to the TOTP capture.
		rw := rewrite.BodyInPlace
		if req.Method == http.MethodGet {
			rw = rewrite.Body
		}
		var err error
		if out, _, err = rw(ct, ce, body, r, s.cfg.MaxBodyBytes); err != nil {
			return nil, err
		}
		view = out
	}
	if err := s.hiddenValues(rm, req, view); err != nil {
		return nil, err
	}
	return out, nil
}

// hiddenValues refuses a request that still carries a token or a long
// stand-in somewhere package rewrite could not rewrite in place (an
// encoding it treats as opaque): a mock value never goes upstream.
func (s *Server) hiddenValues(rm *requestMatch, req *http.Request, body []byte) error {
	// The URL and the header lines go in one buffer, a line each: no token
	// or stand-in holds a line break, so none can span two of them, and
	// one scan of each view replaces one per header.
	// The buffer is pooled, and wiped before it goes back: it holds the
	// request as it goes upstream, real values included.
	ep := req.URL.EscapedPath()
	mp := metaBufs.Get().(*[]byte)
	meta := append((*mp)[:0], ep...)
	defer func() {
		clear(meta)
		if cap(meta) <= maxMetaPooled {
			*mp = meta[:0]
			metaBufs.Put(mp)
		}
	}()
	meta = append(append(meta, '\n'), req.URL.RawQuery...)
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
	if hiddenClean(rm, views) {
		return nil
	}
	// Something is there: the checks one view and one piece at a time
	// name what was found first.
	var err error
	check := func(v []byte) bool {
		if containsTokenShape(v) {
			err = errTokenNotAllowed()
		} else if rm.long.Contains(v) {
			err = agentvault.Errorf(agentvault.CodeSubstitution, "a value could not be substituted where it sits")
		}
		return err == nil
	}
	for _, v := range views {
		if !check(v) {
			return err
		}
	}
	// The decoded views (a base64 one built in a reused buffer, its runs
	// joined by a line break, which neither a token nor a stand-in holds).
	for _, v := range views {
		if !rewrite.EachEncodedView(v, check) {
			return err
		}
	}
	return nil
}

var metaBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxMetaPooled is the largest hiddenValues buffer kept for reuse: a
// request with a header block near the limit gets a buffer of its own.
const maxMetaPooled = 16 << 10

// hiddenClean reports whether the checks of hiddenValues would find nothing
// in views and their encoded views, in fewer scans: a small request's
// views are dozens of short pieces (a base64 run of each header value at
// four offsets), and a scan has a cost of its own beyond its length (issue
// 12). Each view up to joinViewMax goes, with its encoded views' pieces,
// in one buffer, a line each, scanned once; a longer one is scanned piece
// by piece as before. A line break is in neither a token (nor its shape)
// nor a stand-in, so whatever a piece holds is found in the buffer; a
// match across two lines would only send hiddenValues to its own checks.
func hiddenClean(rm *requestMatch, views [][]byte) bool {
	clean := func(v []byte) bool { return !containsTokenShape(v) && !rm.long.Contains(v) }
	jp := joinBufs.Get().(*[]byte)
	j := (*jp)[:0]
	defer func() {
		clear(j) // pieces of the request as it goes upstream, real values included
		if cap(j) <= maxJoinPooled {
			*jp = j[:0]
			joinBufs.Put(jp)
		}
	}()
	// A large text none of whose base64 views can hold a value (no
	// fragment of one in it, rm.mayHideBase64) is not decoded as base64:
	// the check is a scan or two, not five. A small one is decoded: that
	// costs less than the prefilter's matcher.
	for _, v := range views {
		if len(v) > joinViewMax {
			// One scan of v for the prefilter answers for its long values
			// too (rm.hide holds them): a text the prefilter finds nothing
			// in is not scanned for them again, nor again for itself.
			hideV := rm.mayHideBase64(v)
			mayHide := func(b []byte) bool {
				if len(b) == len(v) && &b[0] == &v[0] {
					return hideV
				}
				return rm.mayHideBase64(b)
			}
			if containsTokenShape(v) || hideV && rm.long.Contains(v) || !rewrite.EachEncodedViewIf(v, mayHide, clean) {
				return false
			}
			continue
		}
		j = append(append(j, v...), '\n')
		rewrite.EachEncodedView(v, func(p []byte) bool {
			j = append(append(j, p...), '\n')
			return true
		})
	}
	return clean(j)
}

var joinBufs = sync.Pool{New: func() any { b := make([]byte, 0, 8192); return &b }}

const (
	joinViewMax   = 16 << 10
	maxJoinPooled = 128 << 10
)
