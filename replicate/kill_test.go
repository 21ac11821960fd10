package replicate_test

import (
	"context"
	"database/sql"
	"errors"
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

// killScenario is the exactly-once test shared by both commit orders. It
// kills the sluice process with SIGKILL at random moments while sysbench
// oltp_write_only and plain INSERTs into a table without a key run on the
// source, restarts it each time, lets a last run catch up and stops it with
// SIGTERM, and finally checks that the target equals the source: a
// transaction lost or applied twice would show up (a doubled INSERT into
// the keyless table as an extra row). afterKill, if set, runs after each
// kill.
type killScenario struct {
	schema, dstName string
	tables          int
	order           string // incremental.commit-order
	afterKill       func(dst *sql.DB)
}

// killResult is what a scenario leaves for test-specific checks.
type killResult struct {
	bin, taskFile, stateDir string
	dst                     *sandbox.Instance
	end                     sluice.Position
	kills, positions        int
}

func taskYAML(name, stateDir string, src, dst *sandbox.Instance, start sluice.Position, order string) string {
	return fmt.Sprintf(`name: %s
source: {host: 127.0.0.1, port: %d, user: root, password: ""}
target: {host: 127.0.0.1, port: %d, user: root, password: ""}
tables: {include: ["%s.*"]}
dir: %s
incremental:
  binlog-file: %s
  binlog-pos: %d
  worker-count: 8
  batch: 20
  commit-order: %s
  relay-sync: commit
  metrics-addr: "127.0.0.1:0"
`, name, src.Port, dst.Port, name, stateDir, start.File, start.Pos, order)
}

func (k killScenario) run(t *testing.T) killResult {
	t.Helper()
	if _, err := exec.LookPath("sysbench"); err != nil {
		t.Fatalf("sysbench not installed: %v", err)
	}
	r := killResult{bin: sandboxtest.BuildSluice(t), dst: sandboxtest.Start(t, k.dstName)}
	src := sandboxtest.MustOpen(t, srcInst, "")
	start := masterStatus(t, src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE "+k.schema, "CREATE TABLE "+k.schema+".nokey (a int, b varchar(64))")
	sb := func(args ...string) *exec.Cmd {
		base := []string{"oltp_write_only", "--mysql-host=127.0.0.1", fmt.Sprintf("--mysql-port=%d", srcInst.Port),
			"--mysql-user=root", "--mysql-db=" + k.schema, fmt.Sprintf("--tables=%d", k.tables), "--table-size=2000", "--db-ps-mode=disable"}
		return exec.Command("sysbench", append(base, args...)...)
	}
	if out, err := sb("prepare").CombinedOutput(); err != nil {
		t.Fatalf("sysbench prepare: %v: %s", err, out)
	}
	dir := t.TempDir()
	r.stateDir = filepath.Join(dir, "state")
	r.taskFile = filepath.Join(dir, "task.yaml")
	if err := os.WriteFile(r.taskFile, []byte(taskYAML(k.schema, r.stateDir, srcInst, r.dst, start, k.order)), 0o644); err != nil {
		t.Fatal(err)
	}

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
			if _, err := src.Exec(fmt.Sprintf("INSERT INTO %s.nokey VALUES (%d, 'row %d')", k.schema, i%10, i)); err != nil {
				t.Errorf("insert into nokey: %v", err)
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()

	logPath := filepath.Join(dir, "sluice.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	startSluice := func() *exec.Cmd {
		cmd := exec.Command(r.bin, "migrate", "--config", r.taskFile, "--mode", "incremental")
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	d := sandboxtest.MustOpen(t, r.dst, "")
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	progress := map[string]bool{}
	for deadline := time.Now().Add(18 * time.Second); r.kills < 5 || time.Now().Before(deadline); r.kills++ {
		cmd := startSluice()
		// The kill is placed by observed progress, never by time: this
		// process must have committed 1 to 3 checkpoints past the one its
		// predecessor left (its status file names its PID and the applied
		// position), however slow the machine is.
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		last := sluice.Position{}
		if st, err := replicate.ReadStatus(r.stateDir); err == nil {
			last = st.Applied
		}
		moves := 1 + rng.Intn(3)
		sandboxtest.Eventually(t, 5*time.Minute, fmt.Sprintf("kill %d: sluice applied more %d times", r.kills, moves), func() bool {
			if st, err := replicate.ReadStatus(r.stateDir); err == nil && st.PID == cmd.Process.Pid && st.Applied != last {
				last = st.Applied
				moves--
				return moves == 0
			}
			select {
			case err := <-exited:
				t.Fatalf("kill %d: sluice exited before it was killed (%v); log:\n%s", r.kills, err, tail(logPath))
			default:
			}
			return false
		}, func() string {
			_ = cmd.Process.Kill() // before the test fails, as the loop did
			return "log:\n" + tail(logPath)
		})
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-exited
		if st, err := replicate.ReadStatus(r.stateDir); err == nil {
			progress[st.Applied.String()] = true
		}
		if k.afterKill != nil {
			k.afterKill(d)
		}
	}
	r.positions = len(progress)
	// The kills must land while sluice is replicating, not only while it
	// starts: the applied position has to move between them.
	if len(progress) < 3 {
		t.Fatalf("applied positions seen across %d kills: %v; log:\n%s", r.kills, progress, tail(logPath))
	}
	sbDone.Wait()
	stopLoad()
	insDone.Wait()
	if sbErr != nil {
		t.Fatal(sbErr)
	}

	// A last run catches up; SIGTERM stops it cleanly.
	r.end = masterStatus(t, src)
	cmd := startSluice()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for {
		s, err := replicate.ReadStatus(r.stateDir)
		if err == nil && after(s.Applied, r.end) && s.PID == cmd.Process.Pid {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("sluice exited early (%v); log:\n%s", err, tail(logPath))
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Fatalf("sluice after SIGTERM: %v; log:\n%s", err, tail(logPath))
	}
	if s, _ := replicate.ReadStatus(r.stateDir); s.Stage != replicate.StageStopped {
		t.Fatalf("stage after SIGTERM: %+v", s)
	}
	sameData(t, srcInst, r.dst, k.schema)
	return r
}

// TestKill9ExactlyOnce runs the kill scenario with commit order kept.
func TestKill9ExactlyOnce(t *testing.T) {
	r := killScenario{schema: "k9", dstName: "dstk", tables: 2, order: "source"}.run(t)
	t.Logf("%d kills, %d distinct applied positions at the kills", r.kills, r.positions)
	// sluice status reads the task's status file, and as a health check
	// exits 3: the task is not running.
	out, err := exec.Command(r.bin, "status", "--config", r.taskFile).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || !strings.Contains(string(out), "stopped cleanly") || !strings.Contains(string(out), r.end.File) {
		t.Fatalf("sluice status of a stopped task: %v (want exit 3):\n%s", err, out)
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
