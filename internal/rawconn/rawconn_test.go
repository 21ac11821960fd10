package rawconn

import (
	"bytes"
	"errors"
	"io"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// pair returns the two ends of a real loopback TCP connection, the client's
// wrapped.
func pair(t *testing.T) (raw, peer net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer = <-accepted
	if peer == nil {
		t.Fatal("accept failed")
	}
	raw = Wrap(c)
	t.Cleanup(func() { raw.Close(); peer.Close() })
	return raw, peer
}

func TestWrapOnlyTCP(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if Wrap(a) != a {
		t.Fatal("a net.Pipe has no descriptor and must come back as it is")
	}
	raw, _ := pair(t)
	if _, ok := raw.(*Conn); !ok && runtime.GOOS == "linux" {
		t.Fatalf("a TCP connection was not wrapped: %T", raw)
	}
}

// TestBothWays sends more than the socket buffers hold in each direction,
// so that writes meet EAGAIN and park, and reads wait for data.
func TestBothWays(t *testing.T) {
	raw, peer := pair(t)
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<20) // 16 MiB
	send(t, raw, peer, want)
	send(t, peer, raw, want)
}

// send writes want on w from another goroutine and reads it all on r.
func send(t *testing.T, w, r net.Conn, want []byte) {
	t.Helper()
	errs := make(chan error, 1)
	go func() {
		_, err := w.Write(want)
		errs <- err
	}()
	time.Sleep(50 * time.Millisecond) // let the writer fill the buffers and park
	got := make([]byte, len(want))
	if _, err := io.ReadFull(r, got); err != nil {
		t.Fatal(err)
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("the reader read other bytes than were written")
	}
}

func TestDeadlineIsATimeout(t *testing.T) {
	raw, _ := pair(t)
	if err := raw.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	_, err := raw.Read(make([]byte, 10))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("a read past its deadline returned %v, want a net.Error that is a timeout", err)
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "read" {
		t.Fatalf("want a *net.OpError for read, got %#v", err)
	}
}

// TestUnblockedByDeadline: a read parked in the poller wakes when another
// goroutine moves the deadline into the past (how a cancelled call is broken).
func TestUnblockedByDeadline(t *testing.T) {
	raw, _ := pair(t)
	done := make(chan error, 1)
	go func() {
		_, err := raw.Read(make([]byte, 10))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	_ = raw.SetDeadline(time.Unix(1, 0))
	var ne net.Error
	if err := <-done; !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("got %v, want a timeout", err)
	}
}

func TestEOFAndReset(t *testing.T) {
	raw, peer := pair(t)
	if _, err := peer.Write([]byte("bye")); err != nil {
		t.Fatal(err)
	}
	peer.Close()
	got, err := io.ReadAll(raw)
	if err != nil || string(got) != "bye" {
		t.Fatalf("read %q, %v; want \"bye\" and a clean EOF", got, err)
	}

	raw2, peer2 := pair(t)
	_ = peer2.(*net.TCPConn).SetLinger(0) // close with a RST
	peer2.Close()
	time.Sleep(20 * time.Millisecond)
	_, err = raw2.Read(make([]byte, 10))
	var op *net.OpError
	if !errors.As(err, &op) || !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("a reset connection read %v, want a *net.OpError wrapping ECONNRESET", err)
	}
}

func TestClosed(t *testing.T) {
	raw, _ := pair(t)
	raw.Close()
	if _, err := raw.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after Close: %v, want net.ErrClosed", err)
	}
	if _, err := raw.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after Close: %v, want net.ErrClosed", err)
	}
}
