package main

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestSkipAndReplace: a task stopped at a DDL it refuses goes on with
// sluice replace (the given DDL instead, on the target and in the tracker);
// a task stopped at a transaction it cannot apply goes on with sluice skip
// (issue 16: the only way out was editing sluice_meta by hand). status
// shows both. The refusals are real: an IGNORED index (not parsed) and an
// UPDATE of a row deleted on the target by hand.
func TestSkipAndReplace(t *testing.T) {
	inst := sandboxtest.Start(t, "hskip")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE hsrc", "CREATE TABLE hsrc.t (id INT PRIMARY KEY, v INT)",
		"INSERT INTO hsrc.t SELECT seq, seq FROM hsrc.seq_1_to_20")
	ep := inst.Endpoint()
	cfg := verifyTask(t, strings.NewReplacer("vsrc", "hsrc", "vdst", "hdst", "name: vt", "name: hs").Replace(
		verifyTaskYAML(ep, ep, "hsrc.*", "dir: "+t.TempDir()+"\n")))

	// run starts migrate --mode all, runs stmts once replication runs, and
	// returns how the task ended (nil: stopped by the test once caught up).
	run := func(stmts ...string) (string, error) {
		r := startMigrateAll(cfg)
		defer r.stop()
		if !r.waitOutput("replicate hs:") {
			return r.out.String(), r.err
		}
		sandboxtest.MustExec(t, db, stmts...)
		if !r.caughtUp(t, db, "hs") {
			return r.out.String(), r.err
		}
		return r.out.String(), r.stop()
	}

	out, err := run("ALTER TABLE hsrc.t ADD INDEX ix (v) IGNORED", "INSERT INTO hsrc.t VALUES (100, 100)")
	m := regexp.MustCompile(`replicate DDL at (\S+:\d+)`).FindStringSubmatch(fmt0(err))
	if !errors.Is(err, sluice.ErrUnsupportedDDL) || m == nil {
		t.Fatalf("want the task stopped at the IGNORED index, got %v\n%s", err, out)
	}
	// A position the task did not stop at, and SQL the tracker cannot
	// read, are refused before anything is recorded (issue 30).
	if _, _, err := runCLI(t, "replace", "--config", cfg, "--position", "mysql-bin.000001:4", "--sql", "ALTER TABLE hsrc.t ADD INDEX ix (v)"); err == nil || !strings.Contains(err.Error(), "does not name mysql-bin.000001:4") {
		t.Errorf("replace at a position the task did not stop at: %v", err)
	}
	if _, _, err := runCLI(t, "replace", "--config", cfg, "--position", m[1], "--sql", "ALTER TABLE hsrc.t ADD INDEXX ix (v)"); err == nil || !strings.Contains(err.Error(), "--sql does not parse") {
		t.Errorf("replace with SQL that does not parse: %v", err)
	}
	if _, _, err := runCLI(t, "replace", "--config", cfg, "--position", m[1], "--sql", "ALTER TABLE hsrc.t ADD INDEX ix (v)"); err != nil {
		t.Fatal(err)
	}
	sandboxtest.MustExec(t, db, "DELETE FROM hdst.t WHERE id = 1")
	out, err = run("UPDATE hsrc.t SET v = -1 WHERE id = 1", "INSERT INTO hsrc.t VALUES (101, 101)")
	g := regexp.MustCompile(`source transaction (\d+-\d+-\d+)`).FindStringSubmatch(fmt0(err))
	if err == nil || g == nil || !strings.Contains(err.Error(), "row missing") {
		t.Fatalf("want the task stopped at the UPDATE of the missing row, got %v\n%s", err, out)
	}
	if _, _, err := runCLI(t, "skip", "--config", cfg, "--gtid", g[1]); err != nil {
		t.Fatal(err)
	}
	if out, err := run("INSERT INTO hsrc.t VALUES (102, 102)"); err != nil {
		t.Fatalf("after skip: %v\n%s", err, out)
	}

	var ix int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = 'hdst' AND TABLE_NAME = 't' AND INDEX_NAME = 'ix'").Scan(&ix); err != nil || ix != 1 {
		t.Errorf("the replacement index is not on the target: %d %v", ix, err)
	}
	var got string
	if err := db.QueryRow("SELECT GROUP_CONCAT(id ORDER BY id) FROM hdst.t WHERE id = 1 OR id >= 100").Scan(&got); err != nil || got != "100,101,102" {
		t.Errorf("target rows %q (%v), want 100,101,102 (row 1 stays deleted: its UPDATE was skipped)", got, err)
	}
	st, _, _ := runCLI(t, "status", "--config", cfg)
	if !strings.Contains(st, "handled:     replace position "+m[1]) || !strings.Contains(st, "handled:     skip GTID "+g[1]+" (done ") {
		t.Errorf("status does not show what was handled:\n%s", st)
	}
}

func fmt0(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
