// Package backoff is sluice's one retry schedule: exponential from Min to
// Max with jitter, reset after a long enough healthy run. The binlog
// reader's reconnects, a task's restarts after a retryable error and a
// worker's task restarts all wait by it, so that many tasks that lost the
// same server do not all come back in the same instant.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Jitter is the spread of each wait: a wait of d is drawn from
// [d*(1-Jitter), d*(1+Jitter)], then capped at Max.
const Jitter = 0.2

// Backoff is one retry loop's schedule. The zero value is not usable; use
// New. Not safe for concurrent use: each loop owns its own.
type Backoff struct {
	Min, Max time.Duration
	next     time.Duration
	rand     func() float64 // [0,1); a test may fix it
}

// New returns a schedule whose first wait is about min.
func New(min, max time.Duration) *Backoff {
	if max < min {
		max = min
	}
	return &Backoff{Min: min, Max: max, next: min, rand: rand.Float64}
}

// Next returns the wait before the next attempt and doubles the one after,
// up to Max.
func (b *Backoff) Next() time.Duration {
	d := b.next
	if b.next = 2 * b.next; b.next > b.Max || b.next <= 0 {
		b.next = b.Max
	}
	j := time.Duration(float64(d) * Jitter * (2*b.rand() - 1))
	if d += j; d > b.Max {
		d = b.Max
	}
	if d < 0 {
		d = 0
	}
	return d
}

// Reset starts the schedule from Min again (after a success, or after a
// run long enough to count as healthy).
func (b *Backoff) Reset() { b.next = b.Min }

// Sleep waits d or until ctx ends; it reports whether the wait completed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
