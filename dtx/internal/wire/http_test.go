package wire

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestBranchClient: requests arrive as net/http would send them (method,
// query, body, headers), answers come back whole, kept-alive connections
// are reused, and one that the server closed while idle is replaced
// without failing the call.
func TestBranchClient(t *testing.T) {
	var conns, closed atomic.Int32
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
		if s == http.StateClosed {
			closed.Add(1)
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
	// Wait until the server has closed it (observed, not a sleep: a loaded
	// machine may fire the idle timer late): the first two connections are
	// then closed, the oversized answer's and the idle one.
	sandboxtest.Eventually(t, time.Minute, "the server closed 2 connections (the idle timeout is 300 ms)", func() bool { return closed.Load() >= 2 },
		func() string { return fmt.Sprintf("%d closed", closed.Load()) })
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

// refAnswer, the reference the lean reader must agree with, is the
// net/http path alone.
var refAnswer = readNetHTTPAnswer

// checkAnswer reads raw, followed by a second response, with readAnswer
// and with refAnswer: the status, body, keep-alive verdict and error must
// agree, and a kept connection must be left where net/http leaves it.
func checkAnswer(t *testing.T, raw string) {
	const next = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext"
	gbr := bufio.NewReaderSize(strings.NewReader(raw+next), 4096)
	wbr := bufio.NewReaderSize(strings.NewReader(raw+next), 4096)
	got, gotKeep, gotErr := readAnswer(gbr)
	want, wantKeep, wantErr := refAnswer(wbr)
	if (gotErr != nil) != (wantErr != nil) {
		t.Fatalf("%q: error %v, net/http's %v", raw, gotErr, wantErr)
	}
	if gotErr != nil {
		return
	}
	if got.status != want.status || !bytes.Equal(got.body, want.body) || gotKeep != wantKeep {
		t.Fatalf("%q: %d %q keep %v, net/http: %d %q keep %v", raw, got.status, got.body, gotKeep, want.status, want.body, wantKeep)
	}
	if gotKeep {
		g, _, gErr := refAnswer(gbr)
		w, _, wErr := refAnswer(wbr)
		if g.status != w.status || !bytes.Equal(g.body, w.body) || (gErr != nil) != (wErr != nil) {
			t.Fatalf("%q: the next answer read as %d %q %v, net/http's %d %q %v", raw, g.status, g.body, gErr, w.status, w.body, wErr)
		}
	}
}

// TestReadAnswer: the lean response reader agrees with net/http on the
// answers business services send, and hands the rest to it.
func TestReadAnswer(t *testing.T) {
	for _, raw := range []string{
		"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 24\r\n\r\n{\"dtm_result\":\"SUCCESS\"}",
		"HTTP/1.1 200 OK\r\nDate: Sun, 22 Nov 2026 16:00:00 GMT\r\nContent-Length: 7\r\n\r\nSUCCESS",
		"HTTP/1.1 409 Conflict\r\ncontent-length: 7\r\n\r\nFAILURE",
		"HTTP/1.1 425\r\nContent-Length: 7\r\n\r\nONGOING",
		"HTTP/1.1 500 Internal Server Error\r\nConnection: close\r\nContent-Length: 4\r\n\r\nboom",
		"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length:  2 \r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7\r\nSUCCESS\r\n0\r\n\r\n",
		"HTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.0 200 OK\r\n\r\nuntil the end",
		"HTTP/1.1 200 OK\r\n\r\nuntil the end",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok!",
		"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
		"HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 20 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nConnection: close, te\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 70000\r\n\r\n" + strings.Repeat("x", 70000),
		"garbage\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Len",
	} {
		checkAnswer(t, raw)
	}
}

func FuzzReadAnswer(f *testing.F) {
	f.Add("HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nSUCCESS")
	f.Add("HTTP/1.1 409 Conflict\r\nConnection: close\r\nContent-Length: 7\r\n\r\nFAILURE")
	f.Add("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n")
	f.Fuzz(func(t *testing.T, raw string) { checkAnswer(t, raw) })
}

// BenchmarkReadAnswer: a business service's answer read by the lean reader
// and by net/http.
func BenchmarkReadAnswer(b *testing.B) {
	raw := strings.Repeat("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Sun, 22 Nov 2026 16:00:00 GMT\r\nContent-Length: 24\r\n\r\n{\"dtm_result\":\"SUCCESS\"}", 64)
	for _, c := range []struct {
		name string
		read func(*bufio.Reader) (answer, bool, error)
	}{{"lean", readAnswer}, {"net-http", refAnswer}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			rd := strings.NewReader(raw)
			br := bufio.NewReaderSize(rd, 4096)
			for i := 0; i < b.N; i++ {
				if i%64 == 0 {
					rd.Reset(raw)
					br.Reset(rd)
				}
				if _, _, err := c.read(br); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
