package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/dtx"
)

// Config tunes the HTTP API.
type Config struct {
	// MaxInflightBody bounds the request-body bytes that requests in flight
	// hold, over all connections. A request whose body would pass it is
	// answered 503 with Retry-After, its body read and dropped unbuffered.
	// A body is held from its first byte until its request is answered,
	// since what it decodes to lives as long (issue 30: ten concurrent
	// 15 MB submits took the process to 960 MB). One request at a time may
	// exceed it, so that any body up to the 16 MiB limit can be served.
	// 0: no bound.
	MaxInflightBody int64
	// NoRawSyscalls has the lean loop read and write through net.Conn
	// instead of raw system calls (internal/rawconn): an off switch, to
	// measure what they buy (issue 31).
	NoRawSyscalls bool
}

// DefaultConfig bounds the bodies in flight to 64 MiB: with the copies
// decoding and storing makes, a few hundred MB at most.
func DefaultConfig() Config { return Config{MaxInflightBody: 64 << 20} }

// Validate reports an unusable setting.
func (c Config) Validate() error {
	if c.MaxInflightBody < 0 {
		return sluice.Errorf(sluice.ErrConfig, "dtx http config", "use 0 (no bound) or a positive number of bytes", "negative in-flight body budget")
	}
	return nil
}

// errBusy is the refusal of a body past the budget: 503 with Retry-After.
var errBusy = errors.New("the coordinator holds as many request bodies as --max-inflight-body allows; retry shortly")

var retryAfter = []string{"1"}

// budget counts the body bytes held by requests in flight.
type budget struct {
	max  int64 // 0: none
	used atomic.Int64
}

// acquire takes n bytes, or reports false when they do not fit. A request
// alone in flight always fits, whatever its size.
func (b *budget) acquire(n int64) bool {
	if b == nil || b.max <= 0 || n <= 0 {
		return true
	}
	for {
		u := b.used.Load()
		if u > 0 && u+n > b.max {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

func (b *budget) release(n int64) {
	if b != nil && b.max > 0 && n > 0 {
		b.used.Add(-n)
	}
}

// reqBody is a request's body in a pooled buffer, and the budget it holds.
type reqBody struct {
	b    []byte
	held int64
}

// bodyPool holds request body buffers; bodies are read whole, decoded
// (which copies what it keeps) and the buffer returned.
var bodyPool = sync.Pool{New: func() any { return &reqBody{b: make([]byte, 0, 4096)} }}

// maxPooled bounds the buffers kept in bodyPool, so that one large body
// does not pin its memory.
const maxPooled = 64 << 10

// readBody reads the whole body into a pooled buffer, sized by
// Content-Length when the client sent one, within the in-flight budget;
// putBody returns the buffer and the budget. Past the budget the body is
// read and dropped (so that the client reads the 503 rather than a reset)
// and errBusy returned.
func (h *handler) readBody(w http.ResponseWriter, r *http.Request) (*reqBody, error) {
	if r.ContentLength > maxBody {
		return nil, tooLarge()
	}
	rb := bodyPool.Get().(*reqBody)
	rb.b = rb.b[:0]
	want := 4096
	if r.ContentLength >= 0 {
		want = int(r.ContentLength) + 1 // +1: room for the read that sees EOF
		if !h.budget.acquire(int64(want)) {
			h.putBody(rb)
			return nil, h.busy(w, r)
		}
		rb.held = int64(want)
	}
	if cap(rb.b) < want {
		rb.b = make([]byte, 0, want)
	}
	for {
		if len(rb.b) == cap(rb.b) {
			// A body of unknown length (chunked) takes budget as it grows.
			grown := append(rb.b, 0)[:len(rb.b)]
			if more := int64(cap(grown)) - rb.held; more > 0 {
				if !h.budget.acquire(more) {
					h.putBody(rb)
					return nil, h.busy(w, r)
				}
				rb.held += more
			}
			rb.b = grown
		}
		n, err := r.Body.Read(rb.b[len(rb.b):cap(rb.b)])
		rb.b = rb.b[:len(rb.b)+n]
		if len(rb.b) > maxBody {
			h.putBody(rb)
			return nil, tooLarge()
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			h.putBody(rb)
			return nil, fmt.Errorf("%w: reading the body: %v", dtx.ErrBadRequest, err)
		}
	}
	return rb, nil
}

// busy drops the rest of a refused body without buffering it, and returns
// errBusy; the answer is the caller's (writeErr: 503, Retry-After).
func (h *handler) busy(w http.ResponseWriter, r *http.Request) error {
	_, _ = io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, maxBody))
	return errBusy
}

func tooLarge() error {
	return fmt.Errorf("%w: reading the body: %v", dtx.ErrBadRequest, &http.MaxBytesError{Limit: maxBody})
}

// putBody returns a body's budget, and its buffer to the pool when small.
func (h *handler) putBody(rb *reqBody) {
	h.budget.release(rb.held)
	rb.held = 0
	if cap(rb.b) <= maxPooled {
		rb.b = rb.b[:0]
		bodyPool.Put(rb)
	}
}
