package rewrite

import (
	"bytes"
	"errors"
	"sync"

	agentvault "github.com/agentvault/agentvault"
)

// Replacer swaps values. It is satisfied by *tokens.Replacer (requests:
// tokens and stand-ins to real values) and by the proxy's scrubber
// (responses: real values to stand-ins).
//
// Both methods append the rewritten src to dst and report how many values
// were replaced. ReplaceField gets one whole field value (a form value, a JSON
// string, a path segment), so a short value such as a CVV may match only the
// whole field; ReplaceText gets free text, where only values long enough to be
// unambiguous match.
type Replacer interface {
	ReplaceField(dst, src []byte) ([]byte, int, error)
	ReplaceText(dst, src []byte) ([]byte, int, error)
}

// Container is an optional Replacer method: Contains reports whether src
// holds anything ReplaceText or ReplaceField would replace or refuse (a
// false answer must be certain). *tokens.Replacer has it: a whole-field
// match is also a free-text match.
type Container interface {
	Contains(src []byte) bool
}

// DefaultLimit caps a decoded body when the caller passes a limit <= 0.
const DefaultLimit = 32 << 20

// field rewrites one whole field value. It returns src itself (not a copy)
// when nothing matched, so callers can keep the original bytes.
func field(r Replacer, src []byte) ([]byte, int, error) {
	return replaceWith(r, true, src)
}

// text rewrites free text, returning src itself when nothing matched.
func text(r Replacer, src []byte) ([]byte, int, error) {
	return replaceWith(r, false, src)
}

// scratchReplacer gives one call of an exported function (a body, a URL, a
// header set) a buffer for the replacer to append into. Most fields match
// nothing, so the appended copy is thrown away: reusing the buffer saves an
// allocation per JSON string or form value. A changed result is copied out
// before the buffer is reused, and the buffer is wiped after each use since
// it may hold a real value. Not safe for concurrent use; never shared.
// Buffers are pooled across calls (the proxy rewrites a URL and a header
// set on every request) and wiped whole before they go back.
type scratchReplacer struct {
	Replacer
	buf []byte
	// visit is the Replacer's FieldVisitor, if it has one; groups and
	// prefix are the walk's state for it (fields.go).
	visit  FieldVisitor
	groups int
	prefix []string
}

var scratchPool = sync.Pool{New: func() any { return &scratchReplacer{buf: make([]byte, 0, 4096)} }}

// withScratch wraps r for one call of an exported function, which must
// call release on the second result when it returns. Wrapping twice is a
// no-op (the second result is then nil, and release on nil does nothing).
func withScratch(r Replacer) (Replacer, *scratchReplacer) {
	if _, ok := r.(*scratchReplacer); ok {
		return r, nil
	}
	sr := scratchPool.Get().(*scratchReplacer)
	sr.Replacer = r
	sr.visit, _ = r.(FieldVisitor)
	return sr, sr
}

// release wipes the buffer (an append that outgrew it left a partial copy
// of a rewritten value behind) and returns it to the pool.
func (sr *scratchReplacer) release() {
	if sr == nil {
		return
	}
	clear(sr.buf[:cap(sr.buf)])
	sr.Replacer, sr.visit, sr.groups, sr.prefix = nil, nil, 0, nil
	scratchPool.Put(sr)
}

// replaceWith runs the replacer on src and returns src itself when nothing
// matched, or a fresh copy of the result.
func replaceWith(r Replacer, fieldMode bool, src []byte) ([]byte, int, error) {
	sr, _ := r.(*scratchReplacer)
	var dst []byte
	if sr != nil {
		r, dst = sr.Replacer, sr.buf[:0]
	}
	// A value too large for the scratch buffer (a 1 MiB form field) would
	// be copied whole only to be thrown away when nothing matches: ask
	// first, when the replacer can tell.
	if c, ok := r.(Container); ok && len(src) > cap(dst) && !c.Contains(src) {
		return src, 0, nil
	}
	f := r.ReplaceText
	if fieldMode {
		f = r.ReplaceField
	}
	out, n, err := f(dst, src)
	var res []byte
	if err == nil && n > 0 {
		res = bytes.Clone(out)
	}
	// Wipe the buffer (it may hold a real value) if the result is in it.
	// A result elsewhere (grown past the buffer, or a slice the replacer
	// owns) is left alone: wiping it could wipe the caller's input.
	if sr != nil && cap(out) > 0 && &out[:1][0] == &dst[:1][0] {
		clear(out)
	}
	if err != nil {
		return nil, 0, replacerError(err)
	}
	if n == 0 {
		return src, 0, nil
	}
	return res, n, nil
}

// replacerError keeps a coded error from the replacer as it is (its code, e.g.
// token_not_authorized, is the reason the caller must see) and codes anything
// else as a substitution failure.
func replacerError(err error) error {
	var ae *agentvault.Error
	if errors.As(err, &ae) {
		return err
	}
	return agentvault.Wrap(agentvault.CodeSubstitution, err, "value replacement failed")
}

func limitOrDefault(limit int64) int64 {
	if limit <= 0 {
		return DefaultLimit
	}
	return limit
}

func pathError() error {
	return agentvault.Errorf(agentvault.CodeSubstitution, "rewritten URL path is not validly encoded")
}
