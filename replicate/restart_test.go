package replicate_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/replicate"
)

// TestKill9ImmediateRestart kills the sluice process with SIGKILL and starts
// the next one at once, without waiting for the killed one to be reaped: the
// kernel may not have released task.lock yet, and the restart must wait for
// it instead of exiting with "task.lock is locked". A second process
// started beside a live one is still refused at once, naming its pid.
func TestKill9ImmediateRestart(t *testing.T) {
	bin := sandboxtest.BuildSluice(t)
	dyingHolder(t, bin)
	src := sandboxtest.MustOpen(t, srcInst, "")
	d := sandboxtest.MustOpen(t, dstInst, "")
	start := masterStatus(t, src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE k9r", "CREATE TABLE k9r.t (id int PRIMARY KEY, v int)")
	dir := t.TempDir()
	stateDir, taskFile := filepath.Join(dir, "state"), filepath.Join(dir, "task.yaml")
	if err := os.WriteFile(taskFile, []byte(taskYAML("k9r", stateDir, srcInst, dstInst, start, "source")), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "sluice.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	type proc struct {
		cmd    *exec.Cmd
		exited chan error
	}
	startSluice := func() proc {
		cmd := exec.Command(bin, "migrate", "--config", taskFile, "--mode", "incremental")
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p := proc{cmd, make(chan error, 1)}
		go func() { p.exited <- cmd.Wait() }()
		return p
	}
	// waitRow waits until process p has applied the row with id i.
	waitRow := func(p proc, i int) {
		t.Helper()
		for {
			var n int
			if err := d.QueryRow("SELECT COUNT(*) FROM k9r.t WHERE id = ?", i).Scan(&n); err == nil && n == 1 {
				if s, err := replicate.ReadStatus(stateDir); err == nil && s.PID == p.cmd.Process.Pid && s.Stage == replicate.StageRunning {
					return
				}
			}
			select {
			case err := <-p.exited:
				t.Fatalf("sluice (pid %d) exited before applying row %d: %v; log:\n%s", p.cmd.Process.Pid, i, err, tail(logPath))
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	cur := startSluice()
	defer func() { _ = cur.cmd.Process.Kill() }()
	for i := 1; i <= 6; i++ {
		sandboxtest.MustExec(t, src, fmt.Sprintf("INSERT INTO k9r.t VALUES (%d, %d)", i, i))
		waitRow(cur, i)
		if err := cur.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// No Wait: the next start races the kernel's teardown of the old one.
		cur = startSluice()
	}
	sandboxtest.MustExec(t, src, "INSERT INTO k9r.t VALUES (100, 100)")
	waitRow(cur, 100)

	// A live holder: refused at once (exit 2), naming the running pid.
	began := time.Now()
	out, err := exec.Command(bin, "migrate", "--config", taskFile, "--mode", "incremental").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "sluice process "+strconv.Itoa(cur.cmd.Process.Pid)) {
		t.Fatalf("second process beside a live one: %v: %s", err, out)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Fatalf("refusing a live holder took %s", d)
	}
	if err := cur.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-cur.exited; err != nil {
		t.Fatalf("sluice after SIGTERM: %v; log:\n%s", err, tail(logPath))
	}
	sameData(t, srcInst, dstInst, "k9r")
}

// dyingHolder: a process holding the task's lock, with 1 GiB of memory to
// free on exit, is killed with SIGKILL and sluice starts at once. The kernel
// frees the memory before it closes the files, so the lock is still held
// for tens of milliseconds after the kill: sluice must wait for it.
func dyingHolder(t *testing.T, bin string) {
	t.Helper()
	dir := t.TempDir()
	holderBin := filepath.Join(dir, "lockholder")
	if out, err := exec.Command("go", "build", "-o", holderBin, "./testdata/lockholder").CombinedOutput(); err != nil {
		t.Fatalf("build lockholder: %v: %s", err, out)
	}
	src := sandboxtest.MustOpen(t, srcInst, "")
	start := masterStatus(t, src)
	stateDir, taskFile := filepath.Join(dir, "state"), filepath.Join(dir, "task.yaml")
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(taskFile, []byte(taskYAML("k9h", stateDir, srcInst, dstInst, start, "source")), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		holder := exec.Command(holderBin, filepath.Join(stateDir, "task.lock"), "1024")
		stdin, err := holder.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := holder.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := holder.Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := stdout.Read(make([]byte, 6)); err != nil {
			t.Fatalf("lockholder: %v", err)
		}
		if err := holder.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "migrate", "--config", taskFile, "--mode", "incremental")
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		_ = holder.Wait()
		stdin.Close()
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		for running := false; !running; {
			select {
			case err := <-exited:
				t.Fatalf("sluice started right after the lock holder's kill -9 exited: %v: %s", err, out.String())
			case <-time.After(20 * time.Millisecond):
			}
			s, err := replicate.ReadStatus(stateDir)
			running = err == nil && s.PID == cmd.Process.Pid && s.Stage == replicate.StageRunning
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := <-exited; err != nil {
			t.Fatalf("sluice after SIGTERM: %v: %s", err, out.String())
		}
	}
}
