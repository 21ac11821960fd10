package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sluice-db/sluice/replicate"
)

// TestHelperTaskProcess is not a test: TestStop runs the test binary again
// with SLUICE_TEST_HOLD_TASK set, as a process that runs a task (it holds
// the task lock as migrate does) until SIGTERM, then exits 0 as sluice does.
func TestHelperTaskProcess(t *testing.T) {
	dir := os.Getenv("SLUICE_TEST_HOLD_TASK")
	if dir == "" {
		t.Skip("helper process only")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	unlock, err := replicate.LockTask(dir, "st")
	if err != nil {
		os.Exit(2)
	}
	os.Stdout.WriteString("locked\n")
	<-ctx.Done()
	unlock()
	os.Exit(0)
}

// TestStop: sluice stop signals the process that holds the task, waits
// until it has let go, and exits 0; a task that is not running is already
// stopped. The task's process is a real one (this test binary).
func TestStop(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "t.yaml")
	if err := os.WriteFile(cfg, []byte("name: st\nsource: {host: 127.0.0.1, port: 1, user: u}\ntarget: {host: 127.0.0.1, port: 1, user: u}\ntables: {include: [\"a.*\"]}\ndir: state\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLI(t, "stop", "--config", cfg)
	if err != nil || !strings.Contains(out, "is not running") {
		t.Fatalf("stop of a task never run: %v %q", err, out)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperTaskProcess$")
	cmd.Env = append(os.Environ(), "SLUICE_TEST_HOLD_TASK="+filepath.Join(dir, "state"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill() //nolint:errcheck // gone already when the test passes
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "locked\n" {
		t.Fatalf("helper: %q %v", line, err)
	}
	out, _, err = runCLI(t, "stop", "--config", cfg)
	if err != nil || !strings.Contains(out, "stopped") || !strings.Contains(out, "(pid ") {
		t.Fatalf("stop: %v %q", err, out)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the task's process did not exit cleanly: %v", err)
	}
	if _, running, _ := replicate.Holder(filepath.Join(dir, "state")); running {
		t.Fatal("the task is still locked after stop returned")
	}
}

// TestTaskList: sluice task list finds task directories under a root and
// names each task's stage: running (with the pid holding its lock), or the
// stage its status file last recorded, "gone" when the process died
// without a clean stop.
func TestTaskList(t *testing.T) {
	root := t.TempDir()
	stopped := filepath.Join(root, "a", "sluice-a")
	gone := filepath.Join(root, "b", "sluice-b")
	for d, st := range map[string]replicate.Status{stopped: {Task: "a", Stage: replicate.StageStopped}, gone: {Task: "b", Stage: replicate.StageRunning}} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := replicate.WriteStatus(d, st); err != nil {
			t.Fatal(err)
		}
	}
	live := filepath.Join(root, "c", "sluice-c")
	unlock, err := replicate.LockTask(live, "c")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	out, _, err := runCLI(t, "task", "list", "--dir", root)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a  ", "stopped", "gone (last seen running)", "copying (pid ", stopped, gone, live} {
		if !strings.Contains(out, want) {
			t.Errorf("task list lacks %q:\n%s", want, out)
		}
	}
}

// TestLiveLine: on a terminal the task's log lines go above the live
// status line, which is redrawn under each of them and removed at the end.
func TestLiveLine(t *testing.T) {
	var b strings.Builder
	lo := &liveOut{out: &b}
	lo.set("running lag 0.0 s")
	if _, err := lo.Write([]byte("2026-11-25T00:00:00Z replicate x: reconnected\n")); err != nil {
		t.Fatal(err)
	}
	lo.set("")
	want := "\r\033[Krunning lag 0.0 s" + "\r\033[K2026-11-25T00:00:00Z replicate x: reconnected\nrunning lag 0.0 s" + "\r\033[K"
	if b.String() != want {
		t.Fatalf("got %q\nwant %q", b.String(), want)
	}
}
