package dtx

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestBranchClient: requests arrive as net/http would send them (method,
// query, body, headers), answers come back whole, kept-alive connections
// are reused, and one that the server closed while idle is replaced
// without failing the call.
func TestBranchClient(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/echo":
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, r.Method+" "+r.URL.Query().Get("gid")+" "+r.Header.Get("X-Trace")+" "+string(body))
		case "/big":
			io.WriteString(w, strings.Repeat("x", 100<<10))
		case "/conflict":
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, `{"dtm_result":"FAILURE"}`)
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Config.IdleTimeout = 300 * time.Millisecond
	srv.Start()
	defer srv.Close()
	bc := newBranchClient(srv.Client(), 8)
	defer bc.close()
	ctx := context.Background()
	call := func(path, method string, body string) answer {
		t.Helper()
		u, _ := url.Parse(srv.URL + path + "?gid=g%201")
		a, err := bc.do(ctx, method, u, []byte(body), map[string]string{"x-trace": "t1"}, 5*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return a
	}
	if a := call("/echo", http.MethodPost, `{"a":1}`); a.status != 200 || string(a.body) != `POST g 1 t1 {"a":1}` {
		t.Errorf("echo: %d %q", a.status, a.body)
	}
	if a := call("/echo", http.MethodGet, ""); a.status != 200 || string(a.body) != "GET g 1 t1 " {
		t.Errorf("echo GET: %d %q", a.status, a.body)
	}
	if a := call("/conflict", http.MethodGet, ""); a.status != http.StatusConflict || !strings.Contains(string(a.body), "FAILURE") {
		t.Errorf("conflict: %d %q", a.status, a.body)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections for three calls in a row, want 1", n)
	}
	if a := call("/big", http.MethodGet, ""); len(a.body) != maxAnswer {
		t.Errorf("big answer: %d bytes", len(a.body))
	}
	// The oversized answer's connection was dropped; this one is pooled,
	// then closed by the server while idle.
	call("/echo", http.MethodGet, "")
	time.Sleep(time.Second)
	if a := call("/echo", http.MethodGet, ""); a.status != 200 {
		t.Errorf("after the idle timeout: %d %q", a.status, a.body)
	}
	if n := conns.Load(); n != 3 {
		t.Errorf("%d connections, want 3 (first, after the oversized answer, after the idle timeout)", n)
	}
	u, _ := url.Parse(srv.URL + "/echo")
	if _, err := bc.do(ctx, http.MethodGet, u, nil, map[string]string{"X-Bad": "a\r\nInjected: 1"}, time.Second); err == nil {
		t.Error("a header value with CRLF was sent")
	}
}
