package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-db/sluice/dtx"
	"github.com/sluice-db/sluice/internal/httpwire"
	"github.com/sluice-db/sluice/internal/rawconn"
)

// Server serves the calls every transaction makes (prepare, submit, abort,
// registerBranch, newGid) on keep-alive HTTP/1.1 connections with a lean
// loop of its own, and hands every other connection, with the bytes already
// read, to a net/http.Server. net/http's per-request machinery (a
// background read, contexts, header maps, a response object, two buffered
// writers) costs more CPU than parsing dtm's client's plain requests.
//
// The lean loop takes a request only when it is plain: a hot route without
// a query, HTTP/1.1, a Host header, a Content-Length body (none for GET) of
// at most leanMaxBody, no Transfer-Encoding, Expect or Upgrade, Connection
// absent, keep-alive or close, and a header that fits the read buffer.
// Anything else, malformed requests included, goes to net/http from that
// request on, so that net/http decides the 4xx. ReadHeaderTimeout of the
// net/http.Server bounds the header read here too.
type Server struct {
	srv  *http.Server
	api  *handler
	base context.Context
	stop context.CancelFunc

	mu      sync.Mutex
	conns   map[*leanConn]struct{}
	closing bool
	wg      sync.WaitGroup
	closed  atomic.Bool // closing, for the request loop without the mutex

	handoff *handoffListener
	lean    atomic.Int64 // requests the lean loop answered
	handed  atomic.Int64 // connections handed to net/http
}

// leanMaxBody is the largest body the lean loop reads; larger ones (up to
// maxBody) go to net/http, which answers too large ones with 400.
const leanMaxBody = 1 << 20

// NewServer serves srv.Handler's routes; api is what Handler returned (the
// lean loop calls it directly; anything else disables the lean loop).
func NewServer(srv *http.Server, api http.Handler) *Server {
	h, _ := api.(*handler)
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{srv: srv, api: h, base: ctx, stop: cancel, conns: map[*leanConn]struct{}{}}
}

// Serve accepts connections on ln until Shutdown or Close (then it returns
// http.ErrServerClosed) or an accept error.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return http.ErrServerClosed
	}
	s.handoff = &handoffListener{ln: ln, conns: make(chan net.Conn), done: make(chan struct{})}
	s.mu.Unlock()
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.handoff) }()
	var err error
	for {
		var c net.Conn
		c, err = ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(5 * time.Millisecond) // as net/http: wait out a full accept queue
				continue
			}
			break
		}
		if s.api == nil {
			s.handOff(c, nil)
			continue
		}
		lc := &leanConn{c: c}
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			c.Close()
			continue
		}
		s.conns[lc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(lc)
	}
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	s.handoff.closeOnce()
	if closing {
		return http.ErrServerClosed
	}
	<-errc
	return err
}

// Shutdown stops accepting, closes idle connections, lets the requests in
// flight finish, and then shuts the net/http.Server down (ctx bounds both).
func (s *Server) Shutdown(ctx context.Context) error {
	s.beginClose(false)
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	var err error
	for idle := time.NewTicker(10 * time.Millisecond); ; {
		select {
		case <-done:
		case <-ctx.Done():
			err = ctx.Err()
			s.beginClose(true)
		case <-idle.C:
			s.beginClose(false) // connections that went idle since
			continue
		}
		idle.Stop()
		break
	}
	if herr := s.srv.Shutdown(ctx); err == nil {
		err = herr
	}
	s.stop()
	return err
}

// Close closes the listener and every connection at once.
func (s *Server) Close() error {
	s.beginClose(true)
	s.stop()
	err := s.srv.Close()
	s.wg.Wait()
	return err
}

// beginClose marks the server closing, closes the listener and the idle
// lean connections (all of them if all).
func (s *Server) beginClose(all bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closing {
		s.closing = true
		s.closed.Store(true)
		if s.handoff != nil {
			s.handoff.ln.Close()
		}
	}
	for lc := range s.conns {
		if all || lc.idle.Load() {
			lc.c.Close()
		}
	}
}

// LeanRequests is how many requests the lean loop answered, and HandedOff
// how many connections went to net/http (for tests and metrics).
func (s *Server) LeanRequests() int64 { return s.lean.Load() }
func (s *Server) HandedOff() int64    { return s.handed.Load() }

type leanConn struct {
	c    net.Conn
	idle atomic.Bool
}

var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}

func (s *Server) serveConn(lc *leanConn) {
	defer s.wg.Done()
	c := lc.c
	// Requests are read and answers written with raw system calls (see
	// rawconn); net/http, if it takes the connection over, gets c itself.
	raw := c
	if !s.api.noRaw {
		raw = rawconn.Wrap(c)
	}
	br := readerPool.Get().(*bufio.Reader)
	br.Reset(raw)
	handed, keepReader := false, false // c, and br, went to net/http
	defer func() {
		s.mu.Lock()
		delete(s.conns, lc)
		s.mu.Unlock()
		if !handed {
			c.Close()
		}
		if !keepReader {
			br.Reset(nil)
			readerPool.Put(br)
		}
	}()
	var out []byte
	var body []byte
	timeout := s.srv.ReadHeaderTimeout
	reqStart := time.Now()
	if timeout > 0 {
		// As net/http: the first request's header must arrive in time from
		// the connection's start; later ones from their first byte (an idle
		// keep-alive connection waits without a deadline).
		_ = c.SetReadDeadline(time.Now().Add(timeout))
	}
	for first := true; ; first = false {
		lc.idle.Store(true)
		markActive(c, false) // its slot may be taken for another client's connection
		if s.closed.Load() {
			return
		}
		if idle := s.srv.IdleTimeout; idle > 0 && !first {
			_ = c.SetReadDeadline(time.Now().Add(idle)) // as net/http: an idle keep-alive connection is closed
		}
		if _, err := br.Peek(1); err != nil {
			return // closed by the client (or by Shutdown while idle), or silent past the timeout
		}
		lc.idle.Store(false)
		markActive(c, true)
		readAt := time.Now()
		if !first {
			reqStart = readAt
			if timeout > 0 {
				_ = c.SetReadDeadline(reqStart.Add(timeout))
			} else {
				_ = c.SetReadDeadline(time.Time{})
			}
		}
		req, ok, err := parseLean(br)
		if err != nil {
			return // header timeout or a broken connection: net/http closes too
		}
		if !ok {
			_ = c.SetReadDeadline(time.Time{})
			handed = true
			if br.Buffered() == 0 {
				s.handOff(c, nil)
				return // br goes back to the pool
			}
			keepReader = true
			s.handOff(c, br)
			return
		}
		_, _ = br.Discard(req.headerLen)
		if rt := s.srv.ReadTimeout; rt > 0 {
			_ = c.SetReadDeadline(reqStart.Add(rt)) // as net/http: the whole request within ReadTimeout
		} else {
			_ = c.SetReadDeadline(time.Time{})
		}
		if s.closed.Load() {
			req.close = true // as net/http while shutting down: tell the client
		}
		held := int64(req.contentLength)
		if !s.api.budget.acquire(held) {
			// Past the in-flight body budget: drop the body unbuffered
			// and answer 503, keeping the connection.
			if _, err := br.Discard(req.contentLength); err != nil {
				return
			}
			out = appendError(out[:0], errBusy, req.close)
			s.lean.Add(1)
			if _, err := raw.Write(out); err != nil || req.close {
				return
			}
			continue
		}
		if cap(body) < req.contentLength {
			body = make([]byte, req.contentLength)
		}
		body = body[:req.contentLength]
		if _, err := io.ReadFull(br, body); err != nil {
			s.api.budget.release(held)
			return
		}
		var tr *dtx.Trace
		if req.route == routeSubmit {
			tr = dtx.NewTrace(readAt)
		}
		out = s.answer(out[:0], req, body, tr)
		s.api.budget.release(held)
		s.lean.Add(1) // before the answer leaves, so that whoever reads it sees the count
		if _, err := raw.Write(out); err != nil {
			return
		}
		s.api.c.ObserveTrace(tr, time.Now())
		if req.close {
			return
		}
		if cap(out) > maxPooled {
			out = nil
		}
		if cap(body) > maxPooled {
			body = nil
		}
	}
}

// answer runs one request and appends the whole response to out.
// A submit carries tr (see dtx.Trace).
func (s *Server) answer(out []byte, req leanRequest, body []byte, tr *dtx.Trace) (res []byte) {
	start := len(out)
	defer func() {
		if p := recover(); p != nil {
			recovered(s.api.c.Log(), req.path(), p)
			var b bytes.Buffer
			_ = json.NewEncoder(&b).Encode(internalError)
			res = appendResponse(out[:start], http.StatusInternalServerError, b.Bytes(), true)
		}
	}()
	var err error
	switch req.route {
	case routeNewGid:
		return appendResponse(out, http.StatusOK, s.api.newGidBody(nil), req.close)
	case routeSubmit:
		err = doTrans(dtx.WithTrace(s.base, tr), s.api.c.Submit, body)
	case routePrepare:
		err = doTrans(s.base, s.api.c.Prepare, body)
	case routeAbort:
		err = doTrans(s.base, s.api.c.Abort, body)
	case routeRegisterBranch:
		err = s.api.doRegisterBranch(s.base, body)
	}
	if err == nil {
		return appendResponse(out, http.StatusOK, successBody, req.close)
	}
	return appendError(out, err, req.close)
}

// appendError appends the answer to err, as writeErr makes it.
func appendError(out []byte, err error, close bool) []byte {
	code, m := errorBody(err)
	var b bytes.Buffer
	_ = json.NewEncoder(&b).Encode(m) // as writeJSON: the same bytes as net/http's path
	return appendResponse(out, code, b.Bytes(), close)
}

// appendResponse appends a response with the headers net/http would send
// for writeRaw and writeJSON, in its (sorted) order.
func appendResponse(out []byte, code int, body []byte, close bool) []byte {
	out = append(out, "HTTP/1.1 "...)
	out = strconv.AppendInt(out, int64(code), 10)
	out = append(out, ' ')
	out = append(out, http.StatusText(code)...)
	out = append(out, "\r\n"...)
	if close {
		out = append(out, "Connection: close\r\n"...)
	}
	out = append(out, "Content-Length: "...)
	out = strconv.AppendInt(out, int64(len(body)), 10)
	out = append(out, "\r\nContent-Type: application/json; charset=utf-8\r\nDate: "...)
	out = appendDate(out)
	if code == http.StatusServiceUnavailable {
		out = append(out, "\r\nRetry-After: 1"...) // as writeErr
	}
	out = append(out, "\r\n\r\n"...)
	return append(out, body...)
}

// appendDate appends the current time as the Date header has it; the text
// is made once a second.
func appendDate(out []byte) []byte {
	now := time.Now().Unix()
	if d := cachedDate.Load(); d != nil && d.sec == now {
		return append(out, d.text...)
	}
	d := &dateText{sec: now, text: time.Unix(now, 0).UTC().Format(http.TimeFormat)}
	cachedDate.Store(d)
	return append(out, d.text...)
}

type dateText struct {
	sec  int64
	text string
}

var cachedDate atomic.Pointer[dateText]

// handOff gives c to net/http; br holds what was read and not consumed.
func (s *Server) handOff(c net.Conn, br *bufio.Reader) {
	s.handed.Add(1)
	if br != nil && br.Buffered() > 0 {
		c = &prefixConn{Conn: c, r: br}
	}
	select {
	case s.handoff.conns <- c:
	case <-s.handoff.done:
		c.Close()
	}
}

// prefixConn reads what its reader buffered before reading the connection.
type prefixConn struct {
	net.Conn
	r *bufio.Reader
}

func (p *prefixConn) Read(b []byte) (int, error) { return p.r.Read(b) }

// CloseWrite lets net/http half-close as it does on a *net.TCPConn.
func (p *prefixConn) CloseWrite() error {
	if cw, ok := p.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// handoffListener is the net/http.Server's listener: it yields the
// connections the lean loop hands over.
type handoffListener struct {
	ln    net.Listener
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *handoffListener) closeOnce() { l.once.Do(func() { close(l.done) }) }

func (l *handoffListener) Close() error {
	l.closeOnce()
	return nil
}

func (l *handoffListener) Addr() net.Addr { return l.ln.Addr() }

const (
	routeSubmit = iota + 1
	routePrepare
	routeAbort
	routeRegisterBranch
	routeNewGid
)

type leanRequest struct {
	route         int
	headerLen     int
	contentLength int
	close         bool
}

// parseLean looks at the request at the head of br without consuming it.
// ok is false when the request is not one the lean loop takes; err is a
// read error (the connection is done).
func parseLean(br *bufio.Reader) (req leanRequest, ok bool, err error) {
	var head []byte
	for {
		buf, _ := br.Peek(br.Buffered())
		if i := bytes.Index(buf, []byte("\r\n\r\n")); i >= 0 {
			head = buf[:i+2] // the lines, each with its CRLF
			req.headerLen = i + 4
			break
		}
		if br.Buffered() == br.Size() {
			return req, false, nil // a header this long is not dtm's client's
		}
		if _, err := br.Peek(br.Buffered() + 1); err != nil {
			if br.Buffered() > 0 && !isTimeout(err) {
				return req, false, nil // let net/http answer what there is
			}
			return req, false, err
		}
	}
	line, rest, _ := bytes.Cut(head, []byte("\r\n"))
	switch {
	case bytes.Equal(line, []byte("POST /api/dtmsvr/submit HTTP/1.1")):
		req.route = routeSubmit
	case bytes.Equal(line, []byte("POST /api/dtmsvr/prepare HTTP/1.1")):
		req.route = routePrepare
	case bytes.Equal(line, []byte("POST /api/dtmsvr/abort HTTP/1.1")):
		req.route = routeAbort
	case bytes.Equal(line, []byte("POST /api/dtmsvr/registerBranch HTTP/1.1")),
		bytes.Equal(line, []byte("POST /api/dtmsvr/registerTccBranch HTTP/1.1")):
		req.route = routeRegisterBranch
	case bytes.Equal(line, []byte("GET /api/dtmsvr/newGid HTTP/1.1")):
		req.route = routeNewGid
	default:
		return req, false, nil
	}
	hosts, lengths := 0, 0
	req.contentLength = 0
	for len(rest) > 0 {
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		name, value, found := bytes.Cut(line, []byte(":"))
		if !found || !httpwire.Token(name) || !httpwire.FieldValue(value) {
			return req, false, nil // obs-fold, bad names, control bytes: net/http's call
		}
		value = bytes.Trim(value, " \t")
		switch {
		case bytes.EqualFold(name, []byte("Host")):
			hosts++
			if len(value) == 0 || !hostChars(value) {
				return req, false, nil
			}
		case bytes.EqualFold(name, []byte("Content-Length")):
			lengths++
			n, ok := httpwire.Digits(value)
			if !ok || n > leanMaxBody {
				return req, false, nil
			}
			req.contentLength = n
		case bytes.EqualFold(name, []byte("Connection")):
			switch {
			case bytes.EqualFold(value, []byte("close")):
				req.close = true
			case bytes.EqualFold(value, []byte("keep-alive")):
			default:
				return req, false, nil
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")), bytes.EqualFold(name, []byte("Expect")),
			bytes.EqualFold(name, []byte("Upgrade")), bytes.EqualFold(name, []byte("Trailer")):
			return req, false, nil
		}
	}
	if hosts != 1 || lengths > 1 || req.route == routeNewGid && req.contentLength != 0 ||
		req.route != routeNewGid && lengths == 0 {
		return req, false, nil
	}
	return req, true, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// hostChars is a conservative Host check: names, IPv4, [IPv6] and a port.
func hostChars(b []byte) bool {
	for _, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '.' || c == '-' || c == '_' || c == ':' || c == '[' || c == ']') {
			return false
		}
	}
	return true
}

// path names the request's route, for logs.
func (r leanRequest) path() string {
	switch r.route {
	case routeSubmit:
		return "/api/dtmsvr/submit"
	case routePrepare:
		return "/api/dtmsvr/prepare"
	case routeAbort:
		return "/api/dtmsvr/abort"
	case routeRegisterBranch:
		return "/api/dtmsvr/registerBranch"
	case routeNewGid:
		return "/api/dtmsvr/newGid"
	}
	return "?"
}
