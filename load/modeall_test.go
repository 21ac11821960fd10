package load_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestModeAllResumesExactly kills --mode all during its full copy while the
// source takes writes, and runs it again. The rerun reads the remaining
// chunks from a second snapshot, then replicates from the first one; the
// changes that a chunk of the second snapshot already holds must be skipped
// for that chunk and applied everywhere else. The writes include updates
// that move a primary key from one chunk to another, and plain INSERTs into
// a table without a key, where a change applied twice shows up as an extra
// row. The composite-key and second-unique-key tables, which replication
// cannot match to chunks, are reloaded whole if the kill left them partly
// copied. In the end sluice verify must find the target equal to the source.
func TestModeAllResumesExactly(t *testing.T) {
	sandboxtest.SkipShort(t)
	// A late kill leaves every table's first chunk copied: big is mixed
	// chunk by chunk, comp and uq are reloaded. An early kill (one chunk
	// of big done) leaves the keyless table to the second snapshot, so its
	// INSERTs between the snapshots must all be skipped. The early kill
	// waits for a chunk of big, not any chunk: a first chunk of comp or uq
	// is reloaded whole, which left the copy with one snapshot only; and
	// its first run copies one chunk at a time, so nokey's cannot come
	// before big's.
	// The late run is stopped with SIGINT, the early one with SIGHUP (a
	// closed terminal), which must be as clean a stop (issue 30).
	t.Run("late", func(t *testing.T) { modeAllResumes(t, "rs_all", 14, "", syscall.SIGINT) })
	t.Run("early", func(t *testing.T) { modeAllResumes(t, "rs_all1", 1, "nokey", syscall.SIGHUP) })
}

// modeAllResumes runs the scenario on schema, killing the first run after
// minDone chunks. laterTable, if set, must have been copied from the second
// snapshot.
func modeAllResumes(t *testing.T, schema string, minDone int64, laterTable string, stopSig syscall.Signal) {
	createResumeData(t, schema)
	src, dst := sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, "")
	sandboxtest.MustExec(t, src,
		"CREATE TABLE "+schema+".uq (id INT PRIMARY KEY, u INT NOT NULL, v VARCHAR(20), UNIQUE KEY u (u))",
		"INSERT INTO "+schema+".uq SELECT seq, seq * 2, 'v' FROM "+schema+".seq_1_to_3000")
	task, copySchema := schema, schema+"_copy"
	cfg := taskFile(t, task, schema+".*", fmt.Sprintf("routes: [{schema: %s, target-schema: %s}]\nthreads: 2\npool-size: 2\nrows-per-chunk: 500\ndir: %s\nincremental: {worker-count: 4, batch: 20}",
		schema, copySchema, filepath.Join(t.TempDir(), "state")))

	stopWrites := writeWhileCopying(t, schema)
	defer stopWrites()
	killTable, first := "", []string{"migrate", "--config", cfg, "--mode", "all", "--commit-unit", "chunk", "--chunk-delay", "150ms"}
	if laterTable != "" {
		// One connection each way: chunks then commit in the dumper's
		// interleaved order (big, comp, nokey, ...), 150 ms apart, so the
		// kill lands after big's first chunk and long before nokey's. With
		// two, comp's or nokey's chunk could commit first.
		killTable = "`" + copySchema + "`.`big`"
		first = append(first, "--threads", "1", "--pool-size", "1")
	}
	killAfterChunks(t, dst, task, killTable, minDone, first...)
	done, _ := checkpointsMatchData(t, dst, task, copySchema, "big", "comp", "nokey", "uq")
	if total := totalChunks(t, dst, task); done >= total {
		t.Fatalf("the kill was not mid-way: %d of %d chunks done", done, total)
	}
	t.Logf("killed after %d chunks: %s", done, partial(t, dst, task))
	// DDL while the copy is stopped: a new table, which the rerun copies
	// whole (its CREATE and its first rows must be skipped), and, when the
	// keyless table was copied by the first run, an index for it, which
	// replication must add.
	sandboxtest.MustExec(t, src, "CREATE TABLE "+schema+".fresh (id INT PRIMARY KEY, v INT)",
		"INSERT INTO "+schema+".fresh SELECT seq, seq FROM "+schema+".seq_1_to_100")
	if laterTable == "" {
		// And an index on big, which the kill left copied partly from
		// each snapshot: it changes no row, so replication adds it
		// (issue 29: every restart refused "copied partly before and
		// partly after it").
		sandboxtest.MustExec(t, src, "ALTER TABLE "+schema+".nokey ADD INDEX a (a)", "ALTER TABLE "+schema+".big ADD INDEX k_c (c(10))")
	}

	cmd := exec.Command(sluiceBin, "migrate", "--config", cfg, "--mode", "all", "--commit-unit", "chunk")
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	// Writes go on while the rerun copies and starts replicating.
	waitFor(t, exited, &out, "replication to start", func() bool { return strings.Contains(out.String(), "replicate "+task+":") })
	time.Sleep(2 * time.Second)
	sandboxtest.MustExec(t, src, "INSERT INTO "+schema+".fresh SELECT seq, seq FROM "+schema+".seq_101_to_200", "UPDATE "+schema+".fresh SET v = -v WHERE id <= 10")
	stopWrites()
	var gtid string
	if err := src.QueryRow("SELECT @@gtid_binlog_pos").Scan(&gtid); err != nil {
		t.Fatal(err)
	}
	waitFor(t, exited, &out, "the target to apply "+gtid, func() bool { return applied(dst, task, gtid) })
	if err := cmd.Process.Signal(stopSig); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Fatalf("migrate --mode all did not stop cleanly on %v: %v\n%s", stopSig, err, out.String())
	}
	t.Logf("rerun output:\n%s", out.String())

	var snaps int
	if err := dst.QueryRow("SELECT COUNT(DISTINCT snapshot) FROM sluice_meta.load_checkpoint WHERE task = ?", task).Scan(&snaps); err != nil {
		t.Fatal(err)
	}
	if snaps < 2 {
		t.Fatalf("the copy holds chunks of %d snapshot(s); the test needs two", snaps)
	}
	if laterTable != "" {
		var first, later string
		if err := dst.QueryRow("SELECT position FROM sluice_meta.load_task WHERE task = ?", task).Scan(&first); err != nil {
			t.Fatal(err)
		}
		if err := dst.QueryRow("SELECT snapshot FROM sluice_meta.load_checkpoint WHERE task = ? AND tbl = ?", task, "`"+copySchema+"`.`"+laterTable+"`").Scan(&later); err != nil {
			t.Fatal(err)
		}
		if later == first {
			t.Fatalf("the kill came too late: %s was copied from the first snapshot, so this run does not test skipping its changes", laterTable)
		}
	}
	if o, e, code := sluice(t, "verify", "--config", cfg); code != 0 {
		t.Fatalf("verify after the resumed --mode all: exit %d\n%s%s", code, o, e)
	}
	if laterTable == "" {
		var idx int
		if err := dst.QueryRow("SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'nokey' AND INDEX_NAME = 'a'", copySchema).Scan(&idx); err != nil {
			t.Fatal(err)
		}
		if idx == 0 {
			t.Errorf("the index added to nokey while the copy was stopped is missing on the target")
		}
		if err := dst.QueryRow("SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'big' AND INDEX_NAME = 'k_c'", copySchema).Scan(&idx); err != nil {
			t.Fatal(err)
		}
		if idx == 0 {
			t.Errorf("the index added to big while the copy was stopped is missing on the target")
		}
	}
	for _, tb := range []string{"big", "comp", "nokey", "uq", "fresh"} {
		a, b := tableRows(t, src, schema, tb), tableRows(t, dst, copySchema, tb)
		if strings.Join(a, "\n") != strings.Join(b, "\n") {
			t.Errorf("%s: %d rows on the source, %d on the target, contents differ", tb, len(a), len(b))
		}
	}
}

// writeWhileCopying runs small transactions on schema until the returned
// function is called: updates, inserts and deletes all over big's key
// range, updates that move a key to another chunk, changes to comp and to
// uq's unique column, and plain INSERTs into the keyless table.
func writeWhileCopying(t *testing.T, schema string) func() {
	t.Helper()
	db := sandboxtest.MustOpen(t, srcInst, "")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	errc := make(chan error, 1)
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewSource(1))
		for n := 0; ctx.Err() == nil; n++ {
			id := 1 + r.Intn(20000)
			stmts := []string{
				fmt.Sprintf("UPDATE %s.big SET c = CONCAT('upd ', %d) WHERE id = %d", schema, n, id),
				fmt.Sprintf("INSERT INTO %s.big (id, k, c) VALUES (%d, %d, 'new')", schema, 200000+n, n%1000),
				fmt.Sprintf("INSERT INTO %s.nokey VALUES (%d, 'written')", schema, n),
				fmt.Sprintf("UPDATE %s.comp SET v = 'w%d' WHERE a = %d", schema, n, r.Intn(300)),
				fmt.Sprintf("UPDATE %s.uq SET u = u + 7000 WHERE id = %d", schema, 1+r.Intn(3000)),
			}
			// Inserts take explicit keys and moves go far beyond them, so
			// an AUTO_INCREMENT counter raised by a move never collides.
			switch n % 4 {
			case 0: // to the last chunk
				stmts = append(stmts, fmt.Sprintf("UPDATE %s.big SET id = id + 1000000 WHERE id = %d", schema, 1+r.Intn(20000)))
			case 1: // to the first chunk
				stmts = append(stmts, fmt.Sprintf("UPDATE %s.big SET id = -id WHERE id = %d", schema, 1+r.Intn(20000)))
			case 2:
				stmts = append(stmts, fmt.Sprintf("DELETE FROM %s.big WHERE id = %d", schema, 1+r.Intn(20000)))
			}
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				break
			}
			for _, q := range stmts {
				if _, err = tx.ExecContext(ctx, q); err != nil {
					break
				}
			}
			if err == nil {
				err = tx.Commit()
			} else {
				_ = tx.Rollback()
			}
			if err != nil && ctx.Err() == nil {
				errc <- err
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			select {
			case err := <-errc:
				t.Fatalf("source writes: %v", err)
			default:
			}
		})
	}
}

// partial describes how much of each table the killed run copied.
func partial(t *testing.T, dst *sql.DB, task string) string {
	t.Helper()
	rows, err := dst.Query("SELECT tbl, COUNT(*) FROM sluice_meta.load_checkpoint WHERE task = ? GROUP BY tbl", task)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var tbl string
		var n int
		if err := rows.Scan(&tbl, &n); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, fmt.Sprintf("%s %d chunks", tbl, n))
	}
	return strings.Join(parts, ", ")
}

// applied reports whether the task's apply checkpoint covers gtid (a
// MariaDB GTID position: one domain-server-seq per domain).
func applied(dst *sql.DB, task, gtid string) bool {
	var have string
	if err := dst.QueryRow("SELECT gtid_set FROM sluice_meta.apply_checkpoint WHERE task = ? ORDER BY seq DESC LIMIT 1", task).Scan(&have); err != nil {
		return false
	}
	seqs := func(s string) map[string]uint64 {
		m := map[string]uint64{}
		for _, g := range strings.Split(s, ",") {
			p := strings.Split(strings.TrimSpace(g), "-")
			if len(p) == 3 {
				n, _ := strconv.ParseUint(p[2], 10, 64)
				m[p[0]] = n
			}
		}
		return m
	}
	h := seqs(have)
	for d, n := range seqs(gtid) {
		if h[d] < n {
			return false
		}
	}
	return true
}

// waitFor is sandboxtest.Eventually that fails at once if the sluice
// process exits first (exited may be nil: no process). The bound only
// keeps a stuck run from hanging the package, far above any healthy run.
func waitFor(t *testing.T, exited chan error, out *syncBuffer, what string, cond func() bool, diag ...func() string) {
	t.Helper()
	sandboxtest.Eventually(t, 5*time.Minute, what, func() bool {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("sluice exited (%v) while waiting for %s:\n%s", err, what, out.String())
		default:
		}
		return cond()
	}, append([]func() string{func() string { return "sluice:\n" + out.String() }}, diag...)...)
}

// syncBuffer is what a sluice process writes while the test reads it.
type syncBuffer = sandboxtest.SyncBuffer

// TestInterruptedReloadFinishes simulates a crash in the middle of emptying
// a table for its reload: the checkpoints are gone and the load_reset mark
// is committed, but the rows are still there. The next run must empty the
// table and load it again, not stop on rows it cannot account for nor keep
// them next to the reloaded ones.
func TestInterruptedReloadFinishes(t *testing.T) {
	sandboxtest.SkipShort(t)
	createResumeData(t, "rs_reset")
	src, dst := sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, "")
	cfg := taskFile(t, "rs_reset", "rs_reset.*", "routes: [{schema: rs_reset, target-schema: rs_reset_copy}]\nrows-per-chunk: 500")
	mustSluice(t, "migrate", "--config", cfg)
	key := "`rs_reset_copy`.`comp`"
	sandboxtest.MustExec(t, dst,
		"INSERT INTO sluice_meta.load_reset (task, tbl) VALUES ('rs_reset', '"+key+"')",
		"DELETE FROM sluice_meta.load_checkpoint WHERE task = 'rs_reset' AND tbl = '"+key+"'",
		"UPDATE sluice_meta.load_task SET finished = NULL WHERE task = 'rs_reset'")
	out := mustSluice(t, "migrate", "--config", cfg)
	if !strings.Contains(out, "resumed") {
		t.Errorf("the rerun did not resume:\n%s", out)
	}
	sameTables(t, src, dst, "rs_reset", "rs_reset_copy")
	var marks int
	if err := dst.QueryRow("SELECT COUNT(*) FROM sluice_meta.load_reset WHERE task = 'rs_reset'").Scan(&marks); err != nil {
		t.Fatal(err)
	}
	if marks != 0 {
		t.Errorf("%d reload marks left", marks)
	}
}
