package replicate_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/sandbox"
)

// buildSluice builds the CLI (without -race: it is the system under test,
// run as a separate process).
func buildSluice(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "sluice")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/sluice-db/sluice/cmd/sluice")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build sluice: %v: %s", err, out)
	}
	return bin
}

func writeTask(t *testing.T, dir string, src, dst *sandbox.Instance, start sluice.Position, schema string) string {
	t.Helper()
	y := fmt.Sprintf(`name: %s
source: {host: 127.0.0.1, port: %d, user: root, password: ""}
target: {host: 127.0.0.1, port: %d, user: root, password: ""}
tables: {include: ["%s.*"]}
dir: %s
incremental:
  binlog-file: %s
  binlog-pos: %d
  worker-count: 8
  batch: 50
  relay-sync: commit
  metrics-addr: "127.0.0.1:0"
`, schema, src.Port, dst.Port, schema, filepath.Join(dir, "state"), start.File, start.Pos)
	p := filepath.Join(dir, "task.yaml")
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestKill9ExactlyOnce kills the sluice process with SIGKILL at random
// moments while sysbench oltp_write_only and plain INSERTs into a table
// without a key run on the source, restarts it each time, and finally
// checks that the target equals the source: a transaction lost or applied
// twice would show up (a doubled INSERT into the keyless table as an extra
// row).
func TestKill9ExactlyOnce(t *testing.T) {
	if _, err := exec.LookPath("sysbench"); err != nil {
		t.Fatalf("sysbench not installed: %v", err)
	}
	bin := buildSluice(t)
	dst := sandboxtest.Start(t, "dstk")
	src := sandboxtest.MustOpen(t, srcInst, "")
	start := masterStatus(t, src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE k9", "CREATE TABLE k9.nokey (a int, b varchar(64))")
	sb := func(args ...string) *exec.Cmd {
		base := []string{"oltp_write_only", "--mysql-host=127.0.0.1", fmt.Sprintf("--mysql-port=%d", srcInst.Port),
			"--mysql-user=root", "--mysql-db=k9", "--tables=2", "--table-size=2000", "--db-ps-mode=disable"}
		return exec.Command("sysbench", append(base, args...)...)
	}
	if out, err := sb("prepare").CombinedOutput(); err != nil {
		t.Fatalf("sysbench prepare: %v: %s", err, out)
	}
	dir := t.TempDir()
	taskFile := writeTask(t, dir, srcInst, dst, start, "k9")

	// Load on the source for the whole crash phase.
	ctx, stopLoad := context.WithCancel(context.Background())
	var sbDone, insDone sync.WaitGroup
	sbDone.Add(1)
	insDone.Add(1)
	var sbErr error
	go func() {
		defer sbDone.Done()
		out, err := sb("run", "--threads=4", "--time=20", "--rate=300").CombinedOutput()
		if err != nil {
			sbErr = fmt.Errorf("sysbench run: %v: %s", err, out)
		}
	}()
	go func() {
		defer insDone.Done()
		for i := 0; ctx.Err() == nil; i++ {
			if _, err := src.Exec(fmt.Sprintf("INSERT INTO k9.nokey VALUES (%d, 'row %d')", i%10, i)); err != nil {
				t.Errorf("insert into nokey: %v", err)
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()

	logf, err := os.Create(filepath.Join(dir, "sluice.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	startSluice := func() *exec.Cmd {
		cmd := exec.Command(bin, "migrate", "--config", taskFile, "--mode", "incremental")
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	kills := 0
	progress := map[string]bool{}
	for deadline := time.Now().Add(18 * time.Second); kills < 5 || time.Now().Before(deadline); kills++ {
		cmd := startSluice()
		time.Sleep(time.Duration(300+rng.Intn(2500)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if st, err := replicate.ReadStatus(filepath.Join(dir, "state")); err == nil {
			progress[st.Applied.String()] = true
		}
	}
	// The kills must land while sluice is replicating, not only while it
	// starts: the applied position has to move between them.
	if len(progress) < 3 {
		t.Fatalf("applied positions seen across %d kills: %v; log:\n%s", kills, progress, tail(filepath.Join(dir, "sluice.log")))
	}
	sbDone.Wait()
	stopLoad()
	insDone.Wait()
	if sbErr != nil {
		t.Fatal(sbErr)
	}

	// A last run catches up; SIGTERM stops it cleanly.
	end := masterStatus(t, src)
	cmd := startSluice()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stateDir := filepath.Join(dir, "state")
	for {
		s, err := replicate.ReadStatus(stateDir)
		if err == nil && after(s.Applied, end) && s.PID == cmd.Process.Pid {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("sluice exited early (%v); log:\n%s", err, tail(filepath.Join(dir, "sluice.log")))
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Fatalf("sluice after SIGTERM: %v; log:\n%s", err, tail(filepath.Join(dir, "sluice.log")))
	}
	if s, _ := replicate.ReadStatus(stateDir); s.Stage != replicate.StageStopped {
		t.Fatalf("stage after SIGTERM: %+v", s)
	}
	t.Logf("%d kills, %d distinct applied positions at the kills", kills, len(progress))
	if os.Getenv("K9_DEBUG") != "" {
		d := sandboxtest.MustOpen(t, dst, "")
		rows, _ := d.Query("SELECT a, b, COUNT(*) FROM k9.nokey GROUP BY a, b HAVING COUNT(*) > 1")
		for rows != nil && rows.Next() {
			var a, n int
			var b string
			_ = rows.Scan(&a, &b, &n)
			t.Logf("duplicate on target: %d %q x%d", a, b, n)
		}
		_ = exec.Command("cp", "-r", dir, "/tmp/k9debug").Run()
		_ = exec.Command("cp", "-r", filepath.Join(srcInst.Home, "data"), "/tmp/k9debug/srcdata").Run()
	}
	sameData(t, srcInst, dst, "k9")

	// sluice status reads the task's status file.
	out, err := exec.Command(bin, "status", "--config", taskFile).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "stopped") || !strings.Contains(string(out), end.File) {
		t.Fatalf("sluice status: %v:\n%s", err, out)
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(string(b), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}
