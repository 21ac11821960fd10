package load_test

import (
	"testing"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestCopiesRowsWrittenWithoutCheckConstraints copies a table whose rows
// violate its CHECK constraints: they were written under
// check_constraint_checks=0. The source holds them, and a native copy
// (a replica, or a reload of mariadb-dump's output) writes them without
// checking them again, so the full copy must load them too, on both load
// paths, instead of stopping with 4025 (issue 29, N13 on the copy side).
func TestCopiesRowsWrittenWithoutCheckConstraints(t *testing.T) {
	src, dst := sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, "")
	sandboxtest.MustExec(t, src,
		"DROP DATABASE IF EXISTS ck_off", "CREATE DATABASE ck_off",
		"CREATE TABLE ck_off.t (id INT PRIMARY KEY, a INT CHECK (a > 0), b VARCHAR(10), CONSTRAINT b_short CHECK (CHAR_LENGTH(b) < 3))",
		"INSERT INTO ck_off.t SELECT seq, seq, 'ok' FROM ck_off.seq_1_to_2000")
	// check_constraint_checks is a session variable: one connection.
	conn := sandboxtest.MustOpen(t, srcInst, "")
	conn.SetMaxOpenConns(1)
	sandboxtest.MustExec(t, conn,
		"SET SESSION check_constraint_checks=0",
		"INSERT INTO ck_off.t VALUES (3001, -1, 'ok'), (3002, 5, 'too long'), (3003, 0, NULL)",
		"UPDATE ck_off.t SET a = -a WHERE id % 100 = 0")
	for _, c := range []struct{ name, extra string }{
		{"loaddata", ""},
		{"insert", "rows-per-statement: 50\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			copySchema := "ck_off_" + c.name
			sandboxtest.MustExec(t, dst, "DROP DATABASE IF EXISTS "+copySchema)
			cfg := taskFile(t, "ck_off_"+c.name, "ck_off.*", c.extra+"rows-per-chunk: 500\nroutes: [{schema: ck_off, target-schema: "+copySchema+"}]")
			mustSluice(t, "migrate", "--config", cfg)
			sameTables(t, src, dst, "ck_off", copySchema)
		})
	}
}
