package httpapi

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-db/sluice/dtx"
	"github.com/sluice-db/sluice/dtx/memstore"
)

// TestInflightBodyBudget: while one request holds the in-flight body
// budget, another that would pass it is answered 503 with Retry-After, on
// the lean loop, on net/http and on JSON-RPC, and its connection still
// serves; once the budget is back, the same request is served (issue 30:
// concurrent large bodies took the process to 6x their size).
func TestInflightBodyBudget(t *testing.T) {
	cfg := dtx.DefaultConfig()
	cfg.CheckBranchURLs = false
	c, err := dtx.New(cfg, memstore.New(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	api := NewHandler(c, nil, Config{MaxInflightBody: 1000})
	h := api.(*handler)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(&http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}, api)
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	defer srv.Close()
	dial := func() (net.Conn, *bufio.Reader) {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
		return conn, bufio.NewReader(conn)
	}
	send := func(conn net.Conn, br *bufio.Reader, path string, body string) *http.Response {
		t.Helper()
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		resp.Body.Close()
		return resp
	}

	// A holds 900 bytes: its headers and part of its body have arrived.
	a, abr := dial()
	defer a.Close()
	fmt.Fprintf(a, "POST /api/dtmsvr/submit HTTP/1.1\r\nHost: h\r\nContent-Length: 900\r\n\r\n%s", strings.Repeat(" ", 10))
	for h.budget.used.Load() < 900 {
		time.Sleep(time.Millisecond) // until the server has read A's header (progress, not time)
	}
	body := strings.Repeat(" ", 200)
	b, bbr := dial()
	defer b.Close()
	for _, path := range []string{"/api/dtmsvr/submit", "/api/dtmsvr/submit?via=nethttp", "/api/json-rpc"} {
		resp := send(b, bbr, path, body)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
			t.Fatalf("%s while the budget is held: HTTP %d, Retry-After %q", path, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	// A's body completes; its answer frees the budget.
	fmt.Fprint(a, strings.Repeat(" ", 890))
	if resp, err := http.ReadResponse(abr, nil); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("A: %v %v", resp, err)
	}
	if u := h.budget.used.Load(); u != 0 {
		t.Fatalf("budget held after every answer: %d", u)
	}
	for _, path := range []string{"/api/dtmsvr/submit", "/api/dtmsvr/submit?via=nethttp"} {
		if resp := send(b, bbr, path, body); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("%s with the budget free: HTTP %d, want 400 (malformed JSON)", path, resp.StatusCode)
		}
	}
	// One request alone may exceed the budget.
	c2, c2br := dial()
	defer c2.Close()
	if resp := send(c2, c2br, "/api/dtmsvr/submit", strings.Repeat(" ", 5000)); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a lone large body: HTTP %d", resp.StatusCode)
	}
}
