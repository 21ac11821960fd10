package load_test

import (
	"database/sql"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// allRun is one background `sluice migrate --mode all`.
type allRun struct {
	cfg    string
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan error
}

// startAll starts `sluice migrate --config cfg --mode all [extra...]`; the
// test's cleanup kills it if the test did not stop it.
func startAll(t *testing.T, cfg string, extra ...string) *allRun {
	t.Helper()
	args := append([]string{"migrate", "--config", cfg, "--mode", "all"}, extra...)
	r := &allRun{cfg: cfg, cmd: exec.Command(sluiceBin, args...), out: &syncBuffer{}, exited: make(chan error, 1)}
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.exited <- r.cmd.Wait() }()
	t.Cleanup(func() {
		if r.cmd.ProcessState == nil {
			_ = r.cmd.Process.Kill()
			<-r.exited
		}
	})
	return r
}

// waitReplicating waits until the copy is done and replication runs.
func (r *allRun) waitReplicating(t *testing.T, task string) {
	t.Helper()
	waitFor(t, r.exited, r.out, "replication to start", func() bool { return strings.Contains(r.out.String(), "replicate "+task+":") })
}

// waitApplied waits until the task has applied everything the source has.
func (r *allRun) waitApplied(t *testing.T, src, dst *sql.DB, task string) {
	t.Helper()
	var gtid string
	if err := src.QueryRow("SELECT @@gtid_binlog_pos").Scan(&gtid); err != nil {
		t.Fatal(err)
	}
	waitFor(t, r.exited, r.out, "the target to apply "+gtid, func() bool { return applied(dst, task, gtid) }, func() string {
		st, _ := exec.Command(sluiceBin, "status", "--config", r.cfg).CombinedOutput()
		return "status:\n" + string(st)
	})
}

// stop ends the run with SIGTERM and requires a clean exit.
func (r *allRun) stop(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-r.exited; err != nil {
		t.Fatalf("migrate --mode all did not stop cleanly: %v\n%s", err, r.out.String())
	}
}

// comFlush is the source's count of FLUSH statements (FLUSH TABLES WITH
// READ LOCK among them).
func comFlush(t *testing.T, db *sql.DB) int64 {
	t.Helper()
	var name string
	var n int64
	if err := db.QueryRow("SHOW GLOBAL STATUS LIKE 'Com_flush'").Scan(&name, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// checksums compares CHECKSUM TABLE of every table of schema on both sides
// (independent of sluice's code; sameTables adds HEX() of every column).
func checksums(t *testing.T, src, dst *sql.DB, schema string, tables ...string) {
	t.Helper()
	sum := func(db *sql.DB, tb string) string {
		var name string
		var s sql.NullString
		if err := db.QueryRow("CHECKSUM TABLE `"+schema+"`.`"+tb+"` EXTENDED").Scan(&name, &s); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(s.String, s.Valid)
	}
	for _, tb := range tables {
		if a, b := sum(src, tb), sum(dst, tb); a != b {
			t.Errorf("CHECKSUM TABLE %s.%s: source %s, target %s", schema, tb, a, b)
		}
	}
}

func rerunTask(t *testing.T, schema string) string {
	return taskFile(t, schema, schema+".*", fmt.Sprintf("rows-per-chunk: 200\ndir: %s\nincremental: {worker-count: 4, batch: 20}", filepath.Join(t.TempDir(), "state")))
}

func createRerunData(t *testing.T, src *sql.DB, schema string) {
	sandboxtest.MustExec(t, src, "DROP DATABASE IF EXISTS "+schema, "CREATE DATABASE "+schema,
		"CREATE TABLE "+schema+".t (id INT PRIMARY KEY, v VARCHAR(20))",
		"INSERT INTO "+schema+".t SELECT seq, CONCAT('v', seq) FROM "+schema+".seq_1_to_1000",
		"CREATE TABLE "+schema+".k (a INT, b VARCHAR(20))",
		"INSERT INTO "+schema+".k SELECT seq % 7, 'x' FROM "+schema+".seq_1_to_500")
}

// TestModeAllRerunResumesReplication: once the copy is complete, a rerun of
// --mode all resumes replication from its checkpoint like --mode
// incremental (issue 13, bug 8): after a clean stop with a source DDL
// applied and another one not yet seen, after replication made a new
// table, and without FLUSH TABLES WITH READ LOCK on the source (bug 10):
// the rerun starts while another session holds a table lock that FTWRL
// would wait for.
func TestModeAllRerunResumesReplication(t *testing.T) {
	const schema = "rr_all"
	src, dst := sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, "")
	createRerunData(t, src, schema)
	cfg := rerunTask(t, schema)

	r := startAll(t, cfg)
	waitFor(t, r.exited, r.out, "replication to start", func() bool { return strings.Contains(r.out.String(), "replicate "+schema+":") })
	sandboxtest.MustExec(t, src,
		"ALTER TABLE "+schema+".t ADD COLUMN c INT DEFAULT 5",
		"UPDATE "+schema+".t SET c = id WHERE id % 3 = 0",
		"CREATE TABLE "+schema+".newt (id INT PRIMARY KEY, s VARCHAR(10))",
		"INSERT INTO "+schema+".newt SELECT seq, 'n' FROM "+schema+".seq_1_to_50")
	r.waitApplied(t, src, dst, schema)
	r.stop(t)

	// While stopped: a DDL the target has not seen (the definitions now
	// differ legitimately) and more rows in the table replication made.
	sandboxtest.MustExec(t, src,
		"ALTER TABLE "+schema+".t ADD COLUMN d VARCHAR(5) DEFAULT 'dd'",
		"INSERT INTO "+schema+".t (id, v) VALUES (5000, 'late')",
		"INSERT INTO "+schema+".newt SELECT seq, 'm' FROM "+schema+".seq_51_to_80",
		"DELETE FROM "+schema+".k WHERE a = 3")

	// A session holds a table lock on the source: FLUSH TABLES WITH READ
	// LOCK would wait for it (and stall every writer behind it).
	locker, err := src.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close()
	if _, err := locker.ExecContext(t.Context(), "LOCK TABLES "+schema+".k WRITE"); err != nil {
		t.Fatal(err)
	}
	flushes := comFlush(t, src)
	r = startAll(t, cfg)
	r.waitApplied(t, src, dst, schema)
	if n := comFlush(t, src); n != flushes {
		t.Errorf("the rerun ran %d FLUSH statements on the source (FLUSH TABLES WITH READ LOCK with nothing to copy)", n-flushes)
	}
	if _, err := locker.ExecContext(t.Context(), "UNLOCK TABLES"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.out.String(), "full copy is complete; resuming replication") {
		t.Errorf("the rerun did not say it resumes replication:\n%s", r.out.String())
	}
	// Still replicating after the rerun.
	sandboxtest.MustExec(t, src, "INSERT INTO "+schema+".newt VALUES (100, 'after')", "UPDATE "+schema+".t SET d = 'x' WHERE id < 10")
	r.waitApplied(t, src, dst, schema)
	r.stop(t)
	sameTables(t, src, dst, schema, schema)
	checksums(t, src, dst, schema, "t", "k", "newt")
	if o, e, code := sluice(t, "verify", "--config", cfg); code != 0 {
		t.Fatalf("verify: exit %d\n%s%s", code, o, e)
	}

	// A copied table dropped on the target (as a refusal's fix might say):
	// the rerun loads it again, and only it; the table that replication
	// made is not copied (it would be refused as holding rows this task
	// did not load) and keeps its rows.
	sandboxtest.MustExec(t, dst, "DROP TABLE "+schema+".t")
	sandboxtest.MustExec(t, src, "INSERT INTO "+schema+".newt VALUES (101, 'x')", "UPDATE "+schema+".t SET v = 'moved' WHERE id = 1")
	r = startAll(t, cfg)
	r.waitApplied(t, src, dst, schema)
	r.stop(t)
	if out := r.out.String(); !strings.Contains(out, schema+".t is missing on the target") || !strings.Contains(out, "1 tables, snapshot at") {
		t.Errorf("the rerun did not reload exactly the dropped table:\n%s", out)
	}
	sameTables(t, src, dst, schema, schema)
	checksums(t, src, dst, schema, "t", "k", "newt")
}

// TestModeAllRerunAfterKillBeforeDDL kills --mode all with SIGKILL while a
// source DDL is in the relay but not applied (the target's ALTER waits for
// a metadata lock held by another session). Every rerun used to fail on the
// differing definition, so the DDL was never applied. The rerun must resume
// replication and apply it.
func TestModeAllRerunAfterKillBeforeDDL(t *testing.T) {
	const schema = "rr_kill"
	src, dst := sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, "")
	createRerunData(t, src, schema)
	cfg := rerunTask(t, schema)
	r := startAll(t, cfg)
	waitFor(t, r.exited, r.out, "replication to start", func() bool { return strings.Contains(r.out.String(), "replicate "+schema+":") })
	r.waitApplied(t, src, dst, schema)

	// Hold the target table's metadata lock so the replicated ALTER waits.
	holder, err := dst.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	for _, q := range []string{"BEGIN", "SELECT COUNT(*) FROM " + schema + ".t"} {
		if _, err := holder.ExecContext(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	sandboxtest.MustExec(t, src, "ALTER TABLE "+schema+".t ADD COLUMN e INT NOT NULL DEFAULT 7", "INSERT INTO "+schema+".t (id, v) VALUES (7000, 'e')")
	var alterID int64
	waitFor(t, r.exited, r.out, "the ALTER to wait on the target", func() bool {
		err := dst.QueryRow("SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE 'ALTER TABLE%' AND STATE LIKE 'Waiting for table metadata lock%'").Scan(&alterID)
		return err == nil
	})
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-r.exited
	// The dead client's statement must not run on later: end it as the
	// server would once it noticed, then let go of the lock.
	_, _ = dst.Exec(fmt.Sprintf("KILL QUERY %d", alterID))
	if _, err := holder.ExecContext(t.Context(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	var cols int
	if err := dst.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 't' AND COLUMN_NAME = 'e'", schema).Scan(&cols); err != nil || cols != 0 {
		t.Fatalf("the ALTER reached the target before the kill (%d, %v): the kill was not between relay and apply", cols, err)
	}

	r = startAll(t, cfg)
	r.waitApplied(t, src, dst, schema)
	r.stop(t)
	sameTables(t, src, dst, schema, schema)
	checksums(t, src, dst, schema, "t", "k")
}

// TestRerunReloadsLostTables follows the fixes that refusals print and
// checks that no row is lost: a target table that a user drops (as the
// definition-mismatch hint says) or empties is loaded again, not left empty
// under checkpoints that say its chunks are done; with --mode full, and
// with --mode all after replication ran.
func TestRerunReloadsLostTables(t *testing.T) {
	const schema = "rr_lost"
	src, dst := sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, "")
	createRerunData(t, src, schema)
	cfg := rerunTask(t, schema)
	mustSluice(t, "migrate", "--config", cfg, "--mode", "full")

	// --mode full rerun, nothing to copy: no FTWRL, even behind a lock.
	locker, err := src.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close()
	if _, err := locker.ExecContext(t.Context(), "LOCK TABLES "+schema+".k WRITE"); err != nil {
		t.Fatal(err)
	}
	flushes := comFlush(t, src)
	out := mustSluice(t, "migrate", "--config", cfg, "--mode", "full")
	if n := comFlush(t, src); n != flushes || !strings.Contains(out, "nothing left to copy") {
		t.Errorf("--mode full rerun with nothing to copy: %d FLUSH statements on the source:\n%s", n-flushes, out)
	}
	if _, err := locker.ExecContext(t.Context(), "UNLOCK TABLES"); err != nil {
		t.Fatal(err)
	}

	// A source DDL after the copy is a change after its snapshot: a rerun
	// has nothing to copy and leaves the copied table as it is.
	sandboxtest.MustExec(t, src, "ALTER TABLE "+schema+".t ADD COLUMN c INT DEFAULT 5")
	o, e, code := sluice(t, "migrate", "--config", cfg, "--mode", "full")
	if code != 0 || !strings.Contains(o, "nothing left to copy") {
		t.Fatalf("rerun after a source DDL: exit %d\n%s%s", code, o, e)
	}
	// A copied table dropped on the target is loaded again whole, in the
	// source's new definition.
	sandboxtest.MustExec(t, dst, "DROP TABLE "+schema+".t")
	out = mustSluice(t, "migrate", "--config", cfg, "--mode", "full")
	if !strings.Contains(out, "missing on the target although this task copied it") {
		t.Errorf("the rerun did not say it reloads the dropped table:\n%s", out)
	}
	sameTables(t, src, dst, schema, schema)
	checksums(t, src, dst, schema, "t", "k")

	// --mode all after that copy: replication starts at the first snapshot
	// and must not redo the ALTER on the reloaded table.
	r := startAll(t, cfg)
	sandboxtest.MustExec(t, src, "INSERT INTO "+schema+".t (id, v) VALUES (3000, 'r')", "INSERT INTO "+schema+".k VALUES (99, 'r')")
	r.waitApplied(t, src, dst, schema)
	r.stop(t)
	sameTables(t, src, dst, schema, schema)

	// After replication: a table dropped on the target is reloaded.
	sandboxtest.MustExec(t, dst, "DROP TABLE "+schema+".t")
	sandboxtest.MustExec(t, src, "INSERT INTO "+schema+".t (id, v) VALUES (3001, 's')")
	r = startAll(t, cfg)
	r.waitApplied(t, src, dst, schema)
	sandboxtest.MustExec(t, src, "INSERT INTO "+schema+".t (id, v) VALUES (3002, 'u')", "DELETE FROM "+schema+".k WHERE a = 2")
	r.waitApplied(t, src, dst, schema)
	r.stop(t)
	if want := schema + ".t is missing on the target"; !strings.Contains(r.out.String(), want) {
		t.Errorf("the rerun did not report %q:\n%s", want, r.out.String())
	}
	sameTables(t, src, dst, schema, schema)
	checksums(t, src, dst, schema, "t", "k")

	// Emptied by replication (a source TRUNCATE), then more rows on the
	// source while sluice is stopped: the rerun must not take the empty
	// table for a lost one and copy it again (the difftest's bug N: rows
	// loaded twice, or deleted rows back).
	r = startAll(t, cfg)
	sandboxtest.MustExec(t, src, "TRUNCATE TABLE "+schema+".t")
	r.waitApplied(t, src, dst, schema)
	r.stop(t)
	sandboxtest.MustExec(t, src, "INSERT INTO "+schema+".t (id, v) VALUES (4000, 'n')")
	r = startAll(t, cfg)
	r.waitApplied(t, src, dst, schema)
	r.stop(t)
	if strings.Contains(r.out.String(), "on the target although this task copied it") {
		t.Errorf("the rerun reloaded a table replication emptied:\n%s", r.out.String())
	}
	sameTables(t, src, dst, schema, schema)

	// Emptied by hand once replication has run: an empty table cannot be
	// told from one a replicated TRUNCATE or DELETE emptied, so the rerun
	// reloads nothing; the applier stops at the first change of a row that
	// is not there, and never guesses.
	sandboxtest.MustExec(t, dst, "TRUNCATE TABLE "+schema+".k")
	sandboxtest.MustExec(t, src, "UPDATE "+schema+".k SET b = 'y' WHERE a = 1")
	o, e, code = sluice(t, "migrate", "--config", cfg, "--mode", "all")
	if code == 0 || !strings.Contains(e, "row missing on the target") || strings.Contains(o, "is empty on the target") {
		t.Fatalf("rerun after a table emptied by hand: exit %d\n%s%s", code, o, e)
	}
}

// TestRerunLeavesReplicatedDropAlone: a copied table that replication
// dropped (a source DROP TABLE, applied and checkpointed) is missing on the
// target for a good reason. When the source makes a table of that name
// again while sluice is stopped, the rerun must not take it for a table
// lost by hand and reload it from a new snapshot (difftest seed 628: the
// copy became mixed, and a later DDL stopped the task for good); the
// replicated CREATE and INSERTs make it, as they made it on the source.
func TestRerunLeavesReplicatedDropAlone(t *testing.T) {
	const schema = "rr_drop"
	src, dst := sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, "")
	createRerunData(t, src, schema)
	cfg := rerunTask(t, schema)
	r := startAll(t, cfg)
	waitFor(t, r.exited, r.out, "replication to start", func() bool { return strings.Contains(r.out.String(), "replicate "+schema+":") })
	sandboxtest.MustExec(t, src, "DROP TABLE "+schema+".k")
	r.waitApplied(t, src, dst, schema)
	r.stop(t)
	sandboxtest.MustExec(t, src, "CREATE TABLE "+schema+".k (a INT, b VARCHAR(20), c INT)",
		"INSERT INTO "+schema+".k SELECT seq, 'again', seq FROM "+schema+".seq_1_to_300",
		"UPDATE "+schema+".t SET v = 'after' WHERE id <= 10")
	r = startAll(t, cfg)
	r.waitApplied(t, src, dst, schema)
	r.stop(t)
	if strings.Contains(r.out.String(), "although this task copied it") {
		t.Errorf("the rerun reloaded a table that replication dropped:\n%s", r.out.String())
	}
	sameTables(t, src, dst, schema, schema)
	checksums(t, src, dst, schema, "t", "k")
}

// TestLoadRerunReloadsLostTables: sluice load from a dump directory, then a
// target table dropped and one emptied by hand; the rerun loads both again
// from the dump instead of keeping checkpoints that say they are loaded.
func TestLoadRerunReloadsLostTables(t *testing.T) {
	const schema = "rr_ldlost"
	src, dst := sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, "")
	createRerunData(t, src, schema)
	cfg := taskFile(t, schema, schema+".*", "routes: [{schema: "+schema+", target-schema: "+schema+"_copy}]\nrows-per-chunk: 200")
	dir := t.TempDir() + "/dump"
	mustSluice(t, "dump", "--config", cfg, "--dir", dir)
	mustSluice(t, "load", "--config", cfg, "--dir", dir)
	sameTables(t, src, dst, schema, schema+"_copy")
	sandboxtest.MustExec(t, dst, "DROP TABLE "+schema+"_copy.t", "TRUNCATE TABLE "+schema+"_copy.k")
	out := mustSluice(t, "load", "--config", cfg, "--dir", dir)
	for _, want := range []string{schema + "_copy.t is missing on the target", schema + "_copy.k is empty on the target"} {
		if !strings.Contains(out, want) {
			t.Errorf("the rerun did not report %q:\n%s", want, out)
		}
	}
	sameTables(t, src, dst, schema, schema+"_copy")
}

// TestMixedCopyHintReloads follows the fix that replication prints for a
// table copied from two snapshots whose key it cannot match to chunks
// (a resumed --mode full copy of a composite-key table, then --mode all):
// drop the table on the target, delete its checkpoints, run --mode all
// again. The table must be loaded again whole and no row lost.
func TestMixedCopyHintReloads(t *testing.T) {
	sandboxtest.SkipShort(t)
	const schema = "rr_mix"
	createResumeData(t, schema)
	src, dst := sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, "")
	cfg := taskFile(t, schema, schema+".*", fmt.Sprintf("rows-per-chunk: 500\ndir: %s\nincremental: {worker-count: 4, batch: 20}", filepath.Join(t.TempDir(), "state")))
	killAfterChunks(t, dst, schema, "`"+schema+"`.`comp`", 1, "migrate", "--config", cfg, "--mode", "full",
		"--commit-unit", "chunk", "--chunk-delay", "150ms", "--threads", "1", "--pool-size", "1")
	sandboxtest.MustExec(t, src, "UPDATE "+schema+".comp SET v = 'changed' WHERE a % 40 = 1", "INSERT INTO "+schema+".comp VALUES (5000, 'x', 'new')")
	mustSluice(t, "migrate", "--config", cfg, "--mode", "full")
	var snaps int
	if err := dst.QueryRow("SELECT COUNT(DISTINCT snapshot) FROM sluice_meta.load_checkpoint WHERE task = ? AND tbl = ?", schema, "`"+schema+"`.`comp`").Scan(&snaps); err != nil || snaps < 2 {
		t.Fatalf("comp was copied from %d snapshots (%v), want 2", snaps, err)
	}

	r := startAll(t, cfg)
	select {
	case err := <-r.exited:
		if err == nil || !strings.Contains(r.out.String(), "copied from several snapshots") || !strings.Contains(r.out.String(), "delete its rows from sluice_meta.load_checkpoint") {
			t.Fatalf("--mode all after a mixed copy of comp: %v\n%s", err, r.out.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("--mode all after a mixed copy of comp did not stop:\n%s", r.out.String())
	}
	// The fix, as printed.
	sandboxtest.MustExec(t, dst, "DROP TABLE "+schema+".comp")
	if _, err := dst.Exec("DELETE FROM sluice_meta.load_checkpoint WHERE task = ? AND tbl = ?", schema, "`"+schema+"`.`comp`"); err != nil {
		t.Fatal(err)
	}
	// A DDL before the reload's snapshot: the reloaded table is made with
	// it, so replication (from the first snapshot) must skip it there.
	sandboxtest.MustExec(t, src, "UPDATE "+schema+".comp SET v = 'again' WHERE a % 50 = 2", "UPDATE "+schema+".big SET k = k + 1 WHERE id % 100 = 0",
		"ALTER TABLE "+schema+".comp ADD COLUMN z INT NOT NULL DEFAULT 1")
	r = startAll(t, cfg)
	// (A skipped DDL commits nothing on the target, so the checkpoint
	// passes it only with the next transaction.)
	sandboxtest.MustExec(t, src, "DELETE FROM "+schema+".comp WHERE a = 7", "INSERT INTO "+schema+".nokey VALUES (1, 'after')")
	r.waitApplied(t, src, dst, schema)
	r.stop(t)
	sameTables(t, src, dst, schema, schema)
	checksums(t, src, dst, schema, "big", "comp", "nokey")
}
