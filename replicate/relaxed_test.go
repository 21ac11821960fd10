package replicate_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/sandbox"
	"github.com/sluice-db/sluice/task"
)

func relaxedTaskYAML(name string, dir string, src, dst *sandbox.Instance, start sluice.Position, order string) string {
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
`, name, src.Port, dst.Port, name, dir, start.File, start.Pos, order)
}

// TestRelaxedTaskFile: incremental.commit-order reaches the applier.
func TestRelaxedTaskFile(t *testing.T) {
	for order, want := range map[string]bool{"relaxed": true, "source": false} {
		tc, err := task.Parse([]byte(relaxedTaskYAML("rt", t.TempDir(), srcInst, dstInst, sluice.Position{File: "b.000001", Pos: 4}, order)))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := replicate.FromTask(tc)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Apply.RelaxedOrder != want {
			t.Errorf("commit-order %s: RelaxedOrder %v", order, cfg.Apply.RelaxedOrder)
		}
	}
}

// TestRelaxedKill9ExactlyOnce is TestKill9ExactlyOnce with commit-order:
// relaxed: sluice is killed with SIGKILL at random moments while sysbench
// oltp_write_only and plain INSERTs into a table without a key run on the
// source, restarted each time, and finally the target must equal the
// source. Out of order, groups committed past the low-water mark at a kill
// must be skipped on restart and no others: a lost transaction, or a
// doubled one (an extra row in the keyless table), fails the comparison.
func TestRelaxedKill9ExactlyOnce(t *testing.T) {
	if _, err := exec.LookPath("sysbench"); err != nil {
		t.Fatalf("sysbench not installed: %v", err)
	}
	bin := buildSluice(t)
	dst := sandboxtest.Start(t, "dstrx")
	src := sandboxtest.MustOpen(t, srcInst, "")
	start := masterStatus(t, src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE rx9", "CREATE TABLE rx9.nokey (a int, b varchar(64))")
	sb := func(args ...string) *exec.Cmd {
		base := []string{"oltp_write_only", "--mysql-host=127.0.0.1", fmt.Sprintf("--mysql-port=%d", srcInst.Port),
			"--mysql-user=root", "--mysql-db=rx9", "--tables=4", "--table-size=2000", "--db-ps-mode=disable"}
		return exec.Command("sysbench", append(base, args...)...)
	}
	if out, err := sb("prepare").CombinedOutput(); err != nil {
		t.Fatalf("sysbench prepare: %v: %s", err, out)
	}
	dir := t.TempDir()
	stateDir := filepath.Join(dir, "state")
	taskFile := filepath.Join(dir, "task.yaml")
	if err := os.WriteFile(taskFile, []byte(relaxedTaskYAML("rx9", stateDir, srcInst, dst, start, "relaxed")), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, stopLoad := context.WithCancel(context.Background())
	var sbDone, insDone sync.WaitGroup
	sbDone.Add(1)
	insDone.Add(1)
	var sbErr error
	go func() {
		defer sbDone.Done()
		out, err := sb("run", "--threads=4", "--time=20", "--rate=400").CombinedOutput()
		if err != nil {
			sbErr = fmt.Errorf("sysbench run: %v: %s", err, out)
		}
	}()
	go func() {
		defer insDone.Done()
		for i := 0; ctx.Err() == nil; i++ {
			if _, err := src.Exec(fmt.Sprintf("INSERT INTO rx9.nokey VALUES (%d, 'row %d')", i%10, i)); err != nil {
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
	d := sandboxtest.MustOpen(t, dst, "")
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	kills, withDone := 0, 0
	progress := map[string]bool{}
	for deadline := time.Now().Add(18 * time.Second); kills < 5 || time.Now().Before(deadline); kills++ {
		cmd := startSluice()
		time.Sleep(time.Duration(300+rng.Intn(2500)) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if st, err := replicate.ReadStatus(stateDir); err == nil {
			progress[st.Applied.String()] = true
		}
		var n int
		if err := d.QueryRow("SELECT COUNT(*) FROM sluice_meta.apply_checkpoint WHERE task='rx9' AND done IS NOT NULL").Scan(&n); err == nil && n > 0 {
			withDone++
		}
	}
	if len(progress) < 3 {
		t.Fatalf("applied positions seen across %d kills: %v; log:\n%s", kills, progress, tail(filepath.Join(dir, "sluice.log")))
	}
	sbDone.Wait()
	stopLoad()
	insDone.Wait()
	if sbErr != nil {
		t.Fatal(sbErr)
	}

	end := masterStatus(t, src)
	cmd := startSluice()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
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
	t.Logf("%d kills, %d distinct applied positions at the kills, %d kills left groups committed out of order in the checkpoint", kills, len(progress), withDone)
	sameData(t, srcInst, dst, "rx9")
}
