package httpapi

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
)

// A panic while answering a request costs that request a 500, on both
// transports; it never ends the coordinator (issue 30: one submit took the
// lean server's process down).
func TestPanicAnswers500(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	w := httptest.NewRecorder()
	func() {
		r := httptest.NewRequest(http.MethodPost, "/api/dtmsvr/submit", nil)
		defer recoverHTTP(quiet, w, r)
		panic("boom")
	}()
	if w.Code != http.StatusInternalServerError || !bytes.Contains(w.Body.Bytes(), []byte("internal error")) {
		t.Fatalf("net/http path: %d %q", w.Code, w.Body.String())
	}

	// The lean loop, with a handler that panics (no coordinator behind it).
	s := &Server{api: &handler{}}
	out := s.answer([]byte("earlier answer;"), leanRequest{route: routeSubmit}, []byte(`{"gid":"g","trans_type":"saga"}`), nil)
	if !bytes.HasPrefix(out, []byte("earlier answer;HTTP/1.1 500 ")) || !bytes.Contains(out, []byte("Connection: close")) {
		t.Fatalf("lean path: %q", out)
	}
}
