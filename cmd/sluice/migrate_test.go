package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestMigrateRerunAfterDDL reruns a copy that was stopped with one table
// partly loaded, after a DDL on it (difftest seeds 1104, 1108: with the
// DDL after the rerun's snapshot, the snapshot read "Unknown column"). The
// rest of the table cannot be loaded into its old definition: the rerun
// loads it again whole in the new one, and keeps a table that is complete.
func TestMigrateRerunAfterDDL(t *testing.T) {
	inst := sandboxtest.Start(t, "mddl")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE msrc",
		"CREATE TABLE msrc.a (id INT PRIMARY KEY, c1 INT, c2 VARCHAR(10))",
		"INSERT INTO msrc.a SELECT seq, seq, 'x' FROM msrc.seq_1_to_300",
		"CREATE TABLE msrc.b (id INT PRIMARY KEY, c1 INT)",
		"INSERT INTO msrc.b SELECT seq, seq FROM msrc.seq_1_to_20")
	ep := inst.Endpoint()
	cfgPath := verifyTask(t, strings.NewReplacer("vsrc", "msrc", "vdst", "mdst", "name: vt", "name: mt", "threads: 2", "threads: 1\npool-size: 1").Replace(verifyTaskYAML(ep, ep, "msrc.*", "")))
	migrate := func(ctx context.Context, args ...string) (string, error) {
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(io.Discard)
		root.SetArgs(append([]string{"migrate", "--config", cfgPath, "--mode", "full", "--commit-unit", "chunk"}, args...))
		err := root.ExecuteContext(ctx)
		return out.String(), err
	}
	chunks := func(tbl string) int {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM sluice_meta.load_checkpoint WHERE task = 'mt' AND tbl = ?", "`mdst`.`"+tbl+"`").Scan(&n); err != nil {
			return 0
		}
		return n
	}

	// The first run stops once a chunk of a is loaded (one connection
	// each way, chunks 300 ms apart: a's first chunk, then b's only one,
	// then a's second).
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for chunks("a") < 2 || chunks("b") < 1 {
			if ctx.Err() != nil {
				return
			}
		}
		cancel()
	}()
	out, err := migrate(ctx, "--chunk-delay", "300ms")
	cancel()
	<-stopped
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("first run: %v\n%s", err, out)
	}
	if n := chunks("a"); n == 0 || n >= 6 || chunks("b") != 1 {
		t.Fatalf("the first run loaded %d of a's 6 chunks and %d of b's 1, want some of a and all of b\n%s", n, chunks("b"), out)
	}
	sandboxtest.MustExec(t, db, "ALTER TABLE msrc.a DROP COLUMN c2, ADD COLUMN c3 INT DEFAULT 3", "ALTER TABLE msrc.b ADD COLUMN c2 INT DEFAULT 2",
		"UPDATE msrc.a SET c3 = id")
	out, err = migrate(context.Background())
	if err != nil {
		t.Fatalf("rerun: %v\n%s", err, out)
	}
	if !strings.Contains(out, "msrc.a is loaded again whole (a DDL on the source changed it") && !strings.Contains(out, "mdst.a is loaded again whole (a DDL on the source changed it") {
		t.Fatalf("the rerun does not say that it loads a again:\n%s", out)
	}
	var cols int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'mdst' AND TABLE_NAME = 'b'").Scan(&cols); err != nil || cols != 2 {
		t.Errorf("mdst.b has %d columns (%v), want the 2 it was copied with", cols, err)
	}
	var n string
	var srcSum, dstSum int64
	if err := db.QueryRow("CHECKSUM TABLE msrc.a EXTENDED").Scan(&n, &srcSum); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("CHECKSUM TABLE mdst.a EXTENDED").Scan(&n, &dstSum); err != nil {
		t.Fatal(err)
	}
	if srcSum != dstSum {
		t.Errorf("checksum of msrc.a %d, of mdst.a %d\n%s", srcSum, dstSum, out)
	}
}

// TestMigrateDDLWaitsForSnapshot runs a DDL on a table while the dump
// copies it. A snapshot read cannot see a DDL, so the DDL must wait for
// the dump; but a dump session that asked for the table's lock after the
// DDL queued behind it, while the DDL waited for the dump's other session:
// a wait no deadlock detector sees, which stalled the copy and the
// source's writers of the table until the DDL gave up (difftest: 30-60 s
// source stalls). Both must finish, the DDL right after the dump.
func TestMigrateDDLWaitsForSnapshot(t *testing.T) {
	inst := sandboxtest.Start(t, "mwait")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE wsrc",
		"CREATE TABLE wsrc.a (id INT PRIMARY KEY, c1 INT, c2 VARCHAR(10))",
		"INSERT INTO wsrc.a SELECT seq, seq, 'x' FROM wsrc.seq_1_to_1000",
		"CREATE TABLE wsrc.k (c1 INT, c2 VARCHAR(10))",
		"INSERT INTO wsrc.k SELECT seq, 'k' FROM wsrc.seq_1_to_1000")
	ep := inst.Endpoint()
	cfgPath := verifyTask(t, strings.NewReplacer("vsrc", "wsrc", "vdst", "wdst", "name: vt", "name: wt").Replace(verifyTaskYAML(ep, ep, "wsrc.*", "")))

	var ddl <-chan error
	afterPrepare = func() {
		ddl = asyncDDL(t, db, "ALTER TABLE wsrc.k ADD COLUMN c3 INT DEFAULT 3")
	}
	defer func() { afterPrepare = nil }()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(io.Discard)
	root.SetArgs([]string{"migrate", "--config", cfgPath, "--mode", "full"})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out.String())
	}
	if err := <-ddl; err != nil {
		t.Fatalf("the DDL did not run after the dump: %v\n%s", err, out.String())
	}
	for _, tb := range []string{"a", "k"} {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM wdst." + tb).Scan(&n); err != nil || n != 1000 {
			t.Errorf("wdst.%s holds %d rows (%v), want 1000", tb, n, err)
		}
	}
}

// TestMigrateAllDDLAfterSnapshot reruns --mode all after a first run that
// stopped before it loaded a chunk, with DDL on a keyless table in between
// (difftest seeds 1102, 1112, 1113). The table is made again from the
// second snapshot, and replication, which starts at the first, must skip
// its changes up to the second (the DDL among them) and apply the rest.
func TestMigrateAllDDLAfterSnapshot(t *testing.T) {
	inst := sandboxtest.Start(t, "mall")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE asrc",
		"CREATE TABLE asrc.t (id INT PRIMARY KEY, c1 INT)",
		"INSERT INTO asrc.t SELECT seq, seq FROM asrc.seq_1_to_300",
		"CREATE TABLE asrc.k (a INT, b INT, c VARCHAR(10))",
		"INSERT INTO asrc.k SELECT seq, seq, 'k' FROM asrc.seq_1_to_20")
	ep := inst.Endpoint()
	cfgPath := verifyTask(t, strings.NewReplacer("vsrc", "asrc", "vdst", "adst", "name: vt", "name: at").Replace(
		verifyTaskYAML(ep, ep, "asrc.*", "dir: "+t.TempDir()+"\n")))

	// The first run stops before it loads a chunk.
	ctx1, cancel1 := context.WithCancel(context.Background())
	afterPrepare = cancel1
	defer func() { afterPrepare = nil }()
	root := newRoot()
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	root.SetArgs([]string{"migrate", "--config", cfgPath, "--mode", "all"})
	if err := root.ExecuteContext(ctx1); err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("first run: %v", err)
	}
	afterPrepare = nil
	sandboxtest.MustExec(t, db, "UPDATE asrc.k SET a = a + 100 WHERE a <= 5", "UPDATE asrc.t SET c1 = -c1 WHERE id <= 5",
		"ALTER TABLE asrc.k DROP COLUMN c",
		"UPDATE asrc.k SET a = a + 1000 WHERE a <= 10", "UPDATE asrc.t SET c1 = -c1 WHERE id <= 10")

	r := startMigrateAll(cfgPath)
	defer r.stop()
	// The target catches up with the source as of the copy's end (the
	// summary's "snapshot position" line) and after it.
	if !r.waitOutput("snapshot position:") {
		t.Fatalf("migrate --mode all stopped: %v\n%s", r.err, r.out.String())
	}
	sandboxtest.MustExec(t, db, "INSERT INTO asrc.k VALUES (7, 7)", "DELETE FROM asrc.t WHERE id = 300", "UPDATE asrc.k SET b = -b WHERE a = 7")
	if !r.caughtUp(t, db, "at") {
		t.Fatalf("migrate --mode all stopped: %v\n%s", r.err, r.out.String())
	}
	r.stop()
	for _, tb := range []string{"t", "k"} {
		var n string
		var srcSum, dstSum int64
		if err := db.QueryRow("CHECKSUM TABLE asrc."+tb+" EXTENDED").Scan(&n, &srcSum); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRow("CHECKSUM TABLE adst."+tb+" EXTENDED").Scan(&n, &dstSum); err != nil {
			t.Fatal(err)
		}
		if srcSum != dstSum {
			t.Errorf("checksum of asrc.%s %d, of adst.%s %d", tb, srcSum, tb, dstSum)
		}
	}
	if t.Failed() {
		t.Log(r.out.String())
	}
}

// asyncDDL runs stmts in order on a connection of its own, and returns once
// the first one waits for a metadata lock (the dump holds every table it
// copies from its snapshot on). The channel gets the first error, or nil.
func asyncDDL(t *testing.T, db *sql.DB, stmts ...string) <-chan error {
	t.Helper()
	res := make(chan error, 1)
	go func() {
		c, err := db.Conn(context.Background())
		if err != nil {
			res <- err
			return
		}
		defer c.Close()
		// Bounded so that a dump that waits too makes the test fail, not
		// hang.
		for _, q := range append([]string{"SET SESSION lock_wait_timeout = 120"}, stmts...) {
			if _, err := c.ExecContext(context.Background(), q); err != nil {
				res <- fmt.Errorf("%s: %w", q, err)
				return
			}
		}
		res <- nil
	}()
	for {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'Waiting for table metadata lock' AND INFO = ?", stmts[0]).Scan(&n); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-res:
			t.Fatalf("the DDL did not wait for the dump: %v", err)
		default:
		}
		if n > 0 {
			return res
		}
	}
}

// gtidAtLeast reports whether MariaDB GTID position have includes want.
func gtidAtLeast(have, want string) bool {
	seqs := func(s string) map[string]uint64 {
		m := map[string]uint64{}
		for _, g := range strings.Split(s, ",") {
			var d, srv, n uint64
			if _, err := fmt.Sscanf(strings.TrimSpace(g), "%d-%d-%d", &d, &srv, &n); err == nil {
				m[fmt.Sprint(d)] = n
			}
		}
		return m
	}
	h := seqs(have)
	for d, n := range seqs(want) {
		if h[d] < n {
			return false
		}
	}
	return true
}

// syncBuf is written by one goroutine while another reads it.
type syncBuf = sandboxtest.SyncBuffer

// migrateRun is `sluice migrate --mode all` running in this process, for
// the tests that drive the source while it replicates.
type migrateRun struct {
	out    syncBuf
	done   chan error
	cancel context.CancelFunc
	ended  bool
	err    error
}

// startMigrateAll starts migrate --mode all on the task file cfg.
func startMigrateAll(cfg string) *migrateRun {
	ctx, cancel := context.WithCancel(context.Background())
	r := &migrateRun{done: make(chan error, 1), cancel: cancel}
	go func() {
		root := newRoot()
		root.SetOut(&r.out)
		root.SetErr(io.Discard)
		root.SetArgs([]string{"migrate", "--config", cfg, "--mode", "all"})
		r.done <- root.ExecuteContext(ctx)
	}()
	return r
}

// exited reports, without waiting, whether the run has ended.
func (r *migrateRun) exited() bool {
	if r.ended {
		return true
	}
	select {
	case r.err = <-r.done:
		r.ended = true
	default:
	}
	return r.ended
}

// waitOutput waits until the output holds s; false when the run ended first.
func (r *migrateRun) waitOutput(s string) bool {
	for !strings.Contains(r.out.String(), s) {
		if r.exited() {
			return false
		}
	}
	return true
}

// caughtUp waits until task's checkpoint on db covers the source's
// gtid_binlog_pos as of now; false when the run ended first.
func (r *migrateRun) caughtUp(t *testing.T, db *sql.DB, task string) bool {
	t.Helper()
	var gtid string
	if err := db.QueryRow("SELECT @@gtid_binlog_pos").Scan(&gtid); err != nil {
		t.Fatal(err)
	}
	for {
		if r.exited() {
			return false
		}
		var have string
		if db.QueryRow("SELECT gtid_set FROM sluice_meta.apply_checkpoint WHERE task = ? ORDER BY seq DESC LIMIT 1", task).Scan(&have) == nil && gtidAtLeast(have, gtid) {
			return true
		}
	}
}

// stop ends the run (a clean stop) and returns how it ended.
func (r *migrateRun) stop() error {
	r.cancel()
	if !r.ended {
		r.err, r.ended = <-r.done, true
	}
	return r.err
}
