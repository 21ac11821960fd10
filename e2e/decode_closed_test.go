package e2e_test

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/replicate"
)

// execConn runs statements in order on one session of db (savepoints and
// session variables live in a session).
func execConn(t *testing.T, db *sql.DB, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, q := range stmts {
		if _, err := c.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// waitStopped waits for the task to stop with an error and returns it.
func (r *running) waitStopped(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.err, r.ended = err, true
		if err == nil {
			t.Fatal("the task ended without an error")
		}
		return err
	case <-time.After(time.Minute):
		t.Fatalf("the task did not stop within a minute (status %+v)", r.task.Status())
	}
	return nil
}

// N4: ROLLBACK TO SAVEPOINT in a transaction that also touched an Aria
// table. MariaDB writes the Aria row as its own group and keeps SAVEPOINT,
// the InnoDB rows and ROLLBACK TO in the transaction's group; row 111 must
// not stay on the target, the Aria row must. Held transactions (small) and
// streamed ones (over LargeTxnBytes) both.
func TestSavepointRollbackTo(t *testing.T) {
	for _, big := range []bool{false, true} {
		t.Run(fmt.Sprintf("streamed=%v", big), func(t *testing.T) {
			db := fmt.Sprintf("sp%v", big)
			src := sandboxtest.MustOpen(t, srcInst, "")
			execConn(t, src, "DROP DATABASE IF EXISTS "+db)
			execConn(t, sandboxtest.MustOpen(t, dstInst, ""), "DROP DATABASE IF EXISTS "+db)
			// The target gets the tables from the stream's CREATE TABLEs.
			start := masterStatus(t, src)
			execConn(t, src, "CREATE DATABASE "+db,
				"CREATE TABLE "+db+".x (id INT PRIMARY KEY, v INT, pad VARCHAR(200)) ENGINE=InnoDB",
				"CREATE TABLE "+db+".aria_t (id INT PRIMARY KEY, v INT) ENGINE=Aria")
			r := startTaskWith(t, "sp"+fmt.Sprint(big), start, func(c *replicate.Config) {
				if big {
					c.Apply.BatchBytes, c.Apply.LargeTxnBytes = 4096, 4096
				}
			}, db)
			x, a := db+".x", db+".aria_t"
			fill := func(from, n int) []string {
				var out []string
				for i := from; i < from+n; i++ {
					out = append(out, fmt.Sprintf("INSERT INTO %s VALUES (%d, 1, REPEAT('p', 200))", x, i))
				}
				return out
			}
			// The reproduction.
			execConn(t, src, "BEGIN", "INSERT INTO "+x+" VALUES (110,1,'')", "SAVEPOINT s2", "INSERT INTO "+x+" VALUES (111,1,'')",
				"INSERT INTO "+a+" VALUES (1,1)", "ROLLBACK TO SAVEPOINT s2", "COMMIT")
			// Nested savepoints, a name set twice, RELEASE, and a savepoint
			// set while held and rolled back to after the rows began to
			// stream (when big). The server refuses SAVEPOINT once the
			// transaction touched the Aria table.
			var q []string
			q = append(q, "BEGIN", "SAVEPOINT a")
			q = append(q, fill(200, 5)...)
			q = append(q, "SAVEPOINT b")
			q = append(q, fill(300, 40)...)
			q = append(q, "SAVEPOINT c", "UPDATE "+x+" SET v=v+10 WHERE id=110", "SAVEPOINT c",
				"UPDATE "+x+" SET v=9 WHERE id=201", "DELETE FROM "+x+" WHERE id=200", "SAVEPOINT d",
				"INSERT INTO "+a+" VALUES (2,1)", "ROLLBACK TO c") // the update of 201 and the delete go; d goes
			q = append(q, fill(400, 3)...)
			q = append(q, "ROLLBACK TO SAVEPOINT b") // 300s, the update of 110, 400s go
			q = append(q, fill(500, 3)...)
			q = append(q, "RELEASE SAVEPOINT b", "COMMIT")
			execConn(t, src, q...)
			r.waitApplied(t, masterStatus(t, src))
			sameTables(t, db, "x", "aria_t")
			dst := sandboxtest.MustOpen(t, dstInst, "")
			var n int
			if err := dst.QueryRow("SELECT COUNT(*) FROM " + x + " WHERE id=111 OR id BETWEEN 300 AND 499 OR id=110 AND v<>1 OR id=201 AND v<>1").Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("%d rolled-back rows on the target", n)
			}
		})
	}
}

// N3: a row change a session logged as a statement stops the task with
// the GTID, the statement and a fix; nothing after it is applied.
func TestStatementFormatDMLStops(t *testing.T) {
	for _, format := range []string{"STATEMENT", "MIXED"} {
		t.Run(format, func(t *testing.T) {
			db := "stmt" + strings.ToLower(format)
			src := sandboxtest.MustOpen(t, srcInst, "")
			execConn(t, src, "DROP DATABASE IF EXISTS "+db)
			execConn(t, sandboxtest.MustOpen(t, dstInst, ""), "DROP DATABASE IF EXISTS "+db)
			start := masterStatus(t, src)
			execConn(t, src, "CREATE DATABASE "+db,
				"CREATE TABLE "+db+".t (id INT PRIMARY KEY, v INT)", "INSERT INTO "+db+".t VALUES (1,1),(2,2)")
			dir := t.TempDir()
			withDir := func(c *replicate.Config) { c.Dir = dir }
			r := startTaskWith(t, "stmt"+format, start, withDir, db)
			execConn(t, src, "SET SESSION binlog_format="+format, "UPDATE "+db+".t SET v=v+1 WHERE id=1",
				"SET SESSION binlog_format=ROW") // the pool keeps the session
			var gtid string
			if err := src.QueryRow("SELECT @@gtid_binlog_pos").Scan(&gtid); err != nil {
				t.Fatal(err)
			}
			execConn(t, src, "INSERT INTO "+db+".t VALUES (3,3)")
			err := r.waitStopped(t)
			msg := err.Error()
			t.Log(msg)
			for _, want := range []string{gtid, "UPDATE " + db + ".t SET v=v+1 WHERE id=1", "binlog_format", "sluice skip --config TASK --position"} {
				if !strings.Contains(msg, want) {
					t.Errorf("message lacks %q", want)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("message is not one line")
			}
			dst := sandboxtest.MustOpen(t, dstInst, "")
			var v, n int
			if err := dst.QueryRow("SELECT v FROM " + db + ".t WHERE id=1").Scan(&v); err != nil {
				t.Fatal(err)
			}
			if err := dst.QueryRow("SELECT COUNT(*) FROM " + db + ".t WHERE id=3").Scan(&n); err != nil {
				t.Fatal(err)
			}
			if v != 1 || n != 0 {
				t.Errorf("target has v=%d for id 1 and %d rows with id 3: something past the refused statement was applied", v, n)
			}
			// The fix: the change made by hand, then sluice skip at the
			// position the message names; the task goes on past it.
			m := regexp.MustCompile(`sluice skip --config TASK --position (\S+:\d+)`).FindStringSubmatch(msg)
			if m == nil {
				t.Fatal("no position to skip")
			}
			execConn(t, dst, "UPDATE "+db+".t SET v=v+1 WHERE id=1")
			if err := replicate.AddHandle(dir, replicate.Handle{Position: m[1], Action: "skip"}); err != nil {
				t.Fatal(err)
			}
			r2 := startTaskWith(t, "stmt"+format, start, withDir, db)
			r2.waitApplied(t, masterStatus(t, src))
			sameTables(t, db, "t")
		})
	}
}

// N15: a DDL the target refuses names the statement's position for
// sluice skip (a plain restart runs the same statement again), and
// following the hint gets the task past it.
func TestTargetDDLFailureNamesSkip(t *testing.T) {
	db := "ddlfail"
	src, dst := sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, "")
	execConn(t, src, "DROP DATABASE IF EXISTS "+db)
	execConn(t, dst, "DROP DATABASE IF EXISTS "+db)
	start := masterStatus(t, src)
	execConn(t, src, "CREATE DATABASE "+db, "CREATE TABLE "+db+".t (id INT PRIMARY KEY, v INT)", "INSERT INTO "+db+".t VALUES (1,1),(2,2)")
	dir := t.TempDir()
	withDir := func(c *replicate.Config) { c.Dir = dir }
	r := startTaskWith(t, "ddlfail", start, withDir, db)
	r.waitApplied(t, masterStatus(t, src))
	execConn(t, dst, "UPDATE "+db+".t SET v=1 WHERE id=2") // the target now holds a duplicate v
	execConn(t, src, "ALTER TABLE "+db+".t ADD UNIQUE KEY uv (v)")
	ddlEnd := masterStatus(t, src)
	msg := r.waitStopped(t).Error()
	t.Log(msg)
	p := fmt.Sprintf("%s:%d", ddlEnd.File, ddlEnd.Pos)
	for _, want := range []string{"sluice skip --config TASK --position " + p, "ALTER TABLE", "Duplicate entry"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q", want)
		}
	}
	// Follow the hint: skip the statement, start again, and the rows after
	// it arrive.
	if err := replicate.AddHandle(dir, replicate.Handle{Position: p, Action: "skip"}); err != nil {
		t.Fatal(err)
	}
	r2 := startTaskWith(t, "ddlfail", start, withDir, db)
	execConn(t, src, "INSERT INTO "+db+".t VALUES (3,3)")
	r2.waitApplied(t, masterStatus(t, src))
	var n int
	if err := dst.QueryRow("SELECT COUNT(*) FROM " + db + ".t WHERE id=3").Scan(&n); err != nil || n != 1 {
		t.Fatalf("row after the skipped DDL: %d %v", n, err)
	}
}

// N17: a session's own MINIMAL row image, with the global FULL, gets a fix
// that names the session setting and the transaction to skip.
func TestSessionRowImageFix(t *testing.T) {
	db := "rowimage"
	src, dst := sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, "")
	execConn(t, src, "DROP DATABASE IF EXISTS "+db)
	execConn(t, dst, "DROP DATABASE IF EXISTS "+db)
	start := masterStatus(t, src)
	execConn(t, src, "CREATE DATABASE "+db, "CREATE TABLE "+db+".t (id INT PRIMARY KEY, v INT, w INT)", "INSERT INTO "+db+".t VALUES (1,1,1)")
	r := startTask(t, "rowimage", start, db)
	execConn(t, src, "SET SESSION binlog_row_image=MINIMAL", "UPDATE "+db+".t SET v=5 WHERE id=1", "SET SESSION binlog_row_image=FULL")
	var gtid, global string
	if err := src.QueryRow("SELECT @@gtid_binlog_pos, @@global.binlog_row_image").Scan(&gtid, &global); err != nil {
		t.Fatal(err)
	}
	if global != "FULL" {
		t.Fatalf("the source's global binlog_row_image is %s", global)
	}
	msg := r.waitStopped(t).Error()
	t.Log(msg)
	for _, want := range []string{"SET SESSION binlog_row_image", "sluice skip --config TASK --gtid " + gtid, "rowimage.t"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q", want)
		}
	}
}
