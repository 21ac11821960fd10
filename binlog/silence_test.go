package binlog

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// pipe returns a silenceConn reading from the far end's writes.
func pipe(t *testing.T, timeout time.Duration) (*silenceConn, net.Conn) {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return newSilenceConn(a, timeout), b
}

func readOne(t *testing.T, c net.Conn) {
	t.Helper()
	buf := make([]byte, 16)
	if _, err := c.Read(buf); err != nil {
		t.Fatalf("read: %v", err)
	}
}

// A connection that goes silent fails the read after the timeout, not
// before.
func TestSilenceConnDetectsASilentSource(t *testing.T) {
	const timeout = 300 * time.Millisecond
	c, peer := pipe(t, timeout)
	go func() {
		for i := 0; i < 3; i++ {
			if _, err := peer.Write([]byte("event")); err != nil {
				return
			}
		}
		// then silence, connection open
	}()
	for i := 0; i < 3; i++ {
		readOne(t, c)
	}
	start := time.Now()
	_, err := c.Read(make([]byte, 16))
	waited := time.Since(start)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read on a silent connection returned %v, want a timeout", err)
	}
	if waited < timeout {
		t.Fatalf("silence detected after %v, before the %v timeout", waited, timeout)
	}
	if waited > timeout+5*time.Second {
		t.Fatalf("silence detected only after %v (timeout %v)", waited, timeout)
	}
}

// Time not spent reading (the consumer applying backpressure) is not
// silence: the deadline armed by an earlier read has passed when the next
// read starts, and that read still waits for data. go-mysql's deadline per
// packet failed here.
func TestSilenceConnIgnoresTimeNotReading(t *testing.T) {
	const timeout = 300 * time.Millisecond
	c, peer := pipe(t, timeout)
	reading := make(chan struct{})
	go func() {
		peer.Write([]byte("first"))
		<-reading
		// At once: a read that kept the stale deadline fails at once even
		// with data on its way (net.Pipe checks the deadline first), and no
		// delay here can make a correct read time out on a busy machine.
		peer.Write([]byte("second"))
	}()
	readOne(t, c) // arms the deadline
	// Not reading for longer than the timeout: the scenario, not a fault
	// placed by time.
	time.Sleep(2 * timeout)
	close(reading)
	readOne(t, c)
}

// A source that keeps sending more often than the timeout is never
// declared dead, however long the stream lasts.
func TestSilenceConnKeepsALiveConnection(t *testing.T) {
	const timeout = 2 * time.Second
	c, peer := pipe(t, timeout)
	const n = 6
	go func() {
		for i := 0; i < n; i++ {
			time.Sleep(timeout / 4)
			if _, err := peer.Write([]byte("heartbeat")); err != nil {
				return
			}
		}
	}()
	for i := 0; i < n; i++ {
		readOne(t, c)
	}
}

// A deadline set by the connection's user (go-mysql's Close, to unblock its
// reader) takes effect at once and is not extended.
func TestSilenceConnExternalDeadlineWins(t *testing.T) {
	c, peer := pipe(t, time.Hour)
	go peer.Write([]byte("x"))
	readOne(t, c) // the silence watch is armed, an hour ahead
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 16))
		done <- err
	}()
	if err := c.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read returned %v, want the external deadline's timeout", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the external deadline did not end the read")
	}
}
