package wire

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-db/sluice/internal/httpwire"
	"github.com/sluice-db/sluice/internal/rawconn"
)

// branchClient makes the coordinator's plain-HTTP branch calls over pooled
// keep-alive connections, writing the request and reading the answer in
// the calling goroutine. net/http's Transport hands every request to two
// goroutines per connection (a writer and a reader), and on a small host
// shared with the business services those handoffs were about a fifth of
// the coordinator's CPU. https URLs go through net/http.
type branchClient struct {
	fallback *http.Client
	maxIdle  int // per host
	// dial connects (the host policy's dialer; nil: a plain dial).
	dial func(ctx context.Context, d *net.Dialer, network, addr string) (net.Conn, error)
	// netHTTP sends every call through fallback; noRaw leaves connections
	// unwrapped by rawconn (Options).
	netHTTP, noRaw bool

	mu     sync.Mutex
	idle   map[string][]*branchConn
	closed bool
}

type branchConn struct {
	c  net.Conn
	br *bufio.Reader
}

func newBranchClient(fallback *http.Client, maxIdle int) *branchClient {
	return &branchClient{fallback: fallback, maxIdle: maxIdle, idle: map[string][]*branchConn{}}
}

// answer is a branch's HTTP status and (at most 64 KiB of) body.
type answer struct {
	status int
	body   []byte
}

const maxAnswer = 64 << 10

// do sends method u with body and headers, and returns the answer. The
// timeout bounds the whole call; ctx cancels it.
func (bc *branchClient) do(ctx context.Context, method string, u *url.URL, body []byte, header map[string]string, timeout time.Duration) (answer, error) {
	if u.Scheme != "http" || bc.netHTTP {
		return bc.viaNetHTTP(ctx, method, u, body, header, timeout)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "80")
	}
	req, err := buildRequest(method, u, body, header)
	if err != nil {
		return answer{}, err
	}
	deadline := time.Now().Add(timeout)
	for attempt := 0; ; attempt++ {
		bc2, reused, err := bc.get(ctx, host, deadline)
		if err != nil {
			return answer{}, err
		}
		a, keep, err := bc2.roundTrip(ctx, req, deadline)
		if err == nil {
			if keep {
				bc.put(host, bc2)
			} else {
				bc2.c.Close()
			}
			return a, nil
		}
		bc2.c.Close()
		// A kept-alive connection the server closed meanwhile fails before
		// any answer: try once more on a new one, as net/http does. (Branch
		// calls are idempotent by dtm's protocol in any case.)
		if !reused || attempt > 0 || !errors.Is(err, errNoAnswer) || ctx.Err() != nil {
			return answer{}, err
		}
	}
}

var errNoAnswer = errors.New("connection closed before an answer")

func buildRequest(method string, u *url.URL, body []byte, header map[string]string) ([]byte, error) {
	var b bytes.Buffer
	b.Grow(256 + len(body))
	b.WriteString(method)
	b.WriteByte(' ')
	b.WriteString(u.RequestURI())
	b.WriteString(" HTTP/1.1\r\nHost: ")
	b.WriteString(u.Host)
	b.WriteString("\r\nUser-Agent: sluice-dtx\r\nContent-Type: application/json\r\n")
	for k, v := range header {
		if strings.ContainsAny(k, "\r\n: ") || strings.ContainsAny(v, "\r\n") {
			return nil, fmt.Errorf("branch header %q: invalid name or value", k)
		}
		b.WriteString(http.CanonicalHeaderKey(k))
		b.WriteString(": ")
		b.WriteString(v)
		b.WriteString("\r\n")
	}
	if len(body) > 0 || method == http.MethodPost {
		b.WriteString("Content-Length: ")
		b.WriteString(strconv.Itoa(len(body)))
		b.WriteString("\r\n")
	}
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes(), nil
}

func (bc *branchClient) get(ctx context.Context, host string, deadline time.Time) (*branchConn, bool, error) {
	bc.mu.Lock()
	if l := bc.idle[host]; len(l) > 0 {
		c := l[len(l)-1]
		bc.idle[host] = l[:len(l)-1]
		bc.mu.Unlock()
		return c, true, nil
	}
	bc.mu.Unlock()
	d := net.Dialer{Deadline: deadline}
	var c net.Conn
	var err error
	if bc.dial != nil {
		c, err = bc.dial(ctx, &d, "tcp", host)
	} else {
		c, err = d.DialContext(ctx, "tcp", host)
	}
	if err != nil {
		return nil, false, err
	}
	if !bc.noRaw {
		c = rawconn.Wrap(c) // reads and writes without the scheduler's syscall state
	}
	return &branchConn{c: c, br: bufio.NewReaderSize(c, 4096)}, false, nil
}

func (bc *branchClient) put(host string, c *branchConn) {
	bc.mu.Lock()
	if !bc.closed && len(bc.idle[host]) < bc.maxIdle {
		bc.idle[host] = append(bc.idle[host], c)
		c = nil
	}
	bc.mu.Unlock()
	if c != nil {
		c.c.Close()
	}
}

// roundTrip writes req and reads one answer; keep tells whether the
// connection can carry another request.
func (c *branchConn) roundTrip(ctx context.Context, req []byte, deadline time.Time) (answer, bool, error) {
	if err := c.c.SetDeadline(deadline); err != nil {
		return answer{}, false, err
	}
	// Cancelling ctx (the coordinator closing) breaks the call at once.
	stop := context.AfterFunc(ctx, func() { _ = c.c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := c.c.Write(req); err != nil {
		return answer{}, false, errors.Join(errNoAnswer, err)
	}
	if _, err := c.br.Peek(1); err != nil {
		if ctx.Err() != nil {
			return answer{}, false, ctx.Err()
		}
		if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err) {
			return answer{}, false, errors.Join(errNoAnswer, err)
		}
		return answer{}, false, err
	}
	a, keep, err := readAnswer(c.br)
	if err != nil && ctx.Err() != nil {
		return answer{}, false, ctx.Err()
	}
	return a, keep, err
}

// readAnswer reads one response from br. The usual shape (HTTP/1.1, a
// status with a body, a Content-Length, no Transfer-Encoding) is parsed
// here; http.ReadResponse, which builds a header map and a body reader,
// was 7 % of the coordinator's CPU. Anything else goes to
// http.ReadResponse, which finds the same bytes unread.
func readAnswer(br *bufio.Reader) (answer, bool, error) {
	if a, keep, ok, err := readLeanAnswer(br); ok || err != nil {
		return a, keep, err
	}
	return readNetHTTPAnswer(br)
}

// readNetHTTPAnswer reads one response with net/http.
func readNetHTTPAnswer(br *bufio.Reader) (answer, bool, error) {
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return answer{}, false, err
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	resp.Body.Close()
	if err != nil {
		return answer{}, false, err
	}
	keep := !resp.Close && len(data) <= maxAnswer
	if len(data) > maxAnswer {
		data = data[:maxAnswer]
	}
	return answer{status: resp.StatusCode, body: data}, keep, nil
}

// readLeanAnswer reads a response of the usual shape; ok is false, with
// nothing consumed, for any other.
func readLeanAnswer(br *bufio.Reader) (a answer, keep, ok bool, err error) {
	var head []byte
	headLen := 0
	for {
		buf, _ := br.Peek(br.Buffered())
		if i := bytes.Index(buf, []byte("\r\n\r\n")); i >= 0 {
			head, headLen = buf[:i+2], i+4
			break
		}
		if br.Buffered() == br.Size() {
			return a, false, false, nil
		}
		if _, err := br.Peek(br.Buffered() + 1); err != nil {
			return a, false, false, nil // http.ReadResponse reports the torn head
		}
	}
	if n := bytes.Count(head, []byte("\r\n")); bytes.Count(head, []byte("\n")) != n || bytes.Count(head, []byte("\r")) != n {
		return a, false, false, nil // bare LF or CR: net/http's rules
	}
	line, rest, _ := bytes.Cut(head, []byte("\r\n"))
	// "HTTP/1.1 200" and an optional reason phrase. 1xx, 204 and 304 have
	// no body and are left to net/http.
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) || len(line) > 12 && line[12] != ' ' {
		return a, false, false, nil
	}
	code, okCode := httpwire.Digits(line[9:12])
	if !okCode || code < 200 || code == http.StatusNoContent || code == http.StatusNotModified {
		return a, false, false, nil
	}
	length, lengths := 0, 0
	keep = true
	for len(rest) > 0 {
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		name, value, found := bytes.Cut(line, []byte(":"))
		if !found || !httpwire.Token(name) || !httpwire.FieldValue(value) {
			return a, false, false, nil // obs-fold, bad names, control bytes
		}
		value = bytes.Trim(value, " \t")
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			lengths++
			n, okLen := httpwire.Digits(value)
			if !okLen {
				return a, false, false, nil
			}
			length = n
		case bytes.EqualFold(name, []byte("Connection")):
			switch {
			case bytes.EqualFold(value, []byte("close")):
				keep = false
			case bytes.EqualFold(value, []byte("keep-alive")):
			default:
				return a, false, false, nil
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return a, false, false, nil
		}
	}
	if lengths != 1 {
		return a, false, false, nil
	}
	if _, err := br.Discard(headLen); err != nil {
		return a, false, true, err
	}
	data := make([]byte, min(length, maxAnswer))
	if _, err := io.ReadFull(br, data); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return a, false, true, err
	}
	// An oversized answer is cut, and its connection dropped unread.
	return answer{status: code, body: data}, keep && length <= maxAnswer, true, nil
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}

func (bc *branchClient) viaNetHTTP(ctx context.Context, method string, u *url.URL, body []byte, header map[string]string, timeout time.Duration) (answer, error) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if len(body) > 0 {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(rctx, method, u.String(), rd)
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := bc.fallback.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	return answer{status: resp.StatusCode, body: data}, nil
}

// close drops the idle connections; calls in flight finish on theirs.
func (bc *branchClient) close() {
	bc.mu.Lock()
	idle := bc.idle
	bc.idle, bc.closed = map[string][]*branchConn{}, true
	bc.mu.Unlock()
	for _, l := range idle {
		for _, c := range l {
			c.c.Close()
		}
	}
	bc.fallback.CloseIdleConnections()
}
