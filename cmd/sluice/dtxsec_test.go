package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// TestDtxBearerToken: with a token, every API call needs "Authorization:
// Bearer TOKEN" (401 otherwise); GET /metrics stays open for Prometheus.
// The token comes from --token-file's first line or $SLUICE_DTX_TOKEN,
// never from a flag's value (issue 16).
func TestDtxBearerToken(t *testing.T) {
	f := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(f, []byte("s3cr3t-token\nignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tok, err := dtxSecurity{tokenFile: f}.token()
	if err != nil || tok != "s3cr3t-token" {
		t.Fatalf("token from file: %q %v", tok, err)
	}
	t.Setenv("SLUICE_DTX_TOKEN", "from-env")
	if tok, _ := (dtxSecurity{}).token(); tok != "from-env" {
		t.Fatalf("token from env: %q", tok)
	}
	if _, err := (dtxSecurity{tokenFile: filepath.Join(t.TempDir(), "none")}).token(); err == nil {
		t.Fatal("a missing token file must be an error")
	}
	srv := httptest.NewServer(bearer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }), "s3cr3t-token"))
	defer srv.Close()
	for _, c := range []struct {
		method, path, auth string
		want               int
	}{
		{"POST", "/api/dtmsvr/submit", "", 401},
		{"POST", "/api/dtmsvr/submit", "Bearer wrong", 401},
		{"GET", "/api/dtmsvr/newGid", "s3cr3t-token", 401},
		{"POST", "/api/dtmsvr/submit", "Bearer s3cr3t-token", 200},
		{"GET", "/metrics", "", 200},
		{"POST", "/metrics", "", 401},
	} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s %s %q: %d, want %d", c.method, c.path, c.auth, resp.StatusCode, c.want)
		}
	}
}

// The Authorization scheme is case-insensitive (RFC 7235): a client that
// sends "bearer" was refused. Only the token itself must match.
func TestBearerSchemeCaseInsensitive(t *testing.T) {
	for h, want := range map[string]bool{
		"Bearer s3cret": true, "bearer s3cret": true, "BEARER  s3cret ": true,
		"Bearer s3creT": false, "Basic s3cret": false, "s3cret": false, "Bearer": false, "": false, "Bearer s3cret2": false,
	} {
		if got := bearerMatches(h, "s3cret"); got != want {
			t.Errorf("Authorization %q: match %v, want %v", h, got, want)
		}
	}
}
