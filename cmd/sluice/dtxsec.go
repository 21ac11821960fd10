package main

import (
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/dtx"
	"github.com/sluice-db/sluice/dtx/httpapi"
)

// dtxSecurity is how sluice dtx serve guards its API.
type dtxSecurity struct {
	tokenFile         string
	maxConns          int
	maxConnsPerClient int
	headerTimeout     time.Duration
	memLimit          int64
	grpcListen        string
	probeAsked        bool // --check-branch-urls given explicitly
	http              httpapi.Config
}

// probePolicy keeps the branch URL probe (--check-branch-urls) for
// callers who hold the token. Its 400 tells the caller whether a host:port
// accepts connections, which makes the coordinator a port scanner for
// anyone who can reach it (issue 30). Without a token no caller is
// authenticated: the probe is off (URLs are still checked for their form
// and against --branch-hosts), and asking for it is a configuration error.
func probePolicy(cfg *dtx.Config, token string, asked bool, log *slog.Logger) error {
	if token != "" || !cfg.CheckBranchURLs {
		return nil
	}
	if asked {
		return &sluice.Error{Op: "dtx serve --check-branch-urls", Err: fmt.Errorf("%w: the probe's answer tells any caller which host:ports are open, and without a token every caller is anonymous", sluice.ErrConfig),
			Hint: "set --token-file (or SLUICE_DTX_TOKEN), or leave --check-branch-urls out"}
	}
	cfg.CheckBranchURLs = false
	log.Info("dtx: branch URLs are not probed for reachability (--check-branch-urls needs --token-file)")
	return nil
}

// token is the bearer token the API requires: the first line of
// --token-file, else $SLUICE_DTX_TOKEN, else none. It is never a flag's
// value, which ps would show.
func (s dtxSecurity) token() (string, error) {
	if s.tokenFile != "" {
		b, err := os.ReadFile(s.tokenFile)
		if err != nil {
			return "", &sluice.Error{Op: "dtx serve --token-file", Err: fmt.Errorf("%w: %v", sluice.ErrConfig, err), Hint: "name a file sluice can read, holding the token on its first line"}
		}
		t, _, _ := strings.Cut(strings.TrimRight(string(b), "\r\n"), "\n")
		if t = strings.TrimSpace(t); t == "" {
			return "", &sluice.Error{Op: "dtx serve --token-file", Err: fmt.Errorf("%w: %s holds no token", sluice.ErrConfig, s.tokenFile), Hint: "write the token on the file's first line"}
		}
		return t, nil
	}
	return strings.TrimSpace(os.Getenv("SLUICE_DTX_TOKEN")), nil
}

// bearer requires "Authorization: Bearer token" on every request but
// GET /metrics (Prometheus scrapes it).
func bearer(next http.Handler, token string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" && r.Method == http.MethodGet {
			next.ServeHTTP(w, r)
			return
		}
		if !bearerMatches(r.Header.Get("Authorization"), token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sluice dtx"`)
			http.Error(w, "missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bearerMatches reports whether an Authorization value carries token. The
// scheme name is case-insensitive (RFC 7235 section 2.1: "bearer" is
// "Bearer"), the token is compared in constant time.
func bearerMatches(header, token string) bool {
	scheme, got, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(token)) == 1
}

func loopbackAddr(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}
