package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestReadOnlyTargetIsWaitedFor: a target that turned read-only (SET
// GLOBAL read_only=1, as in a switchover) stopped the task for good. The
// applier now retries with backoff, says that the target is read-only,
// and resumes from its checkpoint once read_only is off again: every
// source change arrives once.
func TestReadOnlyTargetIsWaitedFor(t *testing.T) {
	src := sandboxtest.Start(t, "rosrc")
	dst := sandboxtest.Start(t, "rodst")
	sdb := sandboxtest.MustOpen(t, src, "")
	ddb := sandboxtest.MustOpen(t, dst, "")
	sandboxtest.MustExec(t, sdb, "CREATE DATABASE vsrc", "CREATE TABLE vsrc.t (id INT PRIMARY KEY, v INT)", "INSERT INTO vsrc.t VALUES (1, 1)")
	// read_only does not hold back SUPER (root): the target user is an
	// ordinary one, with the documented grants.
	sandboxtest.MustExec(t, ddb, "CREATE USER 'app'@'127.0.0.1' IDENTIFIED BY 'pw'",
		"GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, DROP, INDEX ON *.* TO 'app'@'127.0.0.1'")
	tep := dst.Endpoint()
	tep.User, tep.Password = "app", "pw"
	cfg := verifyTask(t, strings.Replace(verifyTaskYAML(src.Endpoint(), tep, "vsrc.*", "dir: "+t.TempDir()+"\n"), "name: vt", "name: ro", 1))
	r := startMigrateAll(cfg)
	defer r.stop()
	if !r.waitOutput("replicate ro: source") {
		t.Fatalf("migrate --mode all stopped: %v\n%s", r.err, r.out.String())
	}
	sandboxtest.MustExec(t, ddb, "SET GLOBAL read_only = 1")
	defer func() { _, _ = ddb.Exec("SET GLOBAL read_only = 0") }()
	for i := 2; i <= 20; i++ {
		sandboxtest.MustExec(t, sdb, fmt.Sprintf("INSERT INTO vsrc.t VALUES (%d, %d)", i, i), fmt.Sprintf("UPDATE vsrc.t SET v = v + 1 WHERE id = %d", i-1))
	}
	if !r.waitOutput("the target is read-only") {
		t.Fatalf("the task stopped instead of waiting for the read-only target: %v\n%s", r.err, r.out.String())
	}
	// A second retry proves the backoff goes on while read_only is on.
	for strings.Count(r.out.String(), "the target is read-only") < 2 {
		if r.exited() {
			t.Fatalf("the task stopped: %v\n%s", r.err, r.out.String())
		}
	}
	sandboxtest.MustExec(t, ddb, "SET GLOBAL read_only = 0")
	if !r.covered(t, ddb, "ro", binlogPos(t, sdb)) {
		t.Fatalf("the task did not resume once the target took writes: %v\n%s", r.err, r.out.String())
	}
	var s, d string
	q := "SELECT GROUP_CONCAT(id, ':', v ORDER BY id) FROM %s.t"
	if err := sdb.QueryRow(fmt.Sprintf(q, "vsrc")).Scan(&s); err != nil {
		t.Fatal(err)
	}
	if err := ddb.QueryRow(fmt.Sprintf(q, "vdst")).Scan(&d); err != nil {
		t.Fatal(err)
	}
	if s != d {
		t.Fatalf("target differs after the read-only spell:\n src %s\n dst %s", s, d)
	}
}
