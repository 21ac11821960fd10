package main

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/replicate"
)

// TestPauseResume: sluice pause stops a task's reading and applying (its
// binlog connection to the source ends) and keeps the process; sluice
// resume continues from the checkpoint, and what the source wrote
// meanwhile arrives. The task runs in this test's process, so the signals
// go to it: the handlers are installed as main installs them.
func TestPauseResume(t *testing.T) {
	handlePauseSignals()
	inst := sandboxtest.Start(t, "pause")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE psrc2", "CREATE TABLE psrc2.t (id INT PRIMARY KEY)", "INSERT INTO psrc2.t VALUES (1)")
	ep := inst.Endpoint()
	dir := t.TempDir()
	cfg := verifyTask(t, strings.NewReplacer("vsrc", "psrc2", "vdst", "pdst2", "name: vt", "name: pt").Replace(
		verifyTaskYAML(ep, ep, "psrc2.*", "dir: "+dir+"\n")))
	r := startMigrateAll(cfg)
	defer r.stop()
	for {
		if s, err := replicate.ReadStatus(dir); err == nil && s.Stage == replicate.StageRunning {
			break
		}
		if r.exited() {
			t.Fatalf("migrate stopped: %v\n%s", r.err, r.out.String())
		}
	}
	dumps := func() int {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if o, _, err := runCLI(t, "pause", "--config", cfg); err != nil || !strings.Contains(o, "paused") {
		t.Fatalf("pause: %v %q", err, o)
	}
	for dumps() > 0 { // the paused task lets go of the source's binlog
		if r.exited() {
			t.Fatalf("migrate stopped while paused: %v\n%s", r.err, r.out.String())
		}
	}
	sandboxtest.MustExec(t, db, "INSERT INTO psrc2.t VALUES (2)")
	if st, _, _ := runCLI(t, "status", "--config", cfg); !strings.Contains(st, "paused") {
		t.Fatalf("status while paused:\n%s", st)
	}
	// A paused task keeps its metrics endpoint (the shipped alert must
	// see it paused, not gone), says paused, and its lag grows.
	pausedMetrics := func() (float64, string) {
		s, err := replicate.ReadStatus(dir)
		if err != nil || s.MetricsAddr == "" {
			t.Fatalf("status while paused: %v %+v", err, s)
		}
		resp, err := http.Get("http://" + s.MetricsAddr + "/metrics")
		if err != nil {
			t.Fatalf("metrics while paused: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := regexp.MustCompile(`(?m)^sluice_replication_lag_seconds\{[^}]*\} (\S+)$`).FindStringSubmatch(string(b))
		if m == nil {
			t.Fatalf("no lag in the metrics while paused:\n%s", b)
		}
		lag, _ := strconv.ParseFloat(m[1], 64)
		return lag, string(b)
	}
	lag1, body := pausedMetrics()
	if !regexp.MustCompile(`(?m)^sluice_replication_stage\{[^}]*stage="paused"[^}]*\} 1$`).MatchString(body) {
		t.Errorf("the metrics do not say paused:\n%s", body)
	}
	for {
		lag2, _ := pausedMetrics()
		if lag2 > lag1+1 {
			break
		}
		if r.exited() {
			t.Fatalf("migrate stopped while paused: %v\n%s", r.err, r.out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if o, _, err := runCLI(t, "resume", "--config", cfg); err != nil || !strings.Contains(o, "running") {
		t.Fatalf("resume: %v %q", err, o)
	}
	for {
		var n int
		if db.QueryRow("SELECT COUNT(*) FROM pdst2.t WHERE id = 2").Scan(&n) == nil && n == 1 {
			break
		}
		if r.exited() {
			t.Fatalf("migrate stopped after resume: %v\n%s", r.err, r.out.String())
		}
	}
	if err := r.stop(); err != nil {
		t.Fatalf("clean stop: %v", err)
	}
}
