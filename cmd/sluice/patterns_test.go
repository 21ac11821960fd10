package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestPatternWithoutSelectIsAPrivilegeError: the server hides tables a user
// may not read, so a source user without SELECT saw "no table matches".
// The copy now names the missing privilege, before copying anything.
func TestPatternWithoutSelectIsAPrivilegeError(t *testing.T) {
	inst := sandboxtest.Start(t, "psel")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE psrc", "CREATE TABLE psrc.t (id INT PRIMARY KEY)", "INSERT INTO psrc.t VALUES (1)",
		"CREATE DATABASE other", "CREATE TABLE other.t (id INT PRIMARY KEY)",
		"CREATE USER 'nosel'@'127.0.0.1' IDENTIFIED BY 'pw'",
		"GRANT RELOAD, REPLICATION CLIENT, REPLICATION SLAVE ON *.* TO 'nosel'@'127.0.0.1'",
		"GRANT SELECT ON other.* TO 'nosel'@'127.0.0.1'")
	src := inst.Endpoint()
	src.User, src.Password = "nosel", "pw"
	cfg := verifyTask(t, strings.NewReplacer("vsrc", "psrc", "vdst", "pdst", "name: vt", "name: psel").Replace(
		verifyTaskYAML(src, inst.Endpoint(), "psrc.*", "dir: "+t.TempDir()+"\n")))
	_, _, err := runCLI(t, "migrate", "--config", cfg, "--mode", "full")
	var se *sluice.Error
	if !errors.Is(err, sluice.ErrPrivilege) || !errors.As(err, &se) || !strings.Contains(err.Error(), `no SELECT privilege on "psrc"`) || !strings.Contains(se.Hint, "GRANT SELECT ON `psrc`.*") {
		t.Fatalf("want a privilege error naming psrc and the GRANT, got %v", err)
	}
	// With SELECT, the same pattern matches.
	sandboxtest.MustExec(t, db, "GRANT SELECT ON psrc.* TO 'nosel'@'127.0.0.1'")
	if _, _, err := runCLI(t, "migrate", "--config", cfg, "--mode", "full"); err != nil {
		t.Fatalf("with SELECT granted: %v", err)
	}
}

// TestPatternForTablesCreatedLater: --mode all takes an include pattern
// that matches no table yet with a warning, and replicates the tables from
// their CREATE when they come; a copy alone (--mode full) still refuses it.
func TestPatternForTablesCreatedLater(t *testing.T) {
	inst := sandboxtest.Start(t, "plater")
	db := sandboxtest.MustOpen(t, inst, "")
	ep := inst.Endpoint()
	cfg := verifyTask(t, strings.NewReplacer("vsrc", "later", "vdst", "ldst", "name: vt", "name: plater").Replace(
		verifyTaskYAML(ep, ep, "later.*", "dir: "+t.TempDir()+"\n")))
	if _, _, err := runCLI(t, "migrate", "--config", cfg, "--mode", "full"); !errors.Is(err, sluice.ErrUnknownTable) {
		t.Fatalf("--mode full with a pattern that matches nothing: %v", err)
	}
	r := startMigrateAll(cfg)
	defer r.stop()
	if !r.waitOutput("replicate plater:") {
		t.Fatalf("migrate --mode all stopped: %v\n%s", r.err, r.out.String())
	}
	if !strings.Contains(r.out.String(), `warning: tables.include pattern "later.*" matches no table on the source yet`) {
		t.Errorf("no warning for the pattern:\n%s", r.out.String())
	}
	sandboxtest.MustExec(t, db, "CREATE DATABASE later", "CREATE TABLE later.t (id INT PRIMARY KEY, v VARCHAR(8))",
		"INSERT INTO later.t VALUES (1, 'a'), (2, 'b')", "UPDATE later.t SET v = 'c' WHERE id = 2")
	if !r.caughtUp(t, db, "plater") {
		t.Fatalf("migrate --mode all stopped: %v\n%s", r.err, r.out.String())
	}
	r.stop()
	var got string
	if err := db.QueryRow("SELECT GROUP_CONCAT(id, v ORDER BY id) FROM ldst.t").Scan(&got); err != nil || got != "1a,2c" {
		t.Fatalf("ldst.t holds %q (%v), want 1a,2c\n%s", got, err, r.out.String())
	}
}
