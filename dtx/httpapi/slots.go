package httpapi

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// SlotConfig bounds the client connections the API keeps open.
type SlotConfig struct {
	// Max bounds all connections (0: no bound), PerClient those of one
	// client address (0: no bound).
	Max, PerClient int
	// FreshGrace is how long a connection that has not begun a request
	// is safe from being closed for room (0: DefaultFreshGrace). A client
	// connects before it sends, and on a loaded machine the two can be far
	// apart: a flood's connections were closed before their requests were
	// read (issue 30). Past the grace a silent connection is fair game,
	// or 10,000 idle sockets would hold every slot until their header
	// timeout.
	FreshGrace time.Duration
}

// DefaultFreshGrace is SlotConfig.FreshGrace's default.
const DefaultFreshGrace = time.Second

// SlotListener accepts connections within SlotConfig's bounds. When a
// bound is reached, the connection idle the longest (of that client, or of
// anyone for Max) is closed to make room: an idle keep-alive connection, or
// one that has sent nothing for FreshGrace since it opened, costs its
// client nothing to open again, while a new client would otherwise wait
// for a timeout to free a slot (issue 30: 10,000 idle sockets delayed real
// clients by about 10 s). A connection serving a request, or opened less
// than FreshGrace ago and not yet sending, is never closed for room: first
// come, first served. When none of a client's connections at PerClient can
// be closed, its new one is closed at once (Accept does not wait on one
// client's behalf); when none at Max can, Accept waits for one to end, go
// idle, or age past the grace.
//
// A connection is idle from its accept until a request begins, and again
// after each answer; the lean loop and net/http (through ConnState) say
// when.
type SlotListener struct {
	net.Listener
	cfg SlotConfig

	mu    sync.Mutex
	conns map[*slotConn]struct{}
	by    map[string]map[*slotConn]struct{} // by client address
	freed chan struct{}                     // a slot was released (capacity 1)
}

// NewSlotListener bounds the connections ln accepts.
func NewSlotListener(ln net.Listener, cfg SlotConfig) *SlotListener {
	if cfg.FreshGrace == 0 {
		cfg.FreshGrace = DefaultFreshGrace
	}
	return &SlotListener{Listener: ln, cfg: cfg, conns: map[*slotConn]struct{}{},
		by: map[string]map[*slotConn]struct{}{}, freed: make(chan struct{}, 1)}
}

// Accept implements net.Listener.
func (l *SlotListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		sc := &slotConn{Conn: c, l: l, client: clientKey(c.RemoteAddr()), opened: time.Now().UnixNano()}
		sc.idleSince.Store(sc.opened)
		if l.admit(sc) {
			return sc, nil
		}
		c.Close() // its client's connections are all busy
	}
}

// admit makes room for sc and registers it; false: refused.
func (l *SlotListener) admit(sc *slotConn) bool {
	for {
		var victims []*slotConn
		fresh := time.Now().Add(-l.cfg.FreshGrace).UnixNano() // opened after it: spared
		l.mu.Lock()
		mine := l.by[sc.client]
		if l.cfg.PerClient > 0 && len(mine) >= l.cfg.PerClient {
			v := oldestIdle(mine, fresh)
			if v == nil {
				l.mu.Unlock()
				return false
			}
			l.removeLocked(v)
			victims = append(victims, v)
		}
		if l.cfg.Max > 0 && len(l.conns) >= l.cfg.Max {
			v := oldestIdle(l.conns, fresh)
			if v == nil {
				// Every connection is serving a request or new: wait for
				// one to end, go idle or age, as the plain connection cap
				// did.
				l.mu.Unlock()
				closeAll(victims)
				select {
				case <-l.freed:
				case <-time.After(50 * time.Millisecond): // for a connection that went idle or aged
				}
				continue
			}
			l.removeLocked(v)
			victims = append(victims, v)
		}
		l.conns[sc] = struct{}{}
		if mine == nil {
			mine = map[*slotConn]struct{}{}
			l.by[sc.client] = mine
		}
		mine[sc] = struct{}{}
		l.mu.Unlock()
		closeAll(victims)
		return true
	}
}

func closeAll(cs []*slotConn) {
	for _, c := range cs {
		_ = c.Conn.Close() // its own Close finds it released already
	}
}

// oldestIdle is the connection in set idle the longest, nil if none is
// idle; a connection that has begun no request and opened after fresh
// (unix ns) is not idle but new.
func oldestIdle(set map[*slotConn]struct{}, fresh int64) *slotConn {
	var best *slotConn
	var since int64
	for c := range set {
		if c.active.Load() || !c.served.Load() && c.opened > fresh {
			continue
		}
		if s := c.idleSince.Load(); best == nil || s < since {
			best, since = c, s
		}
	}
	return best
}

// removeLocked releases c's slot (once).
func (l *SlotListener) removeLocked(c *slotConn) {
	if c.released {
		return
	}
	c.released = true
	delete(l.conns, c)
	if m := l.by[c.client]; m != nil {
		delete(m, c)
		if len(m) == 0 {
			delete(l.by, c.client)
		}
	}
	select {
	case l.freed <- struct{}{}:
	default:
	}
}

// Open is how many connections hold a slot (for tests and metrics).
func (l *SlotListener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// clientKey is a connection's client: its IP address.
func clientKey(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// slotConn is an accepted connection holding a slot.
type slotConn struct {
	net.Conn
	l         *SlotListener
	client    string
	opened    int64        // unix ns: accepted
	active    atomic.Bool  // serving a request
	served    atomic.Bool  // has begun a request
	idleSince atomic.Int64 // unix ns: when it last went idle
	released  bool         // under l.mu
}

// SetActive marks the connection serving a request (true) or idle.
func (c *slotConn) SetActive(on bool) {
	if !on {
		c.idleSince.Store(time.Now().UnixNano())
	} else {
		c.served.Store(true)
	}
	c.active.Store(on)
}

// NetConn is the connection under the wrapper (rawconn reads and writes
// the socket itself).
func (c *slotConn) NetConn() net.Conn { return c.Conn }

// CloseWrite lets net/http half-close as on a *net.TCPConn.
func (c *slotConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.l.mu.Lock()
	c.l.removeLocked(c)
	c.l.mu.Unlock()
	return err
}

// activity is what a connection that holds a slot lets its server say.
type activity interface{ SetActive(bool) }

// markActive tells c's slot, if it has one, whether it serves a request.
func markActive(c net.Conn, on bool) {
	for c != nil {
		if a, ok := c.(activity); ok {
			a.SetActive(on)
			return
		}
		switch w := c.(type) {
		case *prefixConn:
			c = w.Conn
		case interface{ Unwrap() net.Conn }:
			c = w.Unwrap()
		default:
			return
		}
	}
}

// ConnState is a net/http.Server.ConnState hook that tells a SlotListener
// which connections serve a request: set it on the server of a
// SlotListener's connections (the lean loop says so itself).
func ConnState(c net.Conn, st http.ConnState) {
	switch st {
	case http.StateActive:
		markActive(c, true)
	case http.StateIdle:
		markActive(c, false)
	}
}
