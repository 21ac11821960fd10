package dtx

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
	if u.Scheme != "http" {
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
	c, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, false, err
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
	resp, err := http.ReadResponse(c.br, nil)
	if err != nil {
		return answer{}, false, err
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	resp.Body.Close()
	if err != nil {
		if ctx.Err() != nil {
			return answer{}, false, ctx.Err()
		}
		return answer{}, false, err
	}
	keep := !resp.Close && len(data) <= maxAnswer
	if len(data) > maxAnswer {
		data = data[:maxAnswer]
	}
	return answer{status: resp.StatusCode, body: data}, keep, nil
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
