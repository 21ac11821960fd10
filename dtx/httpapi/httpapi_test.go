package httpapi_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-db/sluice/dtx"
	"github.com/sluice-db/sluice/dtx/httpapi"
)

// newServer serves the routes of a coordinator on the null store (what is
// stored does not matter here: these tests are about the HTTP side).
func newServer(t *testing.T) *httptest.Server {
	cfg := dtx.DefaultConfig()
	cfg.CheckBranchURLs = false
	c, err := dtx.New(cfg, nullStore{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.Handler(c, nil))
	t.Cleanup(func() { srv.Close(); c.Close() })
	return srv
}

func do(t *testing.T, req *http.Request) (int, http.Header, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

const tccPrepare = `{"gid":"h1","trans_type":"tcc","protocol":"http"}`

// TestSuccessResponse: the preencoded answer is what writeJSON wrote
// before: the same bytes, JSON content type, and an explicit length.
func TestSuccessResponse(t *testing.T) {
	srv := newServer(t)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/dtmsvr/prepare", strings.NewReader(tccPrepare))
	code, h, body := do(t, req)
	if code != http.StatusOK || body != `{"dtm_result":"SUCCESS"}`+"\n" {
		t.Fatalf("HTTP %d %q", code, body)
	}
	if h.Get("Content-Type") != "application/json; charset=utf-8" || h.Get("Content-Length") != strconv.Itoa(len(body)) {
		t.Fatalf("headers %v", h)
	}
	req, _ = http.NewRequest(http.MethodGet, srv.URL+"/api/dtmsvr/newGid", nil)
	code, h, body = do(t, req)
	if code != http.StatusOK || !strings.HasPrefix(body, `{"dtm_result":"SUCCESS","gid":"`) || !strings.HasSuffix(body, "\"}\n") ||
		h.Get("Content-Length") != strconv.Itoa(len(body)) {
		t.Fatalf("newGid: HTTP %d %q %v", code, body, h)
	}
}

// TestBodies: a chunked body (no Content-Length) is read whole; a body over
// the limit is refused with 400 whether or not its length was announced.
func TestBodies(t *testing.T) {
	srv := newServer(t)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/dtmsvr/prepare", io.MultiReader(strings.NewReader(tccPrepare)))
	req.ContentLength = -1 // sent chunked
	if code, _, body := do(t, req); code != http.StatusOK {
		t.Fatalf("chunked: HTTP %d %s", code, body)
	}
	big := bytes.Repeat([]byte(" "), 16<<20+1)
	for _, announced := range []bool{true, false} {
		req, _ = http.NewRequest(http.MethodPost, srv.URL+"/api/dtmsvr/submit", bytes.NewReader(big))
		if !announced {
			req.Body = io.NopCloser(bytes.NewReader(big))
			req.ContentLength = -1
		}
		code, _, body := do(t, req)
		if code != http.StatusBadRequest || !strings.Contains(body, "request body too large") {
			t.Fatalf("announced %v: HTTP %d %s", announced, code, body)
		}
	}
	// Just under the limit is read (and then refused as JSON, not as size).
	req, _ = http.NewRequest(http.MethodPost, srv.URL+"/api/dtmsvr/submit", bytes.NewReader(big[:16<<20]))
	if code, _, body := do(t, req); code != http.StatusBadRequest || !strings.Contains(body, "malformed JSON") {
		t.Fatalf("16 MiB: HTTP %d %s", code, body)
	}
}

// TestRoutesOutsideTheFastPath: what the direct dispatch does not take
// still gets the mux's answers (a wrong method falls to the /api/dtmsvr/
// catch-all: 404, as before the direct dispatch).
func TestRoutesOutsideTheFastPath(t *testing.T) {
	srv := newServer(t)
	for _, c := range []struct {
		method, path string
		code         int
	}{
		{http.MethodGet, "/api/dtmsvr/submit", http.StatusNotFound},
		{http.MethodPut, "/api/dtmsvr/prepare", http.StatusNotFound},
		{http.MethodPost, "/api/dtmsvr/submit/", http.StatusNotFound},
		{http.MethodPost, "/api/dtmsvr/newGid", http.StatusNotFound},
		{http.MethodGet, "/api/dtmsvr/version", http.StatusOK},
		{http.MethodPost, "/api/dtmsvr/forceStop", http.StatusBadRequest},
	} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(`{}`))
		if code, _, body := do(t, req); code != c.code {
			t.Errorf("%s %s: HTTP %d %s, want %d", c.method, c.path, code, body, c.code)
		}
	}
}
