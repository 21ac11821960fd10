package apply_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sandbox"
)

// onConn runs stmts in order on one session of a pool of its own, closed
// after: the session's settings hold for the statements and go with it.
func onConn(t *testing.T, inst *sandbox.Instance, stmts ...string) {
	t.Helper()
	db := sandboxtest.MustOpen(t, inst, "")
	defer db.Close()
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, q := range stmts {
		if _, err := c.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// sameDefinitions compares SHOW CREATE TABLE of each source table with
// the target table of the same name (or the routed name in to).
func sameDefinitions(t *testing.T, src, dst *sql.DB, tables []string, to func(string) string) {
	t.Helper()
	for _, tb := range tables {
		var n1, n2, c1, c2 string
		if err := src.QueryRow("SHOW CREATE TABLE "+tb).Scan(&n1, &c1); err != nil {
			t.Fatal(err)
		}
		target := tb
		if to != nil {
			target = to(tb)
		}
		if err := dst.QueryRow("SHOW CREATE TABLE "+target).Scan(&n2, &c2); err != nil {
			t.Fatalf("target %s: %v", target, err)
		}
		if to != nil { // the routed table's own name differs
			c2 = c1[:len("CREATE TABLE ")+len(n1)+2] + c2[len("CREATE TABLE ")+len(n2)+2:]
		}
		if c1 != c2 {
			t.Errorf("%s definitions differ:\nsource %s\ntarget %s", tb, c1, c2)
		}
	}
}

// sameHex compares a query's result on both sides (use HEX() for bytes).
func sameHex(t *testing.T, src, dst *sql.DB, qsrc, qdst string) {
	t.Helper()
	var a, b sql.NullString
	if err := src.QueryRow(qsrc).Scan(&a); err != nil {
		t.Fatalf("source %s: %v", qsrc, err)
	}
	if err := dst.QueryRow(qdst).Scan(&b); err != nil {
		t.Fatalf("target %s: %v", qdst, err)
	}
	if a != b {
		t.Errorf("%s: source %v, target %v", qsrc, a, b)
	}
}

// TestDDLSourceTextAndSession (issue 29, N7, N8, N9): DDL reaches the
// target as the source's text, run in the source session's context.
// Before the fix each of these failed:
//   - a CHECK constraint was rendered with MySQL's ENFORCED: MariaDB
//     answered 1064 and the task stopped;
//   - ALTER IGNORE ... ADD UNIQUE lost IGNORE: the target refused the
//     duplicates (1062) the source dropped;
//   - a default 'a\nb' written under NO_BACKSLASH_ESCAPES became a newline;
//   - a latin1 client's non-ASCII default reached a utf8mb4 session:
//     "Invalid default value", or other bytes;
//   - ANSI_QUOTES DDL could not be parsed: the task stopped;
//   - a TIMESTAMP column created under explicit_defaults_for_timestamp=0
//     got the target session's implicit default (NULL, not
//     CURRENT_TIMESTAMP), and a TIMESTAMP default written under another
//     time_zone was read in UTC: another instant.
//
// ds.m (Aria options) is coverage: the parser keeps those options.
func TestDDLSourceTextAndSession(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	task := "ddlsource"
	seed(t, task, src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE ds",
		"CREATE TABLE ds.c (id INT PRIMARY KEY, a INT, CONSTRAINT pos CHECK (a > 0), CHECK (a < 1000))",
		"INSERT INTO ds.c VALUES (1, 5)",
		"ALTER TABLE ds.c ADD CONSTRAINT lt CHECK (a < 100)",
		"CREATE TABLE ds.j (id INT PRIMARY KEY, j LONGTEXT CHECK (JSON_VALID(j)))",
		`INSERT INTO ds.j VALUES (1, '{"a": 1}')`,
		"CREATE TABLE ds.d (id INT PRIMARY KEY, v INT)",
		"INSERT INTO ds.d VALUES (1, 1), (2, 1), (3, 2), (4, 2), (5, 3)",
		"ALTER IGNORE TABLE ds.d ADD UNIQUE KEY uv (v)",
		"INSERT INTO ds.d VALUES (6, 4)",
		"CREATE TABLE ds.m (id INT PRIMARY KEY, b BLOB, v VARCHAR(200)) ENGINE=Aria TRANSACTIONAL=1 PAGE_CHECKSUM=1",
		"INSERT INTO ds.m VALUES (1, 'x', 'y')")
	onConn(t, srcInst, "SET SESSION sql_mode='NO_BACKSLASH_ESCAPES'",
		`CREATE TABLE ds.e (id INT PRIMARY KEY, s VARCHAR(10) DEFAULT 'a\nb', t VARCHAR(10) DEFAULT 'c\\d')`,
		"INSERT INTO ds.e (id) VALUES (1)")
	onConn(t, srcInst, "SET NAMES latin1",
		"CREATE TABLE ds.l (id INT PRIMARY KEY, s VARCHAR(10) CHARACTER SET utf8mb4 DEFAULT 'caf\xe9', u VARCHAR(10) CHARACTER SET latin1 DEFAULT '\xe9t\xe9')",
		"INSERT INTO ds.l (id) VALUES (1)",
		"ALTER TABLE ds.l ADD COLUMN w VARCHAR(10) DEFAULT '\xfc'")
	onConn(t, srcInst, "SET SESSION sql_mode='ANSI_QUOTES'",
		`CREATE TABLE ds."q" ("id" INT PRIMARY KEY, "b" VARCHAR(5) DEFAULT 'x')`,
		`ALTER TABLE ds."q" ADD COLUMN "c" INT DEFAULT 7`,
		`INSERT INTO ds."q" ("id") VALUES (1)`)
	onConn(t, srcInst, "SET SESSION explicit_defaults_for_timestamp=0",
		"CREATE TABLE ds.ts (id INT PRIMARY KEY, a TIMESTAMP, b TIMESTAMP)")
	onConn(t, srcInst, "SET SESSION time_zone='+05:00'",
		"CREATE TABLE ds.tz (id INT PRIMARY KEY, ts TIMESTAMP NOT NULL DEFAULT '2020-01-01 00:00:00')")
	sandboxtest.MustExec(t, src, "INSERT INTO ds.l (id) VALUES (2)", "INSERT INTO ds.tz (id) VALUES (1)")
	until := sourcePos(t, src)
	if _, err := replicate(context.Background(), srcInst, runOpts{task: task, until: until}); err != nil {
		t.Fatal(err)
	}
	tables := []string{"ds.c", "ds.j", "ds.d", "ds.m", "ds.e", "ds.l", "ds.q", "ds.ts", "ds.tz"}
	sameDefinitions(t, src, dst, tables, nil)
	sameTables(t, src, dst, tables...)
	for _, q := range []string{
		"SELECT GROUP_CONCAT(id, HEX(s), HEX(t) ORDER BY id) FROM ds.e",
		"SELECT GROUP_CONCAT(id, HEX(s), HEX(u), HEX(w) ORDER BY id) FROM ds.l",
		"SELECT GROUP_CONCAT(id, ':', v ORDER BY id) FROM ds.d",
		"SELECT GROUP_CONCAT(id, ':', UNIX_TIMESTAMP(ts) ORDER BY id) FROM ds.tz",
	} {
		sameHex(t, src, dst, q, q)
	}
	var n int
	if err := dst.QueryRow("SELECT COUNT(*) FROM ds.d").Scan(&n); err != nil || n != 4 {
		t.Errorf("target ds.d has %d rows (%v), want the 4 ALTER IGNORE kept plus one", n, err)
	}
}

// TestDDLSourceTextRouted: under a route only the table names of the
// source's text change; CHECK, IGNORE and the session context stay.
func TestDDLSourceTextRouted(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	task := "ddlsource_route"
	seed(t, task, src)
	route := func(r sluice.TableRef) sluice.TableRef {
		if r.Schema == "dsr" {
			r.Schema = "dsr_to"
			if r.Name != "" && r.Name != "*" {
				r.Name += "_r"
			}
		}
		return r
	}
	sandboxtest.MustExec(t, src, "CREATE DATABASE dsr", "CREATE DATABASE dsr_to")
	sandboxtest.MustExec(t, dst, "CREATE DATABASE IF NOT EXISTS dsr_to")
	onConn(t, srcInst, "USE dsr",
		"CREATE TABLE c (c INT PRIMARY KEY, a INT, CONSTRAINT pos CHECK (a > 0))",
		"INSERT INTO c VALUES (1, 5), (2, 5), (3, 6)",
		"ALTER IGNORE TABLE c ADD UNIQUE KEY ua (a)",
		"SET SESSION sql_mode='NO_BACKSLASH_ESCAPES'",
		`ALTER TABLE dsr.c ADD COLUMN s VARCHAR(10) DEFAULT 'x\ny'`,
		"INSERT INTO c (c, a) VALUES (4, 7)",
		"RENAME TABLE c TO c2")
	until := sourcePos(t, src)
	if _, err := replicate(context.Background(), srcInst, runOpts{task: task, until: until, route: route}); err != nil {
		t.Fatal(err)
	}
	sameDefinitions(t, src, dst, []string{"dsr.c2"}, func(string) string { return "dsr_to.c2_r" })
	sameHex(t, src, dst, "SELECT GROUP_CONCAT(c, a, HEX(s) ORDER BY c) FROM dsr.c2", "SELECT GROUP_CONCAT(c, a, HEX(s) ORDER BY c) FROM dsr_to.c2_r")
}
