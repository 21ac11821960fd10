//go:build linux

package oltp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// listen returns a loopback listener whose first accepted connection is
// sent on the channel.
func listen(t *testing.T) (net.Listener, <-chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			ch <- c
		}
		close(ch)
	}()
	return ln, ch
}

// TestBlockingConnRoundTrip sends more than the socket buffers hold through
// an echo server, so that both the write and the read side have to wait in
// ppoll, and checks the bytes and the EOF after the server closes.
func TestBlockingConnRoundTrip(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(4, runtime.GOMAXPROCS(0))))
	for _, raw := range []bool{true, false} {
		name := map[bool]string{true: "raw", false: "syscall"}[raw]
		t.Run(name, func(t *testing.T) {
			ln, accepted := listen(t)
			c, err := dialBlocking(context.Background(), "tcp", ln.Addr().String(), raw)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if bc, ok := c.(*blockingConn); !ok || bc.raw != raw {
				t.Fatalf("dialBlocking returned %T, want a blockingConn with raw=%v", c, raw)
			}
			srv := <-accepted
			go func() { io.Copy(srv, srv); srv.Close() }()

			want := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB
			werr := make(chan error, 1)
			go func() {
				n, err := c.Write(want)
				if err == nil && n != len(want) {
					err = errors.New("short write")
				}
				werr <- err
			}()
			got := make([]byte, len(want))
			if _, err := io.ReadFull(c, got); err != nil {
				t.Fatalf("read back: %v", err)
			}
			if err := <-werr; err != nil {
				t.Fatalf("write: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatal("echoed bytes differ from the ones sent")
			}
			// Half-close our side: the echo server sees EOF and closes.
			if err := syscall.Shutdown(c.(*blockingConn).fd, syscall.SHUT_WR); err != nil {
				t.Fatal(err)
			}
			if n, err := c.Read(make([]byte, 16)); n != 0 || err != io.EOF {
				t.Fatalf("after the server closed: Read = %d, %v; want 0, EOF", n, err)
			}
			if err := c.SetReadDeadline(time.Now().Add(time.Second)); !errors.Is(err, errNoDeadline) {
				t.Errorf("SetReadDeadline = %v, want errNoDeadline", err)
			}
		})
	}
}

// TestRawWaitDoesNotBlockGC: a worker waiting for a server that does not
// answer holds its P in a raw ppoll; a stop-the-world must still complete,
// because the preemption signal interrupts the wait. Were it otherwise,
// runtime.GC would not return until the server answered, which here
// happens only after it returns (the test would hang).
func TestRawWaitDoesNotBlockGC(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(4, runtime.GOMAXPROCS(0))))
	ln, accepted := listen(t)
	c, err := dialBlocking(context.Background(), "tcp", ln.Addr().String(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	srv := <-accepted
	defer srv.Close()

	started := make(chan struct{})
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		close(started)
		n, err := c.Read(make([]byte, 64))
		done <- result{n, err}
	}()
	<-started
	time.Sleep(100 * time.Millisecond) // let the reader reach ppoll
	for i := 0; i < 3; i++ {
		runtime.GC()
	}
	select {
	case r := <-done:
		t.Fatalf("Read returned (%d, %v) before the server wrote anything", r.n, r.err)
	default:
	}
	if _, err := srv.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if r := <-done; r.err != nil || r.n != 5 {
		t.Fatalf("Read = %d, %v; want 5, nil", r.n, r.err)
	}
}
