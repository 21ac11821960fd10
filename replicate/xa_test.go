package replicate_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"testing"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestReplicateXAThroughRelay runs two-phase XA through the whole task:
// binlog reader, relay log, decoder and applier. While a transaction is
// prepared on the source, the task's applied position and verify move on
// past it (neither side shows its rows); after a restart, which reads the
// relay again, its XA COMMIT from another session applies it, and an XA
// ROLLBACK discards another.
func TestReplicateXAThroughRelay(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	start := masterStatus(t, src)
	session := func() *sql.Conn {
		c, err := src.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	exec := func(c *sql.Conn, stmts ...string) {
		t.Helper()
		for _, q := range stmts {
			if _, err := c.ExecContext(context.Background(), q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	disconnect := func(c *sql.Conn) {
		if err := c.Raw(func(any) error { return driver.ErrBadConn }); !errors.Is(err, driver.ErrBadConn) {
			t.Fatal(err)
		}
	}
	sandboxtest.MustExec(t, src, "CREATE DATABASE xr", "CREATE TABLE xr.t (id INT PRIMARY KEY, v VARCHAR(20))", "INSERT INTO xr.t VALUES (1,'a'),(2,'b')")
	cfg := taskConfig(t, "xarelay", srcInst, dstInst, start)
	r := run(t, cfg)
	c := session()
	exec(c, "XA START 'r1'", "INSERT INTO xr.t VALUES (3,'prepared')", "UPDATE xr.t SET v='r1' WHERE id=1", "XA END 'r1'", "XA PREPARE 'r1'")
	disconnect(c)
	c = session()
	exec(c, "XA START 'r2'", "DELETE FROM xr.t WHERE id=2", "XA END 'r2'", "XA PREPARE 'r2'")
	disconnect(c)
	sandboxtest.MustExec(t, src, "INSERT INTO xr.t VALUES (4,'after')")
	r.waitApplied(t, masterStatus(t, src))
	sameData(t, srcInst, dstInst, "xr") // sluice verify: not confused by the prepared rows
	var n int
	if err := dst.QueryRow("SELECT COUNT(*) FROM xr.t WHERE id IN (3,4)").Scan(&n); err != nil || n != 1 {
		t.Fatalf("target has %d of rows 3 (prepared) and 4 (committed after it) (%v), want only row 4", n, err)
	}
	r.stop(t)
	c = session()
	exec(c, "XA COMMIT 'r1'", "XA ROLLBACK 'r2'")
	r = run(t, cfg)
	r.waitApplied(t, masterStatus(t, src))
	r.stop(t)
	sameData(t, srcInst, dstInst, "xr")
	var s1, s2 string
	if err := src.QueryRow("SELECT GROUP_CONCAT(id, HEX(v) ORDER BY id) FROM xr.t").Scan(&s1); err != nil {
		t.Fatal(err)
	}
	if err := dst.QueryRow("SELECT GROUP_CONCAT(id, HEX(v) ORDER BY id) FROM xr.t").Scan(&s2); err != nil {
		t.Fatal(err)
	}
	if s1 != s2 {
		t.Fatalf("source rows %s, target rows %s", s1, s2)
	}
}
