package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/dtx"
	"github.com/sluice-db/sluice/dtx/boltstore"
	"github.com/sluice-db/sluice/dtx/dtxtest"
	"github.com/sluice-db/sluice/dtx/mysqlstore"
)

func TestDtxQuery(t *testing.T) {
	ctx := context.Background()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, err := dtxtest.Serve(dtxtest.FastConfig(), st)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/prepare", "application/json", strings.NewReader(`{"gid":"q1","trans_type":"tcc","timeout_to_fail":3600}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("prepare: %v %v", err, resp)
	}
	resp.Body.Close()
	server := strings.TrimSuffix(srv.URL, "/api/dtmsvr")
	out, err := dtxQuery(ctx, server, "", "q1")
	if err != nil || !strings.Contains(string(out), `"status": "prepared"`) || !strings.Contains(string(out), `"branches"`) {
		t.Fatalf("query: %v\n%s", err, out)
	}
	var se *sluice.Error
	if _, err := dtxQuery(ctx, server, "", "nosuch"); !errors.As(err, &se) || !errors.Is(err, dtx.ErrNotFound) {
		t.Fatalf("unknown gid: %v", err)
	}
	if _, err := dtxQuery(ctx, "http://127.0.0.1:1", "", "q1"); !errors.As(err, &se) || !strings.Contains(err.Error(), "fix:") {
		t.Fatalf("unreachable server: %v", err)
	}

	// Straight from a store file nobody has open.
	path := filepath.Join(t.TempDir(), "b.db")
	st2, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	g := &dtx.Global{Gid: "q2", TransType: dtx.TypeSaga, Status: dtx.StatusSucceed, FinishTime: time.Now()}
	if errs, err := st2.Apply(ctx, []*dtx.Mutation{{Gid: "q2", Create: true, Global: g}}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	st2.Close()
	out, err = dtxQuery(ctx, "", "bolt://"+path, "q2")
	if err != nil || !strings.Contains(string(out), `"status": "succeed"`) {
		t.Fatalf("query store: %v\n%s", err, out)
	}
}

func TestOpenDtxStoreRejectsBadURLs(t *testing.T) {
	for _, u := range []string{"nosuch://x", "bolt://", "mysql://root@127.0.0.1:notaport/db", "mysql://root@127.0.0.1:3306/bad.name", "redis://127.0.0.1:notaport/0", "redis://127.0.0.1:6379/x"} {
		if s, _, err := openDtxStore(context.Background(), u); err == nil {
			s.Close()
			t.Errorf("%s: no error", u)
		} else if !errors.Is(err, sluice.ErrConfig) {
			t.Errorf("%s: %v, want a config error", u, err)
		}
	}
}

// TestDtxStorePasswordNotInArgs: the mysql store's password can come from
// ${VAR} or ?password-file=PATH instead of the URL (where ps shows it), an
// unset variable is an error naming it, and no error prints a password
// (issue 16). Connections fail here (no server on port 1): only the
// parsing is tested.
func TestDtxStorePasswordNotInArgs(t *testing.T) {
	t.Setenv("SLUICE_TEST_DTX_PW", "env-secret")
	cfg, err := mysqlstore.ParseURL("mysql://dtx:${SLUICE_TEST_DTX_PW}@127.0.0.1:3306/sluice_dtx")
	if err != nil || cfg.Endpoint.Password != "env-secret" || cfg.Endpoint.User != "dtx" {
		t.Fatalf("from ${VAR}: %+v %v", cfg.Endpoint, err)
	}
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("file-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err = mysqlstore.ParseURL("mysql://dtx@127.0.0.1:3306/sluice_dtx?password-file=" + pw)
	if err != nil || cfg.Endpoint.Password != "file-secret" {
		t.Fatalf("from a file: %+v %v", cfg.Endpoint, err)
	}
	if _, err := mysqlstore.ParseURL("mysql://dtx:${SLUICE_TEST_SURELY_UNSET}@127.0.0.1:3306/d"); err == nil || !strings.Contains(err.Error(), "SLUICE_TEST_SURELY_UNSET") {
		t.Fatalf("unset variable: %v", err)
	}
	for _, u := range []string{"mysql://dtx:pl%ain-secret@127.0.0.1:bad/d", "mysql://dtx:plain-secret@127.0.0.1:3306/bad.name", "mysql//dtx:plain-secret@h/d", "mysql://dtx:plain-secret@[::1/d"} {
		if s, _, err := openDtxStore(context.Background(), u); err == nil {
			s.Close()
			t.Errorf("%s: no error", u)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("the error prints the password: %v", err)
		}
	}
}
