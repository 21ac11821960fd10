package main

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/dtx/dtxtest"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestDtxRedisStore: --store redis://:${VAR}@host:port/N serves dtm's
// protocol and `dtx query --store` reads it back; the password, from the
// environment, shows in no description or error; a server that does not
// sync before it answers is refused with the fix, unless relaxed.
func TestDtxRedisStore(t *testing.T) {
	ctx := context.Background()
	r := sandboxtest.StartRedis(t)
	t.Setenv("SLUICE_TEST_REDIS_PW", r.Password)
	url := "redis://:${SLUICE_TEST_REDIS_PW}@" + r.Addr() + "/3?prefix=cmdtest:"
	st, kind, err := openDtxStore(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if strings.Contains(kind, r.Password) || !strings.Contains(kind, "redis") {
		t.Fatalf("store description: %s", kind)
	}
	srv, err := dtxtest.Serve(dtxtest.FastConfig(), st)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/prepare", "application/json", strings.NewReader(`{"gid":"rq1","trans_type":"tcc","timeout_to_fail":3600}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("prepare: %v %v", err, resp)
	}
	resp.Body.Close()
	out, err := dtxQuery(ctx, "", url, "rq1")
	if err != nil || !strings.Contains(string(out), `"status": "prepared"`) {
		t.Fatalf("query --store: %v\n%s", err, out)
	}

	t.Setenv("SLUICE_TEST_REDIS_PW", "wrong-"+r.Password)
	if s, _, err := openDtxStore(ctx, url); err == nil {
		s.Close()
		t.Fatal("a wrong password was accepted")
	} else if strings.Contains(err.Error(), r.Password) || !strings.Contains(err.Error(), "fix:") {
		t.Fatalf("wrong password: %v", err)
	}

	lax := sandboxtest.StartRedis(t, "--appendfsync", "everysec")
	t.Setenv("SLUICE_TEST_REDIS_PW", lax.Password)
	laxURL := "redis://:${SLUICE_TEST_REDIS_PW}@" + lax.Addr() + "/0"
	var se *sluice.Error
	if s, _, err := openDtxStore(ctx, laxURL); err == nil {
		s.Close()
		t.Fatal("a server with appendfsync everysec was accepted")
	} else if !errors.As(err, &se) || !errors.Is(err, sluice.ErrConfig) || !strings.Contains(err.Error(), "durability=relaxed") || strings.Contains(err.Error(), lax.Password) {
		t.Fatalf("not durable: %v", err)
	}
	s, kind, err := openDtxStore(ctx, laxURL+"?durability=relaxed")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if !strings.Contains(kind, "relaxed") {
		t.Fatalf("a relaxed store does not say so: %s", kind)
	}
}
