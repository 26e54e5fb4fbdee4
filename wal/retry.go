package wal

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/objwal/objwal/casstore"
)

// transient reports whether err may go away if the operation is retried:
// 409 conflicts, timeouts, and every transport-like error (5xx, lost replies,
// throttling). The contract's definite answers (not found, already exists,
// precondition failed) are not transient: callers handle them. Neither are
// errors that no retry can fix (unsupported, invalid key, closed store) nor
// the caller's own cancellation.
func transient(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, casstore.ErrConflict):
		return true
	case errors.Is(err, casstore.ErrNotFound), errors.Is(err, casstore.ErrAlreadyExists),
		errors.Is(err, casstore.ErrPreconditionFailed), errors.Is(err, casstore.ErrUnsupported),
		errors.Is(err, casstore.ErrInvalidKey), errors.Is(err, casstore.ErrInvalidRange),
		errors.Is(err, casstore.ErrClosed), errors.Is(err, casstore.ErrInvalidURL),
		errors.Is(err, context.Canceled), errors.Is(err, ErrCorrupt), errors.Is(err, ErrLegacyManifest):
		return false
	}
	return true
}

// backoff produces exponentially growing, jittered waits between retries of
// one operation and says when its retry window is spent.
type backoff struct {
	window time.Duration // 0: no limit
	start  time.Time
	next   time.Duration
}

const (
	backoffMin = 5 * time.Millisecond
	backoffMax = time.Second
)

func newBackoff(window time.Duration) *backoff { return &backoff{window: window} }

// wait sleeps before the next retry. It returns false, without sleeping
// past it, when the window is spent or ctx ends.
func (b *backoff) wait(ctx context.Context) bool {
	now := time.Now()
	if b.start.IsZero() {
		b.start, b.next = now, backoffMin
	}
	d := b.next/2 + rand.N(b.next/2+1) // jitter spreads retries of many writers
	b.next = min(2*b.next, backoffMax)
	if b.window > 0 {
		left := b.window - now.Sub(b.start)
		if left <= 0 {
			return false
		}
		d = min(d, left)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// reset forgets past failures after a success.
func (b *backoff) reset() { b.start = time.Time{} }

// withTimeout runs f with a per-request timeout derived from ctx.
func withTimeout[T any](ctx context.Context, d time.Duration, f func(context.Context) (T, error)) (T, error) {
	if d <= 0 {
		return f(ctx)
	}
	c, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return f(c)
}
