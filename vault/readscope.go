package vault

import (
	"context"
	"sync"
)

// ReadScope marks the reads made under a context as one decision's (an
// authorize, a release). A store that caches reads (store/sqlite's read
// cache) checks that its cache is fresh once per scope instead of once per
// read: every read of the decision then sees the store as it was when the
// decision's first read began, or later. A write that lands while the
// decision runs is seen by the next decision, as if it had landed just
// after this one; a decision that starts after a write always sees it.
type ReadScope struct {
	mu  sync.Mutex
	v   int64
	set bool
}

type readScopeKey struct{}

// WithReadScope returns ctx carrying a new ReadScope (one decision's).
func WithReadScope(ctx context.Context) context.Context {
	return context.WithValue(ctx, readScopeKey{}, &ReadScope{})
}

// ReadScopeFrom returns the ReadScope ctx carries, or nil.
func ReadScopeFrom(ctx context.Context) *ReadScope {
	r, _ := ctx.Value(readScopeKey{}).(*ReadScope)
	return r
}

// Version returns the version the scope's first read took, calling read
// (the store's own version query) for the first read only. A failed read
// is not kept: the next read asks again.
func (r *ReadScope) Version(read func() (int64, error)) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.set {
		return r.v, nil
	}
	v, err := read()
	if err == nil {
		r.v, r.set = v, true
	}
	return v, err
}
