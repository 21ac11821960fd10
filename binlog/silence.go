package binlog

import (
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-db/sluice/internal/stagetime"
)

// silenceConn detects a dead source connection without a read deadline per
// packet. go-mysql with a ReadTimeout sets a deadline (a clock read and a
// runtime timer update) before every packet it reads, and again after it:
// 8 % of sluice's CPU in the catch-up benchmark (issue 18). Instead the
// reader gives go-mysql no ReadTimeout and dials through silenceConn, which
//
//   - keeps a read deadline armed, moving it only when more than half of it
//     has been used (once per timeout/2, not once per packet), and
//   - when that deadline fires, fails the read only if this Read call has
//     waited the whole timeout without a byte; otherwise it re-arms the
//     deadline at the call's start plus the timeout and reads on.
//
// So a Read fails with a timeout exactly when the connection was silent for
// at least the timeout while sluice waited on it (the source sends
// heartbeats at Config.Heartbeat, so a live source is never that silent),
// and time spent not reading (the relay writer applying backpressure) never
// counts as silence, unlike a deadline set after each packet.
//
// A deadline set from outside (go-mysql's Close sets one 100 ms ahead to
// unblock its reader) takes over for good: from then on reads and timeouts
// pass through untouched.
type silenceConn struct {
	net.Conn
	timeout time.Duration

	deadline time.Time // armed read deadline; used by the reading goroutine only

	mu       sync.Mutex // orders our deadline updates against an external one
	external atomic.Bool

	// clock gets the reads that waited for the source (Reader.SetClock).
	clock *stagetime.Clock
}

func newSilenceConn(c net.Conn, timeout time.Duration) *silenceConn {
	return &silenceConn{Conn: c, timeout: timeout}
}

// Read reads, failing with a timeout only after the timeout of silence.
func (c *silenceConn) Read(p []byte) (int, error) {
	if c.external.Load() {
		return c.Conn.Read(p)
	}
	start := time.Now()
	if c.clock != nil {
		// go-mysql reads through a 64 KiB buffer: this is once per refill,
		// when it has consumed what had arrived. A read that finds bytes
		// there returns in microseconds, so the time is the wait.
		t0 := c.clock.Enter(stagetime.WaitInput)
		defer c.clock.Leave(stagetime.WaitInput, t0)
	}
	if c.deadline.Sub(start) < c.timeout/2 {
		if err := c.arm(start.Add(c.timeout)); errors.Is(err, errExternal) {
			return c.Conn.Read(p)
		} else if err != nil {
			return 0, err
		}
	}
	for {
		n, err := c.Conn.Read(p)
		if n > 0 || err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
			return n, err
		}
		if time.Since(start) >= c.timeout {
			return n, err // silent for the whole timeout: dead
		}
		// The deadline was armed before this call began: it measured
		// time spent elsewhere. Wait the rest of the timeout.
		if aerr := c.arm(start.Add(c.timeout)); aerr != nil {
			if errors.Is(aerr, errExternal) {
				return n, err
			}
			return n, aerr
		}
	}
}

var errExternal = errors.New("binlog: read deadline set by the connection's user")

// arm sets the read deadline unless an external one has taken over.
func (c *silenceConn) arm(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.external.Load() {
		return errExternal
	}
	c.deadline = t
	return c.Conn.SetReadDeadline(t)
}

// SetReadDeadline is a deadline from the connection's user: it replaces
// the silence watch.
func (c *silenceConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.external.Store(true)
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline is SetReadDeadline and SetWriteDeadline.
func (c *silenceConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetWriteDeadline(t)
}
