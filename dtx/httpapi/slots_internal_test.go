package httpapi

import (
	"net"
	"testing"
	"time"
)

// TestSlotListener: past a client's bound, that client's connection idle
// the longest is closed for the new one; a connection serving a request is
// never closed for room (a client whose connections are all busy has its
// new one refused); past the global bound the longest-idle connection of
// anyone makes room, and with none idle Accept waits.
func TestSlotListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// No grace for new connections here: TestSlotListenerSparesNew has it.
	l := NewSlotListener(inner, SlotConfig{Max: 3, PerClient: 2, FreshGrace: time.Nanosecond})
	defer l.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	dial := func(local string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
		c, err := d.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	closedByServer := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err := c.Read(make([]byte, 1))
		_ = c.SetReadDeadline(time.Time{})
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return false
		}
		return true
	}
	a1 := dial("127.0.0.1")
	s1 := <-accepted
	a2 := dial("127.0.0.1")
	s2 := <-accepted
	// A third from the same client: a1, idle the longest, makes room.
	a3 := dial("127.0.0.1")
	s3 := <-accepted
	if !closedByServer(a1) || closedByServer(a2) || closedByServer(a3) {
		t.Fatal("the client's longest-idle connection was not the one closed")
	}
	_ = s1
	// Both of its connections serve requests: a new one is refused.
	markActive(s2, true)
	markActive(s3, true)
	a4 := dial("127.0.0.1")
	if !closedByServer(a4) {
		t.Fatal("a connection past the client's bound was kept while all its others were busy")
	}
	// Another client still gets in (2 of 3 slots used), and past the
	// global bound the longest idle of anyone (b1) makes room.
	b1 := dial("127.0.0.2")
	<-accepted
	b2 := dial("127.0.0.3")
	<-accepted
	if !closedByServer(b1) || closedByServer(b2) {
		t.Fatal("past the global bound, the longest-idle connection was not the one closed")
	}
	// Everything busy at the global bound: the next waits until one goes idle.
	l.mu.Lock()
	for c := range l.conns {
		markActive(c, true)
	}
	l.mu.Unlock()
	dial("127.0.0.4")
	select {
	case <-accepted:
		t.Fatal("accepted past the global bound while every connection was busy")
	case <-time.After(200 * time.Millisecond):
	}
	markActive(s2, false)
	if c := <-accepted; c == nil {
		t.Fatal("not accepted once a connection went idle")
	}
	if !closedByServer(a2) {
		t.Fatal("the connection that went idle was not the one closed")
	}
}

// TestSlotListenerSparesNew: a connection that has not begun a request is
// not closed for room until it is FreshGrace old (issue 30: a flood's
// connections were closed before their requests were read); one that
// served a request and went idle is, at once; past the grace a silent one
// is too. At the global bound, Accept waits for a new connection to age.
func TestSlotListenerSparesNew(t *testing.T) {
	const grace = 400 * time.Millisecond
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := NewSlotListener(inner, SlotConfig{Max: 3, PerClient: 2, FreshGrace: grace})
	defer l.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	dial := func(local string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
		c, err := d.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	closedByServer := func(c net.Conn, wait time.Duration) bool {
		_ = c.SetReadDeadline(time.Now().Add(wait))
		_, err := c.Read(make([]byte, 1))
		_ = c.SetReadDeadline(time.Time{})
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return false
		}
		return true
	}
	start := time.Now()
	a1 := dial("127.0.0.1")
	s1 := <-accepted
	a2 := dial("127.0.0.1")
	<-accepted
	// Both of the client's connections are new: its third is refused,
	// neither of the first two is closed for it.
	a3 := dial("127.0.0.1")
	if !closedByServer(a3, time.Second) {
		t.Fatal("a connection past the client's bound was kept while its others were new")
	}
	if time.Since(start) < grace && (closedByServer(a1, 10*time.Millisecond) || closedByServer(a2, 10*time.Millisecond)) {
		t.Fatal("a new connection was closed for room before it could send its request")
	}
	// a1 served a request and is idle now: it makes room at once.
	markActive(s1, true)
	markActive(s1, false)
	a4 := dial("127.0.0.1")
	<-accepted
	if !closedByServer(a1, time.Second) {
		t.Fatal("the idle connection that had served a request was not closed for room")
	}
	if closedByServer(a4, 10*time.Millisecond) {
		t.Fatal("the new connection was closed")
	}
	// Past the grace, the silent a2 is the longest idle: it goes next.
	time.Sleep(time.Until(start.Add(grace + 50*time.Millisecond)))
	a5 := dial("127.0.0.1")
	<-accepted
	if !closedByServer(a2, time.Second) || closedByServer(a5, 10*time.Millisecond) {
		t.Fatal("past the grace, the silent connection was not the one closed for room")
	}
	// At the global bound, with every connection new, the next waits in
	// Accept until one of them is FreshGrace old, which then makes room.
	inner2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l2 := NewSlotListener(inner2, SlotConfig{Max: 1, FreshGrace: grace})
	defer l2.Close()
	got := make(chan time.Time, 2)
	go func() {
		for {
			if _, err := l2.Accept(); err != nil {
				return
			}
			got <- time.Now()
		}
	}()
	dial2 := func() net.Conn {
		c, err := net.Dial("tcp", inner2.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	b1 := dial2()
	b1At := <-got
	dial2()
	select {
	case at := <-got:
		if at.Sub(b1At) < grace*3/4 {
			t.Fatalf("accepted %v after the only connection, which was new: before the grace", at.Sub(b1At))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("not accepted once the new connection aged past the grace")
	}
	if !closedByServer(b1, time.Second) {
		t.Fatal("the aged silent connection was not closed for room")
	}
}
