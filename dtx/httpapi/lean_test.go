package httpapi_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-db/sluice/dtx"
	"github.com/sluice-db/sluice/dtx/httpapi"
)

type leanEnv struct {
	ls    *httpapi.Server
	addr  string
	serve chan error
}

// newLean serves a coordinator on the null store through httpapi.Server.
func newLean(t *testing.T, headerTimeout time.Duration) *leanEnv {
	return newLeanServer(t, &http.Server{ReadHeaderTimeout: headerTimeout})
}

// newLeanServer is newLean with the server's timeouts as given.
func newLeanServer(t *testing.T, srv *http.Server) *leanEnv {
	cfg := dtx.DefaultConfig()
	cfg.CheckBranchURLs = false
	reg := prometheus.NewRegistry()
	c, err := dtx.New(cfg, nullStore{}, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	h := httpapi.Handler(c, reg)
	srv.Handler = h
	ls := httpapi.NewServer(srv, h)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &leanEnv{ls: ls, addr: ln.Addr().String(), serve: make(chan error, 1)}
	go func() { e.serve <- ls.Serve(ln) }()
	t.Cleanup(func() { ls.Close(); c.Close() })
	return e
}

func (e *leanEnv) dial(t *testing.T) (net.Conn, *bufio.Reader) {
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

func post(path, body string, extra ...string) string {
	return "POST " + path + " HTTP/1.1\r\nHost: x\r\n" + strings.Join(extra, "") + "Content-Length: " + strconv.Itoa(len(body)) +
		"\r\nContent-Type: application/json\r\n\r\n" + body
}

func tccBody(gid string) string { return `{"gid":"` + gid + `","trans_type":"tcc","protocol":"http"}` }

func read(t *testing.T, br *bufio.Reader) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func write(t *testing.T, c net.Conn, s string) {
	t.Helper()
	if _, err := io.WriteString(c, s); err != nil {
		t.Fatal(err)
	}
}

const success = `{"dtm_result":"SUCCESS"}` + "\n"

// TestLeanKeepAlive: dtm client's requests on one connection are answered
// by the lean loop, with net/http's headers and bytes.
func TestLeanKeepAlive(t *testing.T) {
	e := newLean(t, 10*time.Second)
	c, br := e.dial(t)
	for i := 0; i < 3; i++ {
		write(t, c, post("/api/dtmsvr/prepare", tccBody("k"+strconv.Itoa(i))))
		resp, body := read(t, br)
		if resp.StatusCode != 200 || body != success || resp.Header.Get("Content-Type") != "application/json; charset=utf-8" ||
			resp.ContentLength != int64(len(success)) || resp.Header.Get("Date") == "" || resp.Close {
			t.Fatalf("prepare %d: HTTP %d %q %v", i, resp.StatusCode, body, resp.Header)
		}
	}
	write(t, c, "GET /api/dtmsvr/newGid HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, body := read(t, br); resp.StatusCode != 200 || !strings.HasPrefix(body, `{"dtm_result":"SUCCESS","gid":"`) {
		t.Fatalf("newGid: HTTP %d %q", resp.StatusCode, body)
	}
	if e.ls.LeanRequests() != 4 || e.ls.HandedOff() != 0 {
		t.Fatalf("lean %d, handed off %d; want 4 and 0", e.ls.LeanRequests(), e.ls.HandedOff())
	}
}

// TestLeanErrorsMatchNetHTTP: an error answer of the lean loop has the
// status and body net/http's path gives for the same request.
func TestLeanErrorsMatchNetHTTP(t *testing.T) {
	e := newLean(t, 10*time.Second)
	for _, body := range []string{`{"gid":"e1","trans_type":"workflow"}`, `{"gid": `, `{"gid":"e2","trans_type":"saga"}`} {
		c, br := e.dial(t)
		write(t, c, post("/api/dtmsvr/prepare", body))
		lean, leanBody := read(t, br)
		c2, br2 := e.dial(t)
		write(t, c2, strings.Replace(post("/api/dtmsvr/prepare", body), "HTTP/1.1", "HTTP/1.0", 1))
		std, stdBody := read(t, br2)
		if lean.StatusCode != std.StatusCode || leanBody != stdBody || lean.StatusCode/100 != 4 {
			t.Errorf("%s: lean HTTP %d %q, net/http HTTP %d %q", body, lean.StatusCode, leanBody, std.StatusCode, stdBody)
		}
	}
	if e.ls.LeanRequests() != 3 || e.ls.HandedOff() != 3 {
		t.Fatalf("lean %d, handed off %d; want 3 and 3", e.ls.LeanRequests(), e.ls.HandedOff())
	}
}

func TestLeanConnectionClose(t *testing.T) {
	e := newLean(t, 10*time.Second)
	c, br := e.dial(t)
	write(t, c, post("/api/dtmsvr/prepare", tccBody("cc"), "Connection: close\r\n"))
	resp, body := read(t, br)
	if resp.StatusCode != 200 || body != success || !resp.Close {
		t.Fatalf("HTTP %d %q close %v", resp.StatusCode, body, resp.Close)
	}
	if n, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after Connection: close: read %v %v, want EOF", n, err)
	}
	if e.ls.LeanRequests() != 1 {
		t.Fatalf("lean %d, want 1", e.ls.LeanRequests())
	}
}

// TestLeanFallbacks: what the lean loop does not take goes to net/http,
// with the bytes already read, and is answered as net/http answers it.
func TestLeanFallbacks(t *testing.T) {
	e := newLean(t, 10*time.Second)
	chunked := "POST /api/dtmsvr/prepare HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
		strconv.FormatInt(int64(len(tccBody("f1"))), 16) + "\r\n" + tccBody("f1") + "\r\n0\r\n\r\n"
	for i, c := range []struct {
		name, req string
		code      int
	}{
		{"chunked body", chunked, 200},
		{"HTTP/1.0", strings.Replace(post("/api/dtmsvr/prepare", tccBody("f2")), "HTTP/1.1", "HTTP/1.0", 1), 200},
		{"query string", post("/api/dtmsvr/prepare?x=1", tccBody("f3")), 200},
		{"metrics", "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 200},
		{"version", "GET /api/dtmsvr/version HTTP/1.1\r\nHost: x\r\n\r\n", 200},
		{"no Host", "POST /api/dtmsvr/prepare HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}", 400},
		{"bad Content-Length", "POST /api/dtmsvr/prepare HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n{}", 400},
		{"two Content-Lengths", "POST /api/dtmsvr/prepare HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400},
		{"obs-fold", "POST /api/dtmsvr/prepare HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\nContent-Length: 2\r\n\r\n{}", 400},
		{"bad request line", "POST /api/dtmsvr/prepare HTTP/1.1 x\r\nHost: x\r\n\r\n", 400},
	} {
		conn, br := e.dial(t)
		write(t, conn, c.req)
		resp, body := read(t, br)
		if resp.StatusCode != c.code {
			t.Errorf("%s: HTTP %d %q, want %d", c.name, resp.StatusCode, body, c.code)
		}
		if e.ls.HandedOff() != int64(i+1) {
			t.Errorf("%s: %d connections handed off, want %d", c.name, e.ls.HandedOff(), i+1)
		}
	}
	if e.ls.LeanRequests() != 0 {
		t.Fatalf("lean %d, want 0", e.ls.LeanRequests())
	}
}

// TestLeanExpectContinue: net/http sends 100 Continue, then the answer.
func TestLeanExpectContinue(t *testing.T) {
	e := newLean(t, 10*time.Second)
	c, br := e.dial(t)
	body := tccBody("ec")
	write(t, c, "POST /api/dtmsvr/prepare HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n")
	line, err := br.ReadString('\n')
	if err != nil || line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("got %q %v, want 100 Continue", line, err)
	}
	if _, err := br.ReadString('\n'); err != nil { // the blank line after it
		t.Fatal(err)
	}
	write(t, c, body)
	if resp, got := read(t, br); resp.StatusCode != 200 || got != success {
		t.Fatalf("HTTP %d %q", resp.StatusCode, got)
	}
	if e.ls.HandedOff() != 1 {
		t.Fatalf("handed off %d, want 1", e.ls.HandedOff())
	}
}

// TestLeanPipelined: requests sent at once are answered in order; the
// third, which the lean loop does not take, reaches net/http from the
// bytes the lean loop had already read.
func TestLeanPipelined(t *testing.T) {
	e := newLean(t, 10*time.Second)
	c, br := e.dial(t)
	write(t, c, post("/api/dtmsvr/prepare", tccBody("p1"))+post("/api/dtmsvr/prepare", tccBody("p2"))+
		"GET /api/dtmsvr/query?gid=p1 HTTP/1.1\r\nHost: x\r\n\r\n"+post("/api/dtmsvr/prepare", tccBody("p3")))
	for i, want := range []string{success, success, `{"branches":[],"transaction":null}` + "\n", success} {
		if resp, body := read(t, br); resp.StatusCode != 200 || body != want {
			t.Fatalf("response %d: HTTP %d %q, want %q", i+1, resp.StatusCode, body, want)
		}
	}
	if e.ls.LeanRequests() != 2 || e.ls.HandedOff() != 1 {
		t.Fatalf("lean %d, handed off %d; want 2 and 1", e.ls.LeanRequests(), e.ls.HandedOff())
	}
}

// TestLeanSplitHeader: a header that arrives in pieces is read whole.
func TestLeanSplitHeader(t *testing.T) {
	e := newLean(t, 10*time.Second)
	c, br := e.dial(t)
	req := post("/api/dtmsvr/prepare", tccBody("s1"))
	for _, part := range []string{req[:7], req[7:30], req[30 : len(req)-10], req[len(req)-10:]} {
		write(t, c, part)
		time.Sleep(20 * time.Millisecond) // separate segments, so separate reads
	}
	if resp, body := read(t, br); resp.StatusCode != 200 || body != success {
		t.Fatalf("HTTP %d %q", resp.StatusCode, body)
	}
	if e.ls.LeanRequests() != 1 {
		t.Fatalf("lean %d, want 1", e.ls.LeanRequests())
	}
}

// TestLeanHeaderTimeout: a client that stops inside its header, or sends
// nothing on a new connection, is dropped after ReadHeaderTimeout, without
// an answer (as net/http does).
func TestLeanHeaderTimeout(t *testing.T) {
	e := newLean(t, 100*time.Millisecond)
	c, br := e.dial(t)
	write(t, c, "POST /api/dtmsvr/prepare HTTP/1.1\r\nHost: x\r\n")
	if b, err := br.ReadByte(); err == nil {
		t.Fatalf("read %q, want the connection closed", b)
	}
	_, silent := e.dial(t) // the first request's header is due from the connection's start
	if b, err := silent.ReadByte(); err == nil {
		t.Fatalf("silent connection: read %q, want it closed", b)
	}
	if e.ls.LeanRequests() != 0 || e.ls.HandedOff() != 0 {
		t.Fatalf("lean %d, handed off %d", e.ls.LeanRequests(), e.ls.HandedOff())
	}
}

// TestLeanShutdown: idle connections are closed, Serve returns
// ErrServerClosed and Shutdown returns nil.
func TestLeanShutdown(t *testing.T) {
	e := newLean(t, 10*time.Second)
	c, br := e.dial(t)
	write(t, c, post("/api/dtmsvr/prepare", tccBody("sd")))
	read(t, br)
	c2, br2 := e.dial(t) // handed to net/http, idle there
	write(t, c2, "GET /api/dtmsvr/version HTTP/1.1\r\nHost: x\r\n\r\n")
	read(t, br2)
	if err := e.ls.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-e.serve; !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve: %v", err)
	}
	for i, r := range []*bufio.Reader{br, br2} {
		if _, err := r.ReadByte(); err == nil {
			t.Fatalf("connection %d still open", i+1)
		}
	}
}

// TestLeanReadAndIdleTimeout: a request whose body stops half-way is
// dropped after ReadTimeout, and an idle keep-alive connection after
// IdleTimeout, as net/http does (issue 16: 10,000 half-sent requests stayed
// open forever).
func TestLeanReadAndIdleTimeout(t *testing.T) {
	// The timeouts are what is tested, so they are long enough that a busy
	// machine (the second request must be read whole within ReadTimeout of
	// its connection's start) cannot trip them early: the test waits them
	// out once each, about 6 s.
	e := newLeanServer(t, &http.Server{ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 3 * time.Second, IdleTimeout: 3 * time.Second})
	c, br := e.dial(t)
	full := post("/api/dtmsvr/prepare", tccBody("half"))
	write(t, c, full[:len(full)-5]) // the body's last bytes never come
	if b, err := br.ReadByte(); err == nil {
		t.Fatalf("half-sent request: read %q, want the connection closed", b)
	}
	c, br = e.dial(t)
	write(t, c, post("/api/dtmsvr/prepare", tccBody("idle")))
	if resp, body := read(t, br); resp.StatusCode != 200 || body != success {
		t.Fatalf("answer %d %q", resp.StatusCode, body)
	}
	if b, err := br.ReadByte(); err == nil { // then idle: closed
		t.Fatalf("idle connection: read %q, want it closed", b)
	}
	if e.ls.LeanRequests() != 1 {
		t.Fatalf("lean requests %d, want 1", e.ls.LeanRequests())
	}
}
