package policy

import (
	"fmt"
	"sync"
	"time"

	"github.com/agentvault/agentvault"
)

// RateLimiter is a token bucket per API key: Burst calls at once, then one
// more every Every. The clock is injected so tests never sleep.
type RateLimiter struct {
	Burst int
	Every time.Duration
	Now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens int
	last   time.Time // when tokens was last topped up
}

// maxBuckets bounds the limiter's memory; past it, buckets that have filled
// back up (and so hold no state worth keeping) are dropped.
const maxBuckets = 10000

// NewRateLimiter builds a limiter; now may be nil for time.Now.
func NewRateLimiter(burst int, every time.Duration, now func() time.Time) *RateLimiter {
	if now == nil {
		now = time.Now
	}
	return &RateLimiter{Burst: burst, Every: every, Now: now, buckets: make(map[string]*bucket)}
}

// Take spends one token of key's bucket. When the bucket is empty it spends
// nothing and reports how long until the next token.
func (l *RateLimiter) Take(key string) (ok bool, retryAfter time.Duration) {
	if l.Burst <= 0 || l.Every <= 0 {
		return false, time.Minute // a limiter configured to nothing allows nothing
	}
	now := l.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buckets == nil {
		l.buckets = make(map[string]*bucket)
	}
	b, found := l.buckets[key]
	if !found {
		if len(l.buckets) >= maxBuckets {
			l.prune(now)
		}
		b = &bucket{tokens: l.Burst, last: now}
		l.buckets[key] = b
	}
	l.refill(b, now)
	if b.tokens > 0 {
		b.tokens--
		return true, 0
	}
	wait := b.last.Add(l.Every).Sub(now)
	if wait <= 0 {
		wait = time.Nanosecond
	}
	return false, wait
}

func (l *RateLimiter) refill(b *bucket, now time.Time) {
	if now.Before(b.last) { // the clock went back: start the interval again
		b.last = now
		return
	}
	n := int64(now.Sub(b.last) / l.Every)
	if n <= 0 {
		return
	}
	if n >= int64(l.Burst-b.tokens) {
		b.tokens = l.Burst
		b.last = now
		return
	}
	b.tokens += int(n)
	b.last = b.last.Add(time.Duration(n) * l.Every)
}

func (l *RateLimiter) prune(now time.Time) {
	for k, b := range l.buckets {
		l.refill(b, now)
		if b.tokens >= l.Burst {
			delete(l.buckets, k)
		}
	}
}

// RateLimitError is the refusal Allow returns: code rate_limited, with the
// wait the caller puts in Retry-After.
type RateLimitError struct {
	Err        *agentvault.Error
	RetryAfter time.Duration
}

func (e *RateLimitError) Error() string { return e.Err.Error() }
func (e *RateLimitError) Unwrap() error { return e.Err }

// RetryAfterDuration is when to try again (the control API's Retry-After).
func (e *RateLimitError) RetryAfterDuration() time.Duration { return e.RetryAfter }

// Allow spends one token for key or refuses with rate_limited, naming the
// retry time in whole seconds (rounded up).
func (l *RateLimiter) Allow(key string) error {
	ok, wait := l.Take(key)
	if ok {
		return nil
	}
	secs := (wait + time.Second - 1) / time.Second
	return &RateLimitError{
		Err:        agentvault.Errorf(agentvault.CodeRateLimited, "too many calls for this key; retry after %s", fmt.Sprint(secs*time.Second)),
		RetryAfter: wait,
	}
}
