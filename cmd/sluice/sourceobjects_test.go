package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestSourceObjects (issue 29, N10, N11 and what the copy leaves out): a
// selected system-versioned table or sequence is refused by sluice check
// and before migrate creates anything (the copy skipped them without a
// word, and replication stopped on their changes); a table whose default
// takes a sequence's next value needs that sequence on the target (the
// copy failed with a misleading fix); views, triggers, routines and events
// are named by check and at the end of the copy.
func TestSourceObjects(t *testing.T) {
	srcInst, dstInst := sandboxtest.Start(t, "objsrc"), sandboxtest.Start(t, "objdst")
	src, dst := sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, "")
	sandboxtest.MustExec(t, src, "CREATE DATABASE osrc",
		"CREATE TABLE osrc.t (id INT PRIMARY KEY, v INT)", "INSERT INTO osrc.t VALUES (1, 1)",
		"CREATE TABLE osrc.vt (id INT PRIMARY KEY, v INT) WITH SYSTEM VERSIONING", "INSERT INTO osrc.vt VALUES (1, 1)",
		"CREATE SEQUENCE osrc.s1 START WITH 100 INCREMENT BY 5",
		"CREATE TABLE osrc.ts (id BIGINT PRIMARY KEY DEFAULT (NEXT VALUE FOR osrc.s1), v INT)", "INSERT INTO osrc.ts (v) VALUES (1), (2)",
		"CREATE VIEW osrc.v AS SELECT id FROM osrc.t",
		"CREATE TRIGGER osrc.tr BEFORE INSERT ON osrc.t FOR EACH ROW SET NEW.v = NEW.v + 1",
		"CREATE PROCEDURE osrc.p() SELECT 1",
		"CREATE EVENT osrc.e ON SCHEDULE EVERY 1 DAY DO SELECT 1")
	base := strings.NewReplacer("vsrc", "osrc", "vdst", "odst", "name: vt", "name: obj").Replace(
		verifyTaskYAML(srcInst.Endpoint(), dstInst.Endpoint(), "osrc.*", "dir: "+t.TempDir()+"\n"))
	task := func(exclude ...string) string {
		if len(exclude) == 0 {
			return verifyTask(t, base)
		}
		return verifyTask(t, strings.Replace(base, "tables:\n", fmt.Sprintf("tables:\n  exclude: [%s]\n", strings.Join(exclude, ", ")), 1))
	}
	refused := func(cfg, want string) {
		t.Helper()
		out, _, err := runCLI(t, "check", "--config", cfg, "--mode", "full")
		if !errors.Is(err, ErrChecksFailed) || !strings.Contains(out, "fail  refused tables") || !strings.Contains(out, want) || !strings.Contains(out, "(fix: ") {
			t.Fatalf("check: %v, want a failing 'refused tables' naming %q with a fix:\n%s", err, want, out)
		}
		for _, mode := range []string{"full", "all"} {
			_, _, err = runCLI(t, "migrate", "--config", cfg, "--mode", mode)
			if !errors.Is(err, ErrChecksFailed) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "(fix: ") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("migrate --mode %s: %v, want one line naming %q with a fix", mode, err, want)
			}
		}
		var n int
		if err := dst.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME IN ('odst', 'sluice_meta')").Scan(&n); err != nil || n != 0 {
			t.Fatalf("a refused run created %d schemas on the target (%v)", n, err)
		}
	}
	// sluice dump runs no checks: it says what it skipped.
	out, _, err := runCLI(t, "dump", "--config", task(), "--dir", t.TempDir())
	if want := "1 sequences (osrc.s1); 1 system-versioned tables (osrc.vt)"; err != nil || !strings.Contains(out, want) || !strings.Contains(out, "1 views (osrc.v)") {
		t.Fatalf("dump: %v, want the end of the run to name %q and the view:\n%s", err, want, out)
	}
	refused(task(), "system-versioned table: osrc.vt")
	refused(task("osrc.vt"), "no sequence: osrc.s1")
	refused(task("osrc.vt", "osrc.s1"), "column id of osrc.ts defaults to NEXT VALUE FOR osrc.s1, and the target has no sequence osrc.s1")

	// sluice load runs no checks either: its CREATE TABLE fails, and says why.
	cfg := task("osrc.vt", "osrc.s1")
	dir := t.TempDir()
	if out, _, err := runCLI(t, "dump", "--config", cfg, "--dir", dir); err != nil {
		t.Fatalf("dump: %v\n%s", err, out)
	}
	if _, _, err := runCLI(t, "load", "--config", cfg, "--dir", dir); err == nil || !strings.Contains(err.Error(), "sluice copies no sequence") || !strings.Contains(err.Error(), "osrc.ts") {
		t.Fatalf("load of a table whose default needs a sequence the target lacks: %v", err)
	}
	sandboxtest.MustExec(t, dst, "DROP DATABASE IF EXISTS odst", "DROP DATABASE IF EXISTS sluice_meta")

	// With the sequence made on the target by hand, the rest is copied, and
	// what is not is named.
	sandboxtest.MustExec(t, dst, "CREATE DATABASE osrc", "CREATE SEQUENCE osrc.s1 START WITH 1000")
	out, _, err = runCLI(t, "check", "--config", cfg, "--mode", "full")
	notCopied := "not copied: 1 views (osrc.v); 1 triggers (osrc.tr (on osrc.t)); 1 routines (osrc.p (procedure)); 1 events (osrc.e)"
	if err != nil || !strings.Contains(out, "pass  refused tables") || !strings.Contains(out, "warn  objects not copied") || !strings.Contains(out, notCopied) {
		t.Fatalf("check with the sequence on the target: %v, want a pass and the objects not copied (%s):\n%s", err, notCopied, out)
	}
	out, _, err = runCLI(t, "migrate", "--config", cfg, "--mode", "full")
	if err != nil || !strings.Contains(out, notCopied) {
		t.Fatalf("migrate --mode full: %v, want the end of the run to say %q:\n%s", err, notCopied, out)
	}
	var n int
	if err := dst.QueryRow("SELECT COUNT(*) FROM odst.ts WHERE id IN (100, 105)").Scan(&n); err != nil || n != 2 {
		t.Fatalf("odst.ts holds %d of the source's 2 rows (%v)", n, err)
	}
}
