package apply_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/apply"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sandbox"
)

// childMain runs one replication process for the crash and large
// transaction tests, configured by environment variables, so that the
// parent can kill -9 it or measure its memory.
func childMain() int {
	port := func(k string) int { n, _ := strconv.Atoi(os.Getenv(k)); return n }
	src := &sandbox.Instance{Name: "src", Port: port("SLUICE_SRC_PORT")}
	dstInst = &sandbox.Instance{Name: "dst", Port: port("SLUICE_DST_PORT")}
	pos, _ := strconv.ParseUint(os.Getenv("SLUICE_UNTIL_POS"), 10, 32)
	o := runOpts{task: os.Getenv("SLUICE_TASK"), workers: port("SLUICE_WORKERS"), batch: port("SLUICE_BATCH"), maxBatch: port("SLUICE_MAX_BATCH"), large: port("SLUICE_LARGE"),
		until: sluice.Position{File: os.Getenv("SLUICE_UNTIL_FILE"), Pos: uint32(pos)}, relaxed: os.Getenv("SLUICE_RELAXED") != ""}
	o.started = func(st apply.Stats) {
		// Printed at once: a killed run reports what it resumed from.
		fmt.Printf("start: skip-ranges=%d\n", st.SkipRanges)
	}
	if os.Getenv("SLUICE_DDL_HOLD") != "" {
		// TestDDLRerunAfterKill: report each DDL that ran, before its
		// checkpoint, and wait there to be killed (but for the one the
		// previous run was killed at: SLUICE_DDL_SPARE).
		apply.SetAfterDDLItemHook(func(end sluice.Position) {
			if end.String() == os.Getenv("SLUICE_DDL_SPARE") {
				return
			}
			fmt.Printf("ddl-done %s\n", end)
			select {}
		})
	}
	if os.Getenv("SLUICE_CLEAR_REFS") != "" {
		// Reset the peak RSS so VmHWM measures the replication alone.
		_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	}
	st, err := replicate(context.Background(), src, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	status, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			fmt.Printf("%s\n", strings.Join(strings.Fields(l), " "))
		}
	}
	fmt.Printf("txns=%d rows=%d commits=%d out-of-order=%d skipped=%d\n", st.Txns, st.Rows, st.Commits, st.OutOfOrder, st.Skipped)
	return 0
}

func childCmd(src *sandbox.Instance, task string, until sluice.Position, env ...string) *exec.Cmd {
	return childCmdBin(os.Args[0], src, task, until, env...)
}

func childCmdBin(bin string, src *sandbox.Instance, task string, until sluice.Position, env ...string) *exec.Cmd {
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), "SLUICE_APPLY_CHILD=1",
		"SLUICE_SRC_PORT="+strconv.Itoa(src.Port), "SLUICE_DST_PORT="+strconv.Itoa(dstInst.Port), "SLUICE_TASK="+task,
		"SLUICE_UNTIL_FILE="+until.File, "SLUICE_UNTIL_POS="+strconv.FormatUint(uint64(until.Pos), 10))
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// parallelWriters runs txn(i) for i in [0, n) on 4 goroutines, each taking
// every fourth i in order, and fails the test on the first error.
func parallelWriters(t *testing.T, n int, txn func(i int) error) {
	t.Helper()
	const writers = 4
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < n; i += writers {
				if err := txn(i); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// sourceWorkload runs n small transactions on the source: a counter update
// (a double apply would show in the sum), an insert into a keyed log, and
// inserts and deletes on a keyless table, with a DDL in the middle.
func sourceWorkload(t *testing.T, src *sql.DB, db string, n int) {
	t.Helper()
	sandboxtest.MustExec(t, src,
		"CREATE DATABASE "+db,
		"CREATE TABLE "+db+".acc (id INT PRIMARY KEY, n INT NOT NULL)",
		"CREATE TABLE "+db+".log (id INT PRIMARY KEY, acc INT, v VARCHAR(40), UNIQUE KEY (v))",
		"CREATE TABLE "+db+".nk (a INT, b INT)",
	)
	for i := 0; i < 20; i++ {
		sandboxtest.MustExec(t, src, fmt.Sprintf("INSERT INTO %s.acc VALUES (%d, 0)", db, i))
	}
	parallelWriters(t, n, func(i int) error {
		if i == n/2 {
			if _, err := src.Exec("ALTER TABLE " + db + ".log ADD COLUMN extra INT NOT NULL DEFAULT 0, ADD KEY (acc)"); err != nil {
				return err
			}
		}
		return retryTxn(src, []string{
			fmt.Sprintf("UPDATE %s.acc SET n = n + 1 WHERE id = %d", db, i%20),
			fmt.Sprintf("INSERT INTO %s.log (id, acc, v) VALUES (%d, %d, 'v%d')", db, i, i%20, i),
			fmt.Sprintf("INSERT INTO %s.nk VALUES (%d, %d), (%d, %d)", db, i%7, i, i%7, i),
			fmt.Sprintf("DELETE FROM %s.nk WHERE b = %d LIMIT 1", db, i-8),
		})
	})
}

// TestKill9ExactlyOnce applies a backlog with a replication process that is
// killed with SIGKILL at random moments and restarted from its checkpoint,
// several times, then lets it finish. The target must equal the source: no
// transaction lost, none applied twice (a counter would be too high, a
// duplicate insert would fail), without REPLACE or other safe mode.
func TestKill9ExactlyOnce(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	seed(t, "crash", src)
	sourceWorkload(t, src, "cr", 3000)
	until := sourcePos(t, src)
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	// Each kill is placed by observed progress, never by time: the counter
	// sum on the target counts the source transactions committed there, so
	// a round waits until it has advanced by a random step and then kills.
	// The steps add up to well under the 3000 transactions, so every kill
	// lands mid-stream however slow or fast the machine is. Groups may grow
	// (slow commits, or queued behind a busy worker on the workload's 20
	// hot rows), but only to twice the batch here: with the default 1000 one
	// commit could take a round past the last transaction.
	committed := counterSum(dst, "cr.acc")
	kills := 0
	for round := 0; round < 8; round++ {
		batch := 1 + rng.Intn(40)
		cmd := childCmd(srcInst, "crash", until, "SLUICE_WORKERS=4", "SLUICE_BATCH="+strconv.Itoa(batch), "SLUICE_MAX_BATCH="+strconv.Itoa(2*batch))
		killAfterProgress(t, round, cmd, committed, 1+rng.Intn(150), 3000)
		kills++
	}
	cmd := childCmd(srcInst, "crash", until, "SLUICE_WORKERS=4", "SLUICE_BATCH=20")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("final run: %v: %s", err, out)
	}
	t.Logf("%d kills; final run: %s", kills, strings.TrimSpace(string(out)))
	var finalTxns int
	if i := strings.Index(string(out), "txns="); i >= 0 {
		fmt.Sscanf(string(out[i:]), "txns=%d", &finalTxns)
	}
	if finalTxns >= 3000 {
		t.Fatalf("the final run applied %d transactions: the killed runs committed nothing, so no kill hit mid-stream", finalTxns)
	}
	sameTables(t, src, dst, "cr.acc", "cr.log", "cr.nk")
	var sum int
	if err := dst.QueryRow("SELECT SUM(n) FROM cr.acc").Scan(&sum); err != nil || sum != 3000 {
		t.Fatalf("target counter sum %d (%v), want 3000", sum, err)
	}
}

// TestCommitOrderPreserved applies independent transactions (no conflicts,
// so they run on several workers at once) and checks that the target
// committed them in source order: in the target's binlog, which MariaDB
// writes in the order InnoDB commits, every transaction's rows come after
// all rows of the transactions before it.
//
// An earlier version sampled the target with SELECTs while it applied and
// failed once in CI with a gap that the binlog would not have shown:
// MariaDB builds a read view by walking a lock-free hash of the active
// transactions (trx_sys_t::snapshot_ids), so a reader whose walk spans two
// commits can see the later one without the earlier.
func TestCommitOrderPreserved(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	seed(t, "order", src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE co")
	for i := 0; i < 4; i++ {
		sandboxtest.MustExec(t, src, fmt.Sprintf("CREATE TABLE co.t%d (id INT PRIMARY KEY)", i))
	}
	const n = 3000
	for i := 1; i <= n; i++ {
		sandboxtest.MustExec(t, src, fmt.Sprintf("INSERT INTO co.t%d VALUES (%d)", i%4, i))
	}
	until := sourcePos(t, src)
	from := sourcePos(t, dst)
	st, err := replicate(context.Background(), srcInst, runOpts{task: "order", workers: 8, batch: 3, until: until})
	if err != nil {
		t.Fatal(err)
	}
	txns := targetCommits(t, dstInst, from, sourcePos(t, dst), "co")
	var prev int64
	rows := 0
	for i, ids := range txns {
		lo, hi := ids[0], ids[0]
		for _, id := range ids {
			lo, hi = min(lo, id), max(hi, id)
		}
		if lo <= prev {
			t.Fatalf("target transaction %d of %d holds ids %d..%d, committed after one holding id %d: a later transaction committed before an earlier one", i+1, len(txns), lo, hi, prev)
		}
		prev, rows = hi, rows+len(ids)
	}
	t.Logf("%d target transactions with %d rows in commit order, %d commits, up to %d in flight", len(txns), rows, st.Commits, st.MaxInFlight)
	if rows != n {
		t.Fatalf("the target's binlog holds %d of the %d rows", rows, n)
	}
	if st.MaxInFlight < 2 {
		t.Fatalf("at most %d transaction in flight: independent transactions did not run in parallel, so order was never at stake", st.MaxInFlight)
	}
	sameTables(t, src, dst, "co.t0", "co.t1", "co.t2", "co.t3")
}

// retryTxn runs stmts in one source transaction, again after a deadlock
// between the workload's own writers.
func retryTxn(db *sql.DB, stmts []string) error {
	for {
		err := func() error {
			tx, err := db.Begin()
			if err != nil {
				return err
			}
			for _, q := range stmts {
				if _, err := tx.Exec(q); err != nil {
					tx.Rollback()
					return err
				}
			}
			return tx.Commit()
		}()
		if err == nil || !strings.Contains(err.Error(), "Error 1213") {
			return err
		}
	}
}

// counterSum returns a probe of SUM(n) of table on the target: the number of
// source transactions the crash workloads committed there. It reads 0 while
// the table is not replicated yet.
func counterSum(dst *sql.DB, table string) func() int {
	return func() int {
		var sum sql.NullInt64
		if err := dst.QueryRow("SELECT SUM(n) FROM " + table).Scan(&sum); err != nil {
			return 0
		}
		return int(sum.Int64)
	}
}

// killAfterProgress starts cmd, waits until committed() has advanced by step
// from its value at the start, then kills the child with SIGKILL. It fails
// the test unless the kill landed mid-stream: the child still running, and
// the counter moved but short of total. Only a generous bound against a hung
// child is a time limit; the machine's speed places nothing. It returns the
// child's output.
func killAfterProgress(t *testing.T, round int, cmd *exec.Cmd, committed func() int, step, total int) string {
	t.Helper()
	var out strings.Builder
	var mu sync.Mutex
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(p) })
	output := func() string { mu.Lock(); defer mu.Unlock(); return out.String() }
	cmd.Stdout, cmd.Stderr = w, w
	before := committed()
	want := before + step
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var err error
	done := false
	limit := time.Now().Add(5 * time.Minute)
	for !done && committed() < want {
		if time.Now().After(limit) {
			cmd.Process.Kill()
			<-exited
			t.Fatalf("round %d: the target's counter stayed below %d (at %d) for 5 minutes: the child made no progress: %s", round, want, committed(), output())
		}
		select {
		case err = <-exited:
			done = true
		case <-time.After(2 * time.Millisecond):
		}
	}
	if !done {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		err = <-exited
	}
	after := committed()
	ee, ok := err.(*exec.ExitError)
	if ok && ee.ExitCode() > 0 {
		t.Fatalf("round %d: child failed: %s", round, output())
	}
	if !ok || ee.ExitCode() != -1 {
		t.Fatalf("round %d: the child exited by itself (%v) at counter %d before the kill, so the kill did not land mid-stream: %s", round, err, after, output())
	}
	if after <= before || after >= total {
		t.Fatalf("round %d: counter %d -> %d of %d: the kill did not land mid-stream", round, before, after, total)
	}
	return output()
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
