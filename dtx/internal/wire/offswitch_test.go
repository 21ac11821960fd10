//go:build linux

package wire

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/sluice-db/sluice/internal/rawconn"
)

// TestOffSwitches: with Options.NetHTTP a plain-HTTP branch call goes
// through net/http (its User-Agent tells), by default through the
// hand-written client; with NoRawSyscalls the hand-written client's
// connections are not rawconn's. Each way the branch gets the same call
// and its answer is read the same (issue 31).
func TestOffSwitches(t *testing.T) {
	var mu sync.Mutex
	var agents, bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		agents, bodies = append(agents, r.UserAgent()), append(bodies, string(b))
		mu.Unlock()
		_, _ = w.Write([]byte(`{"dtm_result":"SUCCESS"}`))
	}))
	defer srv.Close()
	for _, c := range []struct {
		opts  Options
		agent string
		raw   bool
	}{
		{Options{}, "sluice-dtx", true},
		{Options{NoRawSyscalls: true}, "sluice-dtx", false},
		{Options{NetHTTP: true}, "Go-http-client/1.1", false},
	} {
		tr := New(nil, c.opts)
		a, err := tr.Call(context.Background(), &Call{URL: srv.URL + "/busi", Gid: "g", TransType: "saga", BranchID: "01", Op: "action", Body: []byte(`{"a":1}`), Timeout: 10 * time.Second})
		if err != nil || a.Outcome != Success {
			t.Fatalf("%+v: %v %v", c.opts, a, err)
		}
		mu.Lock()
		agent, body := agents[len(agents)-1], bodies[len(bodies)-1]
		mu.Unlock()
		if agent != c.agent || body != `{"a":1}` {
			t.Errorf("%+v: the branch saw User-Agent %q body %q, want %q", c.opts, agent, body, c.agent)
		}
		if !c.opts.NetHTTP {
			tr.http.mu.Lock()
			var raw bool
			for _, l := range tr.http.idle {
				for _, bc := range l {
					_, raw = bc.c.(*rawconn.Conn)
				}
			}
			tr.http.mu.Unlock()
			if raw != c.raw && rawAvailable() {
				t.Errorf("%+v: the kept connection is rawconn's: %v, want %v", c.opts, raw, c.raw)
			}
		}
		tr.Close()
	}
}

// rawAvailable tells whether rawconn wraps TCP connections on this system.
func rawAvailable() bool {
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		return false
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return false
	}
	defer c.Close()
	_, ok := rawconn.Wrap(c).(*rawconn.Conn)
	return ok
}
