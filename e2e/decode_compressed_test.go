package e2e_test

import (
	"strings"
	"testing"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestCompressedColumnsRefused: MariaDB's COMPRESSED columns are written
// to the binlog in a format go-mysql cannot read (types 140 and 141; the
// table map's metadata is then misread). Before the fix the task stopped
// with go-mysql's bare "unsupport type" error, naming neither the table nor
// a fix. Now a DDL that makes one on a replicated table stops the task
// before it runs on the target, and a row of such a table (made before the
// task's start) stops it at its table map, each naming the table and
// column; a compressed column outside the task's schemas changes nothing.
func TestCompressedColumnsRefused(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	execConn(t, src, "DROP DATABASE IF EXISTS cz", "DROP DATABASE IF EXISTS czout", "CREATE DATABASE cz", "CREATE DATABASE czout",
		"CREATE TABLE cz.early (id INT PRIMARY KEY, v VARCHAR(100) COMPRESSED)")
	execConn(t, dst, "DROP DATABASE IF EXISTS cz", "CREATE DATABASE cz", "CREATE TABLE cz.early (id INT PRIMARY KEY, v VARCHAR(100) COMPRESSED)")

	// A row of a table that has one.
	start := masterStatus(t, src)
	r := startTask(t, "czrow", start, "cz")
	execConn(t, src, "USE czout", "CREATE TABLE t (id INT PRIMARY KEY, b BLOB COMPRESSED)", "INSERT INTO t VALUES (1, 'x')",
		"INSERT INTO cz.early VALUES (1, 'hello')")
	err := r.waitStopped(t)
	if msg := err.Error(); !strings.Contains(msg, "`cz`.`early`") || !strings.Contains(msg, "COMPRESSED") || !strings.Contains(msg, "(fix: ") || !strings.Contains(msg, "column 2 (v)") {
		t.Fatalf("a row of a table with a COMPRESSED column: %v", err)
	}

	// A DDL that makes one.
	start = masterStatus(t, src)
	r = startTask(t, "czddl", start, "cz")
	execConn(t, src, "USE czout", "ALTER TABLE t ADD COLUMN c TEXT COMPRESSED", "CREATE TABLE cz.rf (id INT PRIMARY KEY) ROW_FORMAT=COMPRESSED",
		"CREATE TABLE cz.late (id INT PRIMARY KEY, b BLOB /*M!100301 COMPRESSED*/)")
	err = r.waitStopped(t)
	if msg := err.Error(); !strings.Contains(msg, "cz.late") || !strings.Contains(msg, "COMPRESSED") || !strings.Contains(msg, "(fix: ") {
		t.Fatalf("a DDL that makes a COMPRESSED column: %v", err)
	}
	var n int
	if err := dst.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'cz' AND TABLE_NAME = 'late'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("the refused DDL ran on the target (%d, %v)", n, err)
	}
	if err := dst.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'cz' AND TABLE_NAME = 'rf'").Scan(&n); err != nil || n != 1 {
		t.Fatalf("ROW_FORMAT=COMPRESSED (not a compressed column) did not reach the target (%d, %v)", n, err)
	}
}
