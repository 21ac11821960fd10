package load_test

import (
	"database/sql"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluice-db/sluice/internal/dumpfmt"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// createResumeData makes a schema with a table of many chunks, a table with
// a composite key and a table without a key (one chunk).
func createResumeData(t *testing.T, schema string) {
	t.Helper()
	db := sandboxtest.MustOpen(t, srcInst, "")
	sandboxtest.MustExec(t, db,
		"DROP DATABASE IF EXISTS "+schema, "CREATE DATABASE "+schema,
		"CREATE TABLE "+schema+".big (id INT AUTO_INCREMENT PRIMARY KEY, k INT NOT NULL, c VARCHAR(64), b VARBINARY(64), KEY k (k))",
		"INSERT INTO "+schema+".big (k, c, b) SELECT seq % 1000, CONCAT('row ', seq, ' 😀'), UNHEX(SHA1(seq)) FROM "+schema+".seq_1_to_20000",
		"CREATE TABLE "+schema+".comp (a INT NOT NULL, b VARCHAR(10) NOT NULL, v TEXT, PRIMARY KEY (a, b))",
		"INSERT INTO "+schema+".comp SELECT seq DIV 10, CONCAT('b', seq % 10), REPEAT('v', seq % 50) FROM "+schema+".seq_1_to_3000",
		"CREATE TABLE "+schema+".nokey (a INT, b TEXT)",
		"INSERT INTO "+schema+".nokey SELECT seq % 7, IF(seq % 3 = 0, NULL, '') FROM "+schema+".seq_1_to_500",
	)
}

// killMidway starts sluice with args, waits until task has committed at
// least minDone checkpoints, and kills it with SIGKILL.
func killMidway(t *testing.T, dst *sql.DB, task string, minDone int64, args ...string) {
	t.Helper()
	killAfterChunks(t, dst, task, "", minDone, args...)
}

// killAfterChunks is killMidway counting only the chunks of table (a quoted
// `schema`.`table` key) when table is set.
func killAfterChunks(t *testing.T, dst *sql.DB, task, table string, minDone int64, args ...string) {
	t.Helper()
	query, qargs := "SELECT COUNT(*) FROM sluice_meta.load_checkpoint WHERE task = ?", []any{task}
	if table != "" {
		query, qargs = query+" AND tbl = ?", append(qargs, table)
	}
	cmd := exec.Command(sluiceBin, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	sandboxtest.Eventually(t, 5*time.Minute, fmt.Sprintf("%d chunks done", minDone), func() bool {
		var n int64
		// The checkpoint table may not exist yet: errors mean "not yet".
		_ = dst.QueryRow(query, qargs...).Scan(&n)
		if n >= minDone {
			return true
		}
		select {
		case err := <-exited:
			t.Fatalf("sluice exited (%v) before %d chunks were done; output:\n%s", err, minDone, out.String())
		default:
		}
		return false
	})
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
}

// checkpointsMatchData asserts the exactly-once invariant after a crash:
// every target table holds exactly the rows of its committed chunks.
func checkpointsMatchData(t *testing.T, dst *sql.DB, task, schema string, tables ...string) (done, rows int64) {
	t.Helper()
	for _, tb := range tables {
		key := "`" + schema + "`.`" + tb + "`"
		var have, marked, chunks int64
		_ = dst.QueryRow("SELECT COUNT(*) FROM `" + schema + "`.`" + tb + "`").Scan(&have) // a table may not exist yet
		if err := dst.QueryRow("SELECT COUNT(*), IFNULL(SUM(`rows`), 0) FROM sluice_meta.load_checkpoint WHERE task = ? AND tbl = ?", task, key).Scan(&chunks, &marked); err != nil {
			t.Fatal(err)
		}
		if have != marked {
			t.Errorf("after kill -9: %s holds %d rows but its committed chunks hold %d", key, have, marked)
		}
		done += chunks
		rows += have
	}
	return done, rows
}

func totalChunks(t *testing.T, dst *sql.DB, task string) int64 {
	t.Helper()
	var n int64
	rows, err := dst.Query("SELECT plan FROM sluice_meta.load_plan WHERE task = ?", task)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			t.Fatal(err)
		}
		n += int64(strings.Count(p, `"index"`))
	}
	return n
}

// TestMigrateResumesAfterKill9 kills a streaming migration mid-way and
// runs it again: nothing may be missing or doubled, and chunks committed
// before the kill are not copied again.
func TestMigrateResumesAfterKill9(t *testing.T) {
	sandboxtest.SkipShort(t)
	createResumeData(t, "rs_mg")
	src, dst := sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, "")
	// auto with a bulk limit of 10 chunks mixes both: comp and nokey load
	// whole, big (40 chunks) chunk by chunk.
	for _, unit := range []string{"chunk", "table", "auto"} {
		t.Run(unit, func(t *testing.T) {
			task, target := "rs_mg_"+unit, "rs_mg_"+unit
			cfg := taskFile(t, task, "rs_mg.*", fmt.Sprintf("routes: [{schema: rs_mg, target-schema: %s}]\nthreads: 2\npool-size: 2\nrows-per-chunk: 500", target))
			min := int64(6)
			if unit == "table" {
				min = 1 // one table's chunks commit together
			}
			killMidway(t, dst, task, min, "migrate", "--config", cfg, "--commit-unit", unit, "--bulk-max-chunks", "10", "--chunk-delay", "150ms")
			done, _ := checkpointsMatchData(t, dst, task, target, "big", "comp", "nokey")
			total := totalChunks(t, dst, task)
			if done < min || done >= total {
				t.Fatalf("the kill was not mid-way: %d of %d chunks done", done, total)
			}
			out := mustSluice(t, "migrate", "--config", cfg, "--commit-unit", unit, "--bulk-max-chunks", "10")
			if want := fmt.Sprintf("resumed: %d chunks done before", done); !strings.Contains(out, want) {
				t.Errorf("rerun output lacks %q:\n%s", want, out)
			}
			sameTables(t, src, dst, "rs_mg", target)
			if again, _ := checkpointsMatchData(t, dst, task, target, "big", "comp", "nokey"); again != total {
				t.Errorf("%d chunks marked done, plan has %d", again, total)
			}
		})
	}
}

// TestLoadResumesAfterKill9 does the same for sluice load from a directory.
func TestLoadResumesAfterKill9(t *testing.T) {
	sandboxtest.SkipShort(t)
	createResumeData(t, "rs_ld")
	src, dst := sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, "")
	cfg := taskFile(t, "rs_ld", "rs_ld.*", "routes: [{schema: rs_ld, target-schema: rs_ld_copy}]\nthreads: 2\npool-size: 3\nrows-per-chunk: 500")
	dir := t.TempDir() + "/dump"
	mustSluice(t, "dump", "--config", cfg, "--dir", dir)
	cmd := []string{"load", "--config", cfg, "--dir", dir, "--chunk-delay", "150ms", "--commit-unit", "chunk"}
	task := loadTaskKey(t, "rs_ld", dir)
	killMidway(t, dst, task, 6, cmd...)
	done, _ := checkpointsMatchData(t, dst, task, "rs_ld_copy", "big", "comp", "nokey")
	total := totalChunks(t, dst, task)
	if done >= total {
		t.Fatalf("the kill was not mid-way: %d of %d chunks done", done, total)
	}
	out := mustSluice(t, "load", "--config", cfg, "--dir", dir, "--commit-unit", "chunk")
	if want := fmt.Sprintf("(%d done before)", done); !strings.Contains(out, want) {
		t.Errorf("rerun output lacks %q:\n%s", want, out)
	}
	sameTables(t, src, dst, "rs_ld", "rs_ld_copy")
}

// loadTaskKey is the checkpoint key sluice load uses: the task name and the
// dump's start time, so checkpoints of one dump never count for another.
func loadTaskKey(t *testing.T, name, dir string) string {
	t.Helper()
	m, err := dumpfmt.ReadMetadata(dir)
	if err != nil {
		t.Fatal(err)
	}
	return name + "@dump:" + m.Started.UTC().Format(time.RFC3339Nano)
}

// TestMigrateSourceConnectionKilled kills the dump's source connections
// mid-run: the run must fail with one line, every committed chunk must be
// whole, and a rerun must finish the copy exactly.
func TestMigrateSourceConnectionKilled(t *testing.T) {
	sandboxtest.SkipShort(t)
	createResumeData(t, "rs_lost")
	src, dst := sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, "")
	cfg := taskFile(t, "rs_lost", "rs_lost.*", "routes: [{schema: rs_lost, target-schema: rs_lost_copy}]\nthreads: 2\npool-size: 2\nrows-per-chunk: 500")
	cmd := exec.Command(sluiceBin, "migrate", "--config", cfg, "--commit-unit", "chunk", "--chunk-delay", "100ms")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var n int64
	sandboxtest.Eventually(t, 5*time.Minute, "3 chunk checkpoints committed by the load", func() bool {
		_ = dst.QueryRow("SELECT COUNT(*) FROM sluice_meta.load_checkpoint WHERE task = 'rs_lost'").Scan(&n)
		return n >= 3
	}, func() string { return fmt.Sprintf("%d committed", n) })
	// The dump's connections are the ones reading rs_lost in a snapshot.
	rows, err := src.Query("SELECT ID FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() AND USER = 'root' AND (INFO LIKE '%rs_lost%' OR COMMAND = 'Sleep')")
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		_, _ = src.Exec(fmt.Sprintf("KILL CONNECTION %d", id))
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("sluice did not fail with exit 2 after its source connections died: %v\n%s", err, stderr.String())
	}
	if lines := strings.Split(strings.TrimSpace(stderr.String()), "\n"); len(lines) != 1 {
		t.Errorf("want one error line, got %d:\n%s", len(lines), stderr.String())
	}
	checkpointsMatchData(t, dst, "rs_lost", "rs_lost_copy", "big", "comp", "nokey")
	mustSluice(t, "migrate", "--config", cfg, "--commit-unit", "chunk")
	sameTables(t, src, dst, "rs_lost", "rs_lost_copy")
}
