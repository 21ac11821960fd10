package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/logx"
	"github.com/sluice-db/sluice/replicate"
)

// TestStatusIsAHealthCheck: sluice status exits 3 (ErrNotRunning) with one
// line saying why when the task failed, was stopped, or lost its process,
// and still prints the status first; a task whose process holds the lock
// and has not failed is healthy (issue 16).
func TestStatusIsAHealthCheck(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "t.yaml")
	state := filepath.Join(dir, "state")
	if err := os.WriteFile(cfg, []byte("name: hc\nsource: {host: 127.0.0.1, port: 1, user: u}\ntarget: {host: 127.0.0.1, port: 1, user: u}\ntables: {include: [\"a.*\"]}\ndir: state\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	run := func() (string, error) {
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs([]string{"status", "--config", cfg})
		err := root.Execute()
		return out.String(), err
	}
	for _, tc := range []struct {
		stage, errText, want string
	}{
		{replicate.StageFailed, "apply DDL: boom", "failed: apply DDL: boom"},
		{replicate.StageStopped, "", "stopped cleanly"},
		{replicate.StageRunning, "", "has no process"},
	} {
		if err := replicate.WriteStatus(state, replicate.Status{Task: "hc", Stage: tc.stage, Error: tc.errText, Updated: time.Now()}); err != nil {
			t.Fatal(err)
		}
		out, err := run()
		if !errors.Is(err, sluice.ErrNotRunning) || exitCode(err) != 3 || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "(fix: ") {
			t.Errorf("stage %s: err %v (exit %d), want exit 3 naming %q", tc.stage, err, exitCode(err), tc.want)
		}
		if !strings.Contains(out, "stage:") {
			t.Errorf("stage %s: the status was not printed:\n%s", tc.stage, out)
		}
	}
	// A Kafka sink task's status says how many Kafka transactions it
	// committed.
	if err := replicate.WriteStatus(state, replicate.Status{Task: "hc", Stage: replicate.StageStopped, Txns: 40, KafkaTxns: 3, Updated: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if out, _ := run(); !strings.Contains(out, "kafka:       3 transactions committed") {
		t.Errorf("a sink task's status does not show its Kafka transactions:\n%s", out)
	}
	if err := healthError(replicate.Status{Task: "hc", Stage: replicate.StageRunning}, true); err != nil {
		t.Errorf("a running task: %v", err)
	}
}

// TestLogLinesCarryTheDate: log records start with the UTC date and time.
func TestLogLinesCarryTheDate(t *testing.T) {
	var b bytes.Buffer
	logx.New(&b, "migrate x").Info("done")
	if _, err := time.Parse(time.RFC3339, strings.SplitN(b.String(), " ", 2)[0]); err != nil || !strings.HasSuffix(b.String(), " migrate x: done\n") {
		t.Fatalf("log line %q: %v", b.String(), err)
	}
}

// TestVersion: sluice version names the version, the commit and Go.
func TestVersion(t *testing.T) {
	out, _, err := runCLI(t, "version")
	if err != nil || !strings.HasPrefix(out, "sluice ") || !strings.Contains(out, "\ncommit ") || !strings.Contains(out, "go1.") {
		t.Fatalf("sluice version: %v\n%s", err, out)
	}
}

// TestCopyTakesTheTaskLock: migrate (any mode), dump and load refuse to run
// a task another process runs, at once and naming its pid, before they
// connect anywhere (issue 16: the full copy took no lock, and a second
// process failed later with a duplicate key that did not mention the first).
func TestCopyTakesTheTaskLock(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "t.yaml")
	state := filepath.Join(dir, "state")
	if err := os.WriteFile(cfg, []byte("name: lk\nsource: {host: 127.0.0.1, port: 1, user: u}\ntarget: {host: 127.0.0.1, port: 1, user: u}\ntables: {include: [\"a.*\"]}\ndir: state\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	// Another process's lock: a separate open file, flocked, with a live pid.
	f, err := os.OpenFile(filepath.Join(state, "task.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(strconv.Itoa(os.Getpid()) + "\n"); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"migrate", "--config", cfg, "--mode", "full"},
		{"migrate", "--config", cfg, "--mode", "all"},
		{"dump", "--config", cfg},
		{"load", "--config", cfg},
	} {
		_, _, err := runCLI(t, args...)
		if err == nil || !strings.Contains(err.Error(), "is locked") || !strings.Contains(err.Error(), strconv.Itoa(os.Getpid())) {
			t.Errorf("%v: %v, want the task lock's holder named", args, err)
		}
	}
}

// TestEveryCommandHasExamples: every subcommand's help shows Examples.
func TestEveryCommandHasExamples(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Name() == "help" || c.Name() == "completion" || c.Hidden {
			return
		}
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%q has no Examples", c.CommandPath())
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRoot())
}

// A task whose process died (kill -9) while it copied or was paused is
// shown as not running, from the task lock, not as the stage its status
// file last held (issue 30: status showed a dead copy as copying).
func TestStatusOfADeadProcess(t *testing.T) {
	for _, stage := range []string{replicate.StageCopying, replicate.StagePaused, replicate.StageRunning} {
		var b strings.Builder
		printStatus(&b, replicate.Status{Task: "t", Stage: stage, Updated: time.Now().Add(-time.Minute)}, false, t.TempDir())
		if !strings.Contains(b.String(), "not running (last seen "+stage) {
			t.Errorf("stage %s, no process: %s", stage, b.String())
		}
	}
}
