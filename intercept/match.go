package intercept

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/agentvault/agentvault/broker"
	"github.com/agentvault/agentvault/intercept/rewrite"
	"github.com/agentvault/agentvault/tokens"
	"github.com/agentvault/agentvault/vault"
)

// wholeFieldLen is the length under which a token or stand-in (a CVV, a
// TOTP code) only matches as a whole field or between delimiters.
const wholeFieldLen = 7

// requestMatch is a session's request-side matcher: every token and
// stand-in, and a card stand-in grouped as a card field displays it; each
// pattern's ID indexes pats. long holds only the long values, for the
// hidden-value check over decoded views; hide what a text shows when it, or
// a base64 view of it, holds one of them or a token's "av_" in any case
// (rewrite.Base64Fragments): a text without any is not decoded as base64.
type requestMatch struct {
	*valueMatch
	pats []reqPattern
}

// valueMatch is the part of a requestMatch built from the values alone: a
// new set of grants showing the same values in the same order (a
// purchase's authorize renews its grant and bumps the session's version,
// the token and stand-in stay) keeps it, with pats naming the new grants.
type valueMatch struct {
	vals    []string
	m, long *tokens.Matcher
	// hide and short are built on first use (a large body): most
	// requests carry no large body. short holds the short (whole-field)
	// values, matched anywhere.
	hide, short *tokens.Matcher
	hideOnce    sync.Once
	longVals    []tokens.Pattern // what long was built from
	shortVals   []tokens.Pattern
}

func (rm *requestMatch) prefilters() {
	rm.hideOnce.Do(func() {
		if rm.hide == nil {
			rm.hide = hidePrefilter(rm.longVals)
		}
		if rm.short == nil {
			var pats []tokens.Pattern
			for _, p := range rm.shortVals {
				pats = append(pats, tokens.Pattern{Value: p.Value, ID: len(pats)})
			}
			rm.short = tokens.NewMatcher(pats)
		}
	})
}

// mayHideBase64 is the hidden-value check's mayHide (rewrite.EachEncodedViewIf):
// false only when no base64 view of b can hold a token's shape or a long
// value (containsTokenShape needs "av_", in any case).
func (rm *requestMatch) mayHideBase64(b []byte) bool {
	rm.prefilters()
	return rm.hide.Contains(b)
}

// holdsNothing reports whether a large request body certainly holds nothing
// of the session: no token or stand-in, long or short, anywhere, no token
// shape, and none in a base64 view, and it is read as its bytes stand
// (rewrite.Literal). Then the body's rewrite would find nothing to replace
// or refuse (every field it offers is a run of the body) and hiddenValues
// nothing in the body's views: both are skipped, and the body costs a few
// vectorised scans. A small body goes the whole way: that costs less than
// building the prefilters. The prefilter goes first: it stops at the first
// value, so a body that carries one (which then goes the whole way) pays
// little for the question.
func (rm *requestMatch) holdsNothing(contentType, contentEncoding string, b []byte) bool {
	if len(b) <= joinViewMax {
		return false
	}
	rm.prefilters()
	return !rm.hide.Contains(b) && !rm.short.Contains(b) && !containsTokenShape(b) && rewrite.Literal(contentType, contentEncoding, b)
}

// hidePrefilter is requestMatch.hide for the long values long: each of
// them, the Base64Fragments of each, and of every start of a token's
// shape. (A text holding a long value fails the hidden-value check before
// its base64 views are asked for.)
func hidePrefilter(long []tokens.Pattern) *tokens.Matcher {
	var frags []tokens.Pattern
	add := func(v []byte) {
		frags = append(frags, tokens.Pattern{Value: v, ID: len(frags)})
	}
	for _, h := range tokenShapeHeads {
		for _, f := range rewrite.Base64Fragments([]byte(h)) {
			add(f)
		}
	}
	for _, p := range long {
		add(p.Value)
		for _, f := range rewrite.Base64Fragments(p.Value) {
			add(f)
		}
	}
	return tokens.NewMatcher(frags)
}

// tokenShapeHeads are the starts of every token shape (containsTokenShape
// reads "av" in any case before the '_').
var tokenShapeHeads = []string{"av_", "aV_", "Av_", "AV_"}

// reqPattern is what one request pattern stands for: a grant, and for a
// grouped card number the separator and group sizes to give the real value.
type reqPattern struct {
	b      *broker.Grant
	sep    byte
	groups []int
}

// cardGroups is how card fields group a number of n digits for display:
// 4-6-5 for 15 digits (American Express), else fours with the rest last.
func cardGroups(n int) []int {
	if n == 15 {
		return []int{4, 6, 5}
	}
	var g []int
	for ; n > 4; n -= 4 {
		g = append(g, 4)
	}
	return append(g, n)
}

// group writes digits in groups separated by sep.
func group(digits []byte, groups []int, sep byte) []byte {
	out := make([]byte, 0, len(digits)+len(groups))
	for i, n := range groups {
		if i > 0 {
			out = append(out, sep)
		}
		out = append(out, digits[:n]...)
		digits = digits[n:]
	}
	return out
}

// newRequestMatch builds a session's request matcher from its grants,
// keeping old's value matchers when the grants show the same values.
func newRequestMatch(old *requestMatch, grants []*broker.Grant) *requestMatch {
	// The broker lists grants in no set order: by token, the same grants
	// give the same values in the same order.
	grants = slices.SortedFunc(slices.Values(grants), func(a, b *broker.Grant) int { return strings.Compare(a.Token(), b.Token()) })
	var vals []string
	var ps []reqPattern
	for _, b := range grants {
		for _, n := range []string{b.Token(), b.StandIn()} {
			if n != "" {
				vals, ps = append(vals, n), append(ps, reqPattern{b: b})
			}
		}
		if si := b.StandIn(); b.Item().Kind == vault.KindCard && b.Field() == vault.FieldNumber && len(si) >= 12 {
			// The stand-in as a card field shows it: "4242 4276 7384 4242".
			g := cardGroups(len(si))
			for _, sep := range []byte{' ', '-'} {
				vals, ps = append(vals, string(group([]byte(si), g, sep))), append(ps, reqPattern{b: b, sep: sep, groups: g})
			}
		}
	}
	if old != nil && slices.Equal(old.vals, vals) {
		return &requestMatch{valueMatch: old.valueMatch, pats: ps}
	}
	return requestMatchOf(vals, ps)
}

// requestMatchOf is the request matcher of the values vals, each standing
// for the pattern of the same index in ps.
func requestMatchOf(vals []string, ps []reqPattern) *requestMatch {
	rm := &requestMatch{valueMatch: &valueMatch{vals: vals}, pats: ps}
	var pats, long []tokens.Pattern
	for i, v := range vals {
		tp := tokens.Pattern{Value: []byte(v), ID: i, WholeField: len(v) < wholeFieldLen}
		pats = append(pats, tp)
		if tp.WholeField {
			rm.shortVals = append(rm.shortVals, tp)
		} else {
			long = append(long, tp)
		}
	}
	rm.m, rm.long, rm.longVals = tokens.NewMatcher(pats), tokens.NewMatcher(long), long
	return rm
}

// sessionCache is what the proxy builds from a session's grants and
// recipients, rebuilt when the broker's versions change.
type sessionCache struct {
	mu     sync.Mutex
	ver    int
	rm     *requestMatch
	scrubs map[string]hostScrub
}

// hostScrub is a session's scrubber for one upstream host.
type hostScrub struct {
	key broker.ScrubKey
	sc  *scrubber
	rel []released // what sc was built from
}

// sameReleased reports whether a and b list the same values with the same
// stand-ins and kinds, in the same order: a scrubber built from one is the
// scrubber of the other.
func sameReleased(a, b []released) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].kind != b[i].kind || a[i].standIn != b[i].standIn || !a[i].real.Equal(b[i].real) {
			return false
		}
	}
	return true
}

func (s *Server) cache(sess *broker.Session) *sessionCache {
	if c, ok := s.caches.Load(sess); ok {
		return c.(*sessionCache)
	}
	c, _ := s.caches.LoadOrStore(sess, &sessionCache{})
	return c.(*sessionCache)
}

// matchers returns the session's request matcher, rebuilt only when its
// grants changed.
func (s *Server) matchers(sess *broker.Session) *requestMatch {
	c := s.cache(sess)
	ver, grants := sess.Grants()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rm == nil || c.ver != ver {
		c.rm, c.ver = newRequestMatch(c.rm, grants), ver
	}
	return c.rm
}

// scrubberFor returns the scrubber for responses from host in sess: the
// values the broker says that host was sent (P10, no oracle); nil when
// there are none, so the response passes byte for byte.
func (s *Server) scrubberFor(ctx context.Context, sess *broker.Session, host string) *scrubber {
	c := s.cache(sess)
	key := s.broker.ScrubKey(ctx, sess)
	c.mu.Lock()
	old, had := c.scrubs[host]
	c.mu.Unlock()
	if had && old.key == key {
		return old.sc
	}
	var rel []released
	for _, v := range s.broker.ScrubSet(ctx, sess, host) {
		rel = append(rel, released{real: v.Real, standIn: v.StandIn, kind: v.Kind})
	}
	// A new grant changes the key but mostly not the set (the next
	// purchase with the same card): building the scrubber's variants and
	// matcher again cost 7% of a purchase.
	sc := old.sc
	if !had || !sameReleased(old.rel, rel) {
		sc = newScrubber(rel)
	}
	c.mu.Lock()
	if c.scrubs == nil {
		c.scrubs = map[string]hostScrub{}
	}
	c.scrubs[host] = hostScrub{key: key, sc: sc, rel: rel}
	c.mu.Unlock()
	return sc
}

// released is a real value with the stand-in a session shows for it.
type released struct {
	real    vault.Secret
	standIn string
	kind    vault.Kind
}
