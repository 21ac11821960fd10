package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestCheckBeforeCopy: sluice check lists each check with pass, warn or
// fail (exit 0, or 1 on a failure), and migrate --mode all runs the same
// checks first: with binlog_format=STATEMENT it is refused at once, with
// the fix, and nothing is created on the target (issue 16: the whole copy
// ran first, and only replication found the format).
func TestCheckBeforeCopy(t *testing.T) {
	inst := sandboxtest.Start(t, "chk")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE csrc", "CREATE TABLE csrc.t (id INT PRIMARY KEY)", "CREATE TABLE csrc.nokey (a INT)",
		"INSERT INTO csrc.t VALUES (1)")
	ep := inst.Endpoint()
	cfg := verifyTask(t, strings.NewReplacer("vsrc", "csrc", "vdst", "cdst", "name: vt", "name: chk").Replace(
		verifyTaskYAML(ep, ep, "csrc.*", "dir: "+t.TempDir()+"\n")))

	out, _, err := runCLI(t, "check", "--config", cfg)
	if err != nil {
		t.Fatalf("check on a good source: %v\n%s", err, out)
	}
	for _, want := range []string{"pass  source connection", "pass  binlog and replication", "warn  table keys", "csrc.nokey", "pass  target flavour             MariaDB 10.11", "pass  target writable", "pass  server-id"} {
		if !strings.Contains(out, want) {
			t.Errorf("check output lacks %q:\n%s", want, out)
		}
	}

	sandboxtest.MustExec(t, db, "SET GLOBAL binlog_format = 'STATEMENT'")
	defer db.Exec("SET GLOBAL binlog_format = 'ROW'") //nolint:errcheck // the sandbox goes anyway
	out, _, err = runCLI(t, "check", "--config", cfg)
	if !errors.Is(err, ErrChecksFailed) || exitCode(err) != 1 || !strings.Contains(out, "fail  binlog and replication") || !strings.Contains(out, "binlog_format is STATEMENT") {
		t.Fatalf("check with binlog_format=STATEMENT: %v (exit %d)\n%s", err, exitCode(err), out)
	}
	_, _, err = runCLI(t, "migrate", "--config", cfg, "--mode", "all")
	if !errors.Is(err, ErrChecksFailed) || exitCode(err) != 2 || !strings.Contains(err.Error(), "binlog_format is STATEMENT") || !strings.Contains(err.Error(), "(fix: ") {
		t.Fatalf("migrate --mode all with binlog_format=STATEMENT: %v", err)
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME IN ('cdst', 'sluice_meta')").Scan(&n); err != nil || n != 0 {
		t.Fatalf("the refused run created %d schemas on the target (%v)", n, err)
	}
}

// TestCheckWithDocumentedGrants: with exactly the documented grants
// (docs/manual/taskfile.md, Privileges), check
// passes the target and finds the keyed table keyed (issue 30: every run
// warned of "no primary key" because MariaDB shows TABLE_CONSTRAINTS only
// past SELECT), and without INDEX on the target it fails, naming INDEX (a
// source's CREATE INDEX replays as CREATE INDEX, which ALTER does not cover).
func TestCheckWithDocumentedGrants(t *testing.T) {
	inst := sandboxtest.Start(t, "chkg")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE gsrc", "CREATE TABLE gsrc.t (id INT PRIMARY KEY)", "CREATE TABLE gsrc.u (a INT NOT NULL, UNIQUE KEY (a))",
		"CREATE TABLE gsrc.nokey (a INT)",
		"CREATE USER gs@'%' IDENTIFIED BY 'gspw'", "GRANT SELECT, RELOAD, LOCK TABLES, BINLOG MONITOR, REPLICATION SLAVE ON *.* TO gs@'%'",
		"CREATE USER gt@'%' IDENTIFIED BY 'gtpw'",
		"GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, DROP ON gdst.* TO gt@'%'",
		"GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, DROP ON sluice_meta.* TO gt@'%'")
	src, dst := inst.Endpoint(), inst.Endpoint()
	src.User, src.Password, dst.User, dst.Password = "gs", "gspw", "gt", "gtpw"
	cfg := verifyTask(t, strings.NewReplacer("vsrc", "gsrc", "vdst", "gdst", "name: vt", "name: chkg").Replace(
		verifyTaskYAML(src, dst, "gsrc.*", "dir: "+t.TempDir()+"\n")))
	out, _, err := runCLI(t, "check", "--config", cfg)
	if err == nil || !strings.Contains(out, "fail  target writable") || !strings.Contains(out, "no INDEX privilege") {
		t.Errorf("check without INDEX on the target: %v\n%s", err, out)
	}
	// The target is the source server here: replication marks its own
	// writes, which takes BINLOG REPLAY (README, sameserver.go).
	if !strings.Contains(out, "fail  target is not the source") || !strings.Contains(out, "GRANT BINLOG REPLAY") {
		t.Errorf("check on the same server without BINLOG REPLAY:\n%s", out)
	}
	sandboxtest.MustExec(t, db, "GRANT INDEX ON gdst.* TO gt@'%'", "GRANT INDEX ON sluice_meta.* TO gt@'%'", "GRANT BINLOG REPLAY ON *.* TO gt@'%'")
	out, _, err = runCLI(t, "check", "--config", cfg)
	if err != nil {
		t.Fatalf("check with the documented grants: %v\n%s", err, out)
	}
	if !strings.Contains(out, "warn  table keys                 1 of 3 tables") || !strings.Contains(out, "gsrc.nokey") || !strings.Contains(out, "pass  target writable") {
		t.Errorf("check with the documented grants:\n%s", out)
	}
}

// TestRefusedCopyCreatesNothing: a target table that the copy would refuse
// (another definition, or rows this task did not load) is refused before
// anything is created on the target: no sluice_meta, no other table.
func TestRefusedCopyCreatesNothing(t *testing.T) {
	inst := sandboxtest.Start(t, "refuse")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE rsrc", "CREATE TABLE rsrc.a (id INT PRIMARY KEY)", "CREATE TABLE rsrc.b (id INT PRIMARY KEY, v INT)",
		"CREATE DATABASE rdst", "CREATE TABLE rdst.b (id INT PRIMARY KEY, v VARCHAR(3))")
	ep := inst.Endpoint()
	cfg := verifyTask(t, strings.NewReplacer("vsrc", "rsrc", "vdst", "rdst", "name: vt", "name: rf").Replace(
		verifyTaskYAML(ep, ep, "rsrc.*", "dir: "+t.TempDir()+"\n")))
	for _, mode := range []string{"full", "all"} {
		_, _, err := runCLI(t, "migrate", "--config", cfg, "--mode", mode)
		if !errors.Is(err, ErrChecksFailed) || !strings.Contains(err.Error(), "rdst.b") || !strings.Contains(err.Error(), "(fix: ") {
			t.Fatalf("--mode %s with a target table of another definition: %v", mode, err)
		}
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA IN ('sluice_meta', 'rdst') AND TABLE_NAME <> 'b'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("the refused runs created %d tables on the target (%v)", n, err)
	}
	sandboxtest.MustExec(t, db, "DROP TABLE rdst.b", "CREATE TABLE rdst.b (id INT PRIMARY KEY, v INT)", "INSERT INTO rdst.b VALUES (1, 1)")
	if _, _, err := runCLI(t, "migrate", "--config", cfg, "--mode", "full"); !errors.Is(err, ErrChecksFailed) || !strings.Contains(err.Error(), "already holds rows") {
		t.Fatalf("a target table with rows: %v", err)
	}
	sandboxtest.MustExec(t, db, "DELETE FROM rdst.b")
	if _, _, err := runCLI(t, "migrate", "--config", cfg, "--mode", "full"); err != nil {
		t.Fatalf("an empty target table of the same definition: %v", err)
	}
}

// TestRefusedReplicationCreatesNothing: a replication run refused before it
// starts (no start position, a binlog file the source does not have)
// leaves no sluice_meta behind on the target (issue 16: reading the
// checkpoint created the checkpoint tables first).
func TestRefusedReplicationCreatesNothing(t *testing.T) {
	inst := sandboxtest.Start(t, "refrepl")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE isrc", "CREATE TABLE isrc.a (id INT PRIMARY KEY)")
	ep := inst.Endpoint()
	base := strings.NewReplacer("vsrc", "isrc", "vdst", "idst", "name: vt", "name: rr").Replace(
		verifyTaskYAML(ep, ep, "isrc.*", "dir: "+t.TempDir()+"\n"))
	for _, c := range []struct{ extra, want string }{
		{"", "no start position"},
		{"incremental: {binlog-file: mysql-bin.999999, binlog-pos: 4}\n", "mysql-bin.999999"},
	} {
		cfg := verifyTask(t, base+c.extra)
		_, _, err := runCLI(t, "migrate", "--config", cfg, "--mode", "incremental")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "(fix: ") {
			t.Fatalf("migrate --mode incremental with %q: %v", c.extra, err)
		}
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME IN ('idst', 'sluice_meta')").Scan(&n); err != nil || n != 0 {
			t.Fatalf("the refused run (%q) created %d schemas on the target (%v)", c.extra, n, err)
		}
	}
}
