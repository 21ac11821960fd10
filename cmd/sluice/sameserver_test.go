package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sandbox"
)

func sameServerYAML(inst *sandbox.Instance, name, include, routes, dir string) string {
	ep := inst.Endpoint()
	return fmt.Sprintf(`name: %s
source: {host: %s, port: %d, user: %s}
target: {host: %s, port: %d, user: %s}
tables:
  include: [%s]
%s
threads: 2
rows-per-chunk: 50
dir: %s
`, name, ep.Host, ep.Port, ep.User, ep.Host, ep.Port, ep.User, include, routes, dir)
}

func binlogPos(t *testing.T, db *sql.DB) string {
	t.Helper()
	var gtid string
	if err := db.QueryRow("SELECT @@gtid_binlog_pos").Scan(&gtid); err != nil {
		t.Fatal(err)
	}
	return gtid
}

// TestSameServerSameTablesRefused: a task whose target is its source with
// the same table names was refused with "empty or drop the target table"
// (the source's own table), and with an empty table --mode all replicated
// its own writes for thousands of transactions. Both are refused before
// anything is written, with a fix that never points at the table.
func TestSameServerSameTablesRefused(t *testing.T) {
	inst := sandboxtest.Start(t, "ssame")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE ss", "CREATE TABLE ss.full (id INT PRIMARY KEY, v INT)", "INSERT INTO ss.full VALUES (1, 1), (2, 2)",
		"CREATE TABLE ss.empty (id INT PRIMARY KEY, v INT)")
	for _, include := range []string{`"ss.*"`, `"ss.empty"`} {
		before := binlogPos(t, db)
		cfg := verifyTask(t, sameServerYAML(inst, "ssame", include, "", t.TempDir()))
		_, _, err := runCLI(t, "migrate", "--config", cfg, "--mode", "all")
		var se *sluice.Error
		if err == nil || !errors.As(err, &se) {
			t.Fatalf("include %s: migrate onto the source itself: %v", include, err)
		}
		if !strings.Contains(err.Error(), "the target is the source server") || !strings.Contains(err.Error(), "onto itself") {
			t.Errorf("include %s: the error does not say the target is the source: %v", include, err)
		}
		if strings.Contains(se.Hint, "empty or drop the target") {
			t.Errorf("include %s: the fix tells the user to empty or drop the source's table: %s", include, se.Hint)
		}
		if after := binlogPos(t, db); after != before {
			t.Errorf("include %s: the refused run wrote to the server: binlog %s -> %s", include, before, after)
		}
	}
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM ss.full").Scan(&n); err != nil || n != 2 {
		t.Fatalf("ss.full has %d rows (%v), want its 2", n, err)
	}
}

// TestSameServerRoutedReplicatesOnce: a route to another schema of the
// same server is a legitimate copy, but the task's own writes land in the
// binlog it reads. With the target schema selected too (include it, or
// *.*), they were replicated again for ever (11.5 MB of binlog in 28 s).
// The task's sessions mark their writes with its server id and its reader
// skips them: each change is applied once, the binlog stops growing when
// the source does, and the copy equals the source.
func TestSameServerRoutedReplicatesOnce(t *testing.T) {
	inst := sandboxtest.Start(t, "sroute")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE rsrc", "CREATE TABLE rsrc.t (id INT PRIMARY KEY, v INT)")
	for i := 0; i < 100; i++ {
		sandboxtest.MustExec(t, db, fmt.Sprintf("INSERT INTO rsrc.t VALUES (%d, %d)", i, i))
	}
	cfg := verifyTask(t, sameServerYAML(inst, "sroute", `"rsrc.*", "rdst.*"`, "routes:\n  - {schema: rsrc, target-schema: rdst}", t.TempDir()))
	r := startMigrateAll(cfg)
	defer r.stop()
	if !r.waitOutput("replicate sroute:") {
		t.Fatalf("migrate --mode all stopped: %v\n%s", r.err, r.out.String())
	}
	for i := 0; i < 60; i++ {
		switch i % 3 {
		case 0:
			sandboxtest.MustExec(t, db, fmt.Sprintf("INSERT INTO rsrc.t VALUES (%d, 0)", 1000+i))
		case 1:
			sandboxtest.MustExec(t, db, fmt.Sprintf("UPDATE rsrc.t SET v = v + 1 WHERE id = %d", i))
		case 2:
			sandboxtest.MustExec(t, db, fmt.Sprintf("DELETE FROM rsrc.t WHERE id = %d", i))
		}
	}
	sandboxtest.MustExec(t, db, "CREATE TABLE rsrc.later (id INT PRIMARY KEY)")
	// The task's own writes follow the source's in the binlog, so wait
	// for the checkpoint to cover the source's last transaction.
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var last string
	if _, err := conn.ExecContext(context.Background(), "INSERT INTO rsrc.later VALUES (1), (2)"); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRowContext(context.Background(), "SELECT @@last_gtid").Scan(&last); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if !r.covered(t, db, "sroute", last) {
		t.Fatalf("migrate --mode all stopped: %v\n%s", r.err, r.out.String())
	}
	// Caught up: nothing writes to the server any more, so its binlog
	// must stand still; a loop would keep it growing.
	var file1, file2 string
	var pos1, pos2 int64
	var x1, x2 sql.NullString
	if err := db.QueryRow("SHOW MASTER STATUS").Scan(&file1, &pos1, &x1, &x2); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if err := db.QueryRow("SHOW MASTER STATUS").Scan(&file2, &pos2, &x1, &x2); err != nil {
		t.Fatal(err)
	}
	if file1 != file2 || pos2 != pos1 {
		t.Errorf("the binlog grows with no source write: %s:%d -> %s:%d (the task replicates its own writes)\n%s", file1, pos1, file2, pos2, r.out.String())
	}
	if r.exited() {
		t.Fatalf("the task stopped: %v\n%s", r.err, r.out.String())
	}
	for _, tb := range []string{"t", "later"} {
		var src, dst string
		q := "SELECT COALESCE(GROUP_CONCAT(CONCAT_WS(':', id, %s) ORDER BY id), '') FROM %s." + tb
		v := "v"
		if tb == "later" {
			v = "id"
		}
		if err := db.QueryRow(fmt.Sprintf(q, v, "rsrc")).Scan(&src); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRow(fmt.Sprintf(q, v, "rdst")).Scan(&dst); err != nil {
			t.Fatalf("rdst.%s: %v\n%s", tb, err, r.out.String())
		}
		if src != dst {
			t.Errorf("rdst.%s differs from rsrc.%s:\n src %s\n dst %s", tb, tb, src, dst)
		}
	}
	if !strings.Contains(r.out.String(), "the target is the source") {
		t.Errorf("no line says the target is the source:\n%s", r.out.String())
	}
}

// covered waits until task's checkpoint on db covers gtid; false when the
// run ended first or after two minutes.
func (r *migrateRun) covered(t *testing.T, db *sql.DB, task, gtid string) bool {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !r.exited() && time.Now().Before(deadline) {
		var have string
		if db.QueryRow("SELECT gtid_set FROM sluice_meta.apply_checkpoint WHERE task = ? ORDER BY seq DESC LIMIT 1", task).Scan(&have) == nil && gtidAtLeast(have, gtid) {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}
