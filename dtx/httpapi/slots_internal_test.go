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
	l := NewSlotListener(inner, SlotConfig{Max: 3, PerClient: 2})
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
