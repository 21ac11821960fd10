package wire

import (
	"context"
	"sync"
)

// Fake is an in-memory Caller for unit tests of the state machine: it
// answers each call from a table keyed by URL (Success for a URL it was
// not told about) and records every call made, in order. It checks no
// URL. It is safe for concurrent use.
type Fake struct {
	mu      sync.Mutex
	answers map[string]fakeAnswer
	calls   []Call
}

type fakeAnswer struct {
	a   Answer
	err error
}

// NewFake returns a Fake that answers Success to every call.
func NewFake() *Fake { return &Fake{answers: map[string]fakeAnswer{}} }

// Answer makes every later call to url answer a.
func (f *Fake) Answer(url string, a Answer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers[url] = fakeAnswer{a: a}
}

// Fail makes every later call to url end with err: an unknown outcome,
// which the coordinator retries.
func (f *Fake) Fail(url string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers[url] = fakeAnswer{err: err}
}

// Calls returns the calls made so far, in order.
func (f *Fake) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.calls...)
}

// Call implements Caller.
func (f *Fake) Call(ctx context.Context, c *Call) (Answer, error) {
	if err := ctx.Err(); err != nil {
		return Answer{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	cp := *c
	cp.Body = append([]byte(nil), c.Body...)
	f.calls = append(f.calls, cp)
	a, ok := f.answers[c.URL]
	if !ok {
		return Answer{Outcome: Success}, nil
	}
	return a.a, a.err
}

// Check implements Caller: every URL passes.
func (f *Fake) Check(context.Context, string, string, bool) error { return nil }

var _ Caller = (*Fake)(nil)
