// Package groupcommit lets many callers share one durable commit: each
// caller hands in one record and waits; one writer goroutine takes every
// record waiting at that moment, commits them in one transaction (one
// fsync), and answers each caller with its own result. A caller never
// returns before the commit that holds its record has returned (P12: a
// release never leaves before its audit record is durable).
//
// It batches only what is already waiting (no timer, no added latency
// for a lone caller): while one commit is in flight the next callers
// queue, and the next commit takes them all. It must never answer a
// caller with success before its commit returned, nor drop a record
// silently; it knows nothing about SQL.
package groupcommit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// commitTimeout bounds one commit: a store that hangs fails the waiting
// callers (closed: their values are withheld) instead of holding them.
const commitTimeout = 30 * time.Second

// ErrClosed is returned to callers after Close.
var ErrClosed = errors.New("groupcommit: closed")

// CommitFunc writes items in one transaction and returns one result per
// item, in order. An error means none of them is committed.
type CommitFunc[T, R any] func(ctx context.Context, items []T) ([]R, error)

// Writer batches Do calls into commits.
type Writer[T, R any] struct {
	commit CommitFunc[T, R]
	max    int
	reqs   chan *request[T, R]
	quit   chan struct{}
	done   chan struct{}
	once   sync.Once
	// Commits and Items count commits and committed records (for tests
	// and benchmarks: Items/Commits is the mean batch size).
	mu             sync.Mutex
	commits, items int64
	waiting        atomic.Int64 // callers inside Do
}

type request[T, R any] struct {
	item T
	fn   func() // Run's work instead of a record
	ctx  context.Context
	res  chan result[R]
}

type result[R any] struct {
	r   R
	err error
}

// New starts the writer goroutine. max bounds one batch (at least 1).
func New[T, R any](commit CommitFunc[T, R], max int) *Writer[T, R] {
	if max < 1 {
		max = 1
	}
	w := &Writer[T, R]{commit: commit, max: max, reqs: make(chan *request[T, R]),
		quit: make(chan struct{}), done: make(chan struct{})}
	go w.loop()
	return w
}

// Do commits item (with whatever else is waiting) and returns its result
// once the commit returned. If ctx ends first Do returns ctx's error; the
// record may still be committed (a caller that got an error must act as
// if it was not: for the audit, the value is withheld, and an audit
// record of a release that did not happen is harmless).
func (w *Writer[T, R]) Do(ctx context.Context, item T) (R, error) {
	var zero R
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	w.waiting.Add(1)
	defer w.waiting.Add(-1)
	r := &request[T, R]{item: item, ctx: ctx, res: make(chan result[R], 1)}
	select {
	case w.reqs <- r:
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-w.quit:
		return zero, ErrClosed
	}
	select {
	case res := <-r.res:
		return res.r, res.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// Stats returns how many commits ran and how many records they held.
func (w *Writer[T, R]) Stats() (commits, items int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.commits, w.items
}

// Run runs fn on the writer goroutine, between two commits and in none,
// and returns once fn has returned: for work on what only the commit
// function touches (its own connection, say). If ctx ends first Run
// returns ctx's error and fn may still run later. Run counts no commit.
func (w *Writer[T, R]) Run(ctx context.Context, fn func()) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r := &request[T, R]{fn: fn, ctx: ctx, res: make(chan result[R], 1)}
	select {
	case w.reqs <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-w.quit:
		return ErrClosed
	}
	select {
	case <-r.res:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops the writer after the commit in flight; callers waiting to
// be taken get ErrClosed. Close is idempotent.
func (w *Writer[T, R]) Close() {
	w.once.Do(func() { close(w.quit) })
	<-w.done
}

func (w *Writer[T, R]) loop() {
	defer close(w.done)
	batch := make([]*request[T, R], 0, w.max)
	var fns []*request[T, R]
	for {
		batch, fns = batch[:0], fns[:0]
		select {
		case r := <-w.reqs:
			if r.fn != nil {
				fns = append(fns, r)
			} else {
				batch = append(batch, r)
			}
		case <-w.quit:
			return
		}
	collect:
		for len(batch) < w.max {
			select {
			case r := <-w.reqs:
				if r.fn != nil {
					fns = append(fns, r)
				} else {
					batch = append(batch, r)
				}
			default:
				break collect
			}
		}
		w.run(batch)
		// Run's work goes after the records that came with it.
		for _, r := range fns {
			r.fn()
			r.res <- result[R]{}
		}
	}
}

// run commits a batch. Callers whose context already ended are left out
// (they have returned). If the batch fails as a whole, each record is
// retried in its own commit, so one bad record fails only its caller.
func (w *Writer[T, R]) run(batch []*request[T, R]) {
	live := batch[:0:0]
	for _, r := range batch {
		if r.ctx.Err() == nil {
			live = append(live, r)
		}
	}
	if len(live) == 0 {
		return
	}
	if w.try(live) == nil || len(live) == 1 {
		return
	}
	for _, r := range live {
		w.try([]*request[T, R]{r})
	}
}

func (w *Writer[T, R]) try(reqs []*request[T, R]) error {
	items := make([]T, len(reqs))
	for i, r := range reqs {
		items[i] = r.item
	}
	// The commit does not run under any caller's context: one caller
	// giving up must not abort the others' records.
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	out, err := w.commit(ctx, items)
	cancel()
	if err == nil && len(out) != len(items) {
		err = errors.New("groupcommit: commit returned the wrong number of results")
	}
	if err != nil {
		if len(reqs) == 1 {
			reqs[0].res <- result[R]{err: err}
		}
		return err
	}
	w.mu.Lock()
	w.commits++
	w.items += int64(len(items))
	w.mu.Unlock()
	for i, r := range reqs {
		r.res <- result[R]{r: out[i]}
	}
	return nil
}
