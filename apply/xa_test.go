package apply_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/apply"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// xaConn pins one source session: an XA transaction lives in one.
func xaConn(t *testing.T, db *sql.DB) *sql.Conn {
	t.Helper()
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// xaDisconnect ends the session for good (Close would only hand it back
// to the pool, where the prepared transaction would stay its own).
func xaDisconnect(t *testing.T, c *sql.Conn) {
	t.Helper()
	err := c.Raw(func(any) error { return driver.ErrBadConn })
	if !errors.Is(err, driver.ErrBadConn) {
		t.Fatalf("disconnect: %v", err)
	}
}

func xaExec(t *testing.T, c *sql.Conn, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := c.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// sameChecksums compares the tables on both sides byte for byte (dump
// reads every column as raw bytes) and with CHECKSUM TABLE, never with
// sluice's own verify.
func sameChecksums(t *testing.T, src, dst *sql.DB, tables ...string) {
	t.Helper()
	sameTables(t, src, dst, tables...)
	for _, tb := range tables {
		var n1, n2 string
		var c1, c2 sql.NullInt64
		if err := src.QueryRow("CHECKSUM TABLE "+tb).Scan(&n1, &c1); err != nil {
			t.Fatal(err)
		}
		if err := dst.QueryRow("CHECKSUM TABLE "+tb).Scan(&n2, &c2); err != nil {
			t.Fatal(err)
		}
		if c1 != c2 {
			t.Fatalf("CHECKSUM TABLE %s: source %v, target %v", tb, c1, c2)
		}
	}
}

// heldXA is how many XA transactions the task holds on the target.
func heldXA(t *testing.T, dst *sql.DB, task string) int {
	t.Helper()
	var n int
	if err := dst.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA='sluice_meta' AND TABLE_NAME='apply_xa'").Scan(&n); err != nil || n == 0 {
		return 0 // not made yet: nothing was ever held
	}
	if err := dst.QueryRow("SELECT COUNT(DISTINCT xid) FROM sluice_meta.apply_xa WHERE task=?", task).Scan(&n); err != nil {
		t.Fatalf("count held XA transactions: %v", err)
	}
	return n
}

// TestXATwoPhase replicates two-phase XA as MariaDB writes it: commit and
// rollback after XA PREPARE, an XA COMMIT from another session after the
// preparing one disconnected, prepared transactions interleaved with
// ordinary ones and completed in another order than they were prepared,
// an XID used again after its completion, and XA COMMIT ... ONE PHASE.
// Before sluice knew XA, every two-phase transaction was lost.
func TestXATwoPhase(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	seed(t, "xa2pc", src)
	sandboxtest.MustExec(t, src,
		"CREATE DATABASE xa",
		"CREATE TABLE xa.t (id INT PRIMARY KEY, v INT, s VARCHAR(20), b VARBINARY(8), d DECIMAL(12,3), f FLOAT)",
		"CREATE TABLE xa.u (id INT PRIMARY KEY, n INT NOT NULL)",
		"CREATE TABLE xa.k (a INT, b VARCHAR(10))",
		"CREATE TABLE xa.m (id INT PRIMARY KEY, n INT) ENGINE=MyISAM",
		"INSERT INTO xa.u VALUES (1,0),(2,0),(3,0)",
		"INSERT INTO xa.m VALUES (1,0)",
	)
	c1, c2, c3, c4 := xaConn(t, src), xaConn(t, src), xaConn(t, src), xaConn(t, src)
	xaExec(t, c1, "XA START 'x1'",
		"INSERT INTO xa.t VALUES (1,1,'a',X'00FF',1.5,0.25),(2,2,'b',NULL,-2.125,NULL)",
		"UPDATE xa.t SET v=10 WHERE id=1", "UPDATE xa.u SET n=n+1 WHERE id=1",
		"INSERT INTO xa.k VALUES (1,'dup'),(1,'dup')",
		"XA END 'x1'", "XA PREPARE 'x1'", "XA COMMIT 'x1'")
	xaExec(t, c1, "XA START 'x2'", "INSERT INTO xa.t (id,v) VALUES (3,3)", "UPDATE xa.u SET n=n+100 WHERE id=2",
		"XA END 'x2'", "XA PREPARE 'x2'", "XA ROLLBACK 'x2'")
	// Prepared, then the session goes away; another session commits.
	xaExec(t, c2, "XA START 'x3','b3',7", "INSERT INTO xa.t (id,v,s) VALUES (4,4,'d')", "DELETE FROM xa.t WHERE id=2",
		"DELETE FROM xa.k LIMIT 1", "XA END 'x3','b3',7", "XA PREPARE 'x3','b3',7")
	xaDisconnect(t, c2)
	sandboxtest.MustExec(t, src, "INSERT INTO xa.t (id,v) VALUES (5,5)")
	xaExec(t, c3, "XA START 'x4'", "UPDATE xa.u SET n=n+1 WHERE id=2", "INSERT INTO xa.t (id,v) VALUES (6,6)", "XA END 'x4'", "XA PREPARE 'x4'")
	sandboxtest.MustExec(t, src, "UPDATE xa.u SET n=n+10 WHERE id=1")
	xaExec(t, c4, "XA COMMIT 'x3','b3',7")
	xaExec(t, c4, "XA START 'x5'", "INSERT INTO xa.t (id,v) VALUES (7,7)", "UPDATE xa.u SET n=n+5 WHERE id=3", "XA END 'x5'", "XA PREPARE 'x5'")
	sandboxtest.MustExec(t, src, "INSERT INTO xa.t (id,v) VALUES (8,8)")
	xaExec(t, c4, "XA COMMIT 'x5'") // prepared after x4, committed before it
	xaExec(t, c3, "XA COMMIT 'x4'")
	xaExec(t, c1, "XA START 'x6'", "INSERT INTO xa.t (id,v) VALUES (9,9)", "XA END 'x6'", "XA COMMIT 'x6' ONE PHASE")
	xaExec(t, c1, "XA START 'x7'", "DO 1", "XA END 'x7'", "XA PREPARE 'x7'", "XA COMMIT 'x7'") // writes nothing
	xaExec(t, c1, "XA START 'x1'", "UPDATE xa.t SET s='again' WHERE id=1", "XA END 'x1'", "XA PREPARE 'x1'", "XA COMMIT 'x1'")
	// Rolled back before PREPARE after a non-transactional change: MariaDB
	// logs the MyISAM row as its own transaction and the InnoDB rows in a
	// group that ends in ROLLBACK, which a replica rolls back. A statement
	// that changes both engines puts both rows in that group, and only
	// the MyISAM one stays.
	xaExec(t, c1, "XA START 'x8'", "INSERT INTO xa.t (id,v) VALUES (200,1)", "INSERT INTO xa.m VALUES (200,0)", "XA END 'x8'", "XA ROLLBACK 'x8'")
	xaExec(t, c1, "XA START 'x9'", "INSERT INTO xa.t (id,v) VALUES (201,1)",
		"UPDATE xa.t JOIN xa.m ON xa.t.id=1 AND xa.m.id=1 SET xa.t.v=xa.t.v+1, xa.m.n=xa.m.n+1", "XA END 'x9'", "XA ROLLBACK 'x9'")
	until := sourcePos(t, src)
	st, err := replicate(context.Background(), srcInst, runOpts{task: "xa2pc", workers: 4, until: until})
	if err != nil {
		t.Fatal(err)
	}
	sameChecksums(t, src, dst, "xa.t", "xa.u", "xa.k", "xa.m")
	if n := heldXA(t, dst, "xa2pc"); n != 0 {
		t.Fatalf("%d XA transactions still held after all completed", n)
	}
	if st.Applied.File != until.File || st.Applied.Pos != until.Pos || st.Applied.GTIDSet != until.GTIDSet {
		t.Fatalf("applied position %v, want %v", st.Applied, until)
	}
	// A restart at the end applies nothing twice.
	if _, err := replicate(context.Background(), srcInst, runOpts{task: "xa2pc", until: until}); err != nil {
		t.Fatal(err)
	}
	sameChecksums(t, src, dst, "xa.t", "xa.u", "xa.k", "xa.m")
}

// TestXATypes holds and applies rows of many column types: the held
// values must come back with their Go types and bytes.
func TestXATypes(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	seed(t, "xatypes", src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE xty",
		`CREATE TABLE xty.a (id INT UNSIGNED NOT NULL PRIMARY KEY, big BIGINT UNSIGNED, s VARCHAR(50), c CHAR(3),
			bin VARBINARY(20), bl BLOB, d DECIMAL(20,6), f FLOAT, db DOUBLE, dt DATETIME(6), ts TIMESTAMP(3) NULL,
			dd DATE, tm TIME(2), y YEAR, e ENUM('x','y','z'), st SET('p','q','r'), b BIT(10), j JSON, mi MEDIUMINT UNSIGNED,
			ti TINYINT, l1 VARCHAR(10) CHARACTER SET latin1, g INT AS (id * 2) VIRTUAL)`,
		"INSERT INTO xty.a (id, s) VALUES (5, 'old')")
	c := xaConn(t, src)
	xaExec(t, c, "XA START 'ty'",
		`INSERT INTO xty.a (id,big,s,c,bin,bl,d,f,db,dt,ts,dd,tm,y,e,st,b,j,mi,ti,l1) VALUES
			(1, 18446744073709551615, 'it''s "q" \\ \n', 'abc', X'00FF27', X'DEADBEEF00', -12345678901234.123456, 1.5, 0.1,
			 '2024-02-29 23:59:59.123456', '2024-01-01 00:00:01.5', '1999-12-31', '-12:30:00.25', 2024, 'y', 'p,r', b'1010101010',
			 '{"k": [1, 2, "x"]}', 16777215, -128, _latin1 X'636166E9'),
			(2, 0, '', '', '', '', 0, -3.25e10, -1e-300, '1000-01-01 00:00:00', NULL, NULL, NULL, NULL, NULL, '', NULL, NULL, 0, 0, NULL),
			(3, NULL, 'ünïcødé 😀', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, '[]', NULL, 127, 'x')`,
		"UPDATE xty.a SET s='new', bin=X'' WHERE id=5", "DELETE FROM xty.a WHERE id=2",
		"XA END 'ty'", "XA PREPARE 'ty'", "XA COMMIT 'ty'")
	if _, err := replicate(context.Background(), srcInst, runOpts{task: "xatypes", until: sourcePos(t, src)}); err != nil {
		t.Fatal(err)
	}
	sameChecksums(t, src, dst, "xty.a")
}

// TestXARollbackGroupStreamed: a group that ends in ROLLBACK and is too
// large to hold is streamed to the target and rolled back there; its
// MyISAM row, logged as its own transaction, stays.
func TestXARollbackGroupStreamed(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	seed(t, "xarbig", src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE xb", "CREATE TABLE xb.t (id INT PRIMARY KEY, s VARCHAR(100))",
		"CREATE TABLE xb.m (id INT PRIMARY KEY) ENGINE=MyISAM")
	c := xaConn(t, src)
	stmts := []string{"XA START 'big'", "INSERT INTO xb.m VALUES (1)"}
	for i := 0; i < 200; i++ {
		stmts = append(stmts, fmt.Sprintf("INSERT INTO xb.t VALUES (%d, REPEAT('x', 100))", i))
	}
	xaExec(t, c, append(stmts, "XA END 'big'", "XA ROLLBACK 'big'")...)
	sandboxtest.MustExec(t, src, "INSERT INTO xb.t VALUES (1000, 'after')")
	until := sourcePos(t, src)
	if _, err := replicate(context.Background(), srcInst, runOpts{task: "xarbig", large: 4096, until: until}); err != nil {
		t.Fatal(err)
	}
	sameChecksums(t, src, dst, "xb.t", "xb.m")
}

// TestXALargePrepareStreamed: a prepare group larger than LargeTxnBytes
// goes to the held table as it is read, in one target transaction with
// the prepare's checkpoint; runs stopped abruptly while it is being
// written leave nothing held, and the last run applies it at its commit.
func TestXALargePrepareStreamed(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	seed(t, "xalarge", src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE xl", "CREATE TABLE xl.t (id INT PRIMARY KEY, s VARCHAR(200))", "INSERT INTO xl.t VALUES (0, 'before')")
	c := xaConn(t, src)
	stmts := []string{"XA START 'large'"}
	for i := 1; i <= 300; i++ {
		stmts = append(stmts, fmt.Sprintf("INSERT INTO xl.t VALUES (%d, REPEAT('%c', 150))", i, 'a'+i%26))
	}
	xaExec(t, c, append(stmts, "UPDATE xl.t SET s='changed' WHERE id=0", "XA END 'large'", "XA PREPARE 'large'")...)
	xaDisconnect(t, c)
	sandboxtest.MustExec(t, src, "INSERT INTO xl.t VALUES (1000, 'after the prepare')")
	until := sourcePos(t, src)
	// Stop after 5, 50 and 150 items: inside the group's rows (one Rows
	// item per row event), before its prepare.
	for _, k := range []int{5, 50, 150} {
		n := 0
		_, err := replicate(context.Background(), srcInst, runOpts{task: "xalarge", large: 4096, until: until,
			after: func(*apply.Applier) bool { n++; return n >= k }})
		if err != errCrashed {
			t.Fatalf("stop after %d items: %v", k, err)
		}
		if n := heldXA(t, dst, "xalarge"); n != 0 {
			t.Fatalf("after a stop inside the prepare group, %d transactions held", n)
		}
	}
	if _, err := replicate(context.Background(), srcInst, runOpts{task: "xalarge", large: 4096, until: until}); err != nil {
		t.Fatal(err)
	}
	var chunks int
	if err := dst.QueryRow("SELECT COUNT(*) FROM sluice_meta.apply_xa WHERE task='xalarge'").Scan(&chunks); err != nil || chunks < 5 {
		t.Fatalf("the held transaction has %d chunks (%v), want it written in several as it was read", chunks, err)
	}
	sameChecksums(t, src, dst, "xl.t")
	c2 := xaConn(t, src)
	xaExec(t, c2, "XA COMMIT 'large'")
	if _, err := replicate(context.Background(), srcInst, runOpts{task: "xalarge", large: 4096, until: sourcePos(t, src)}); err != nil {
		t.Fatal(err)
	}
	sameChecksums(t, src, dst, "xl.t")
	if n := heldXA(t, dst, "xalarge"); n != 0 {
		t.Fatalf("%d XA transactions held after the commit", n)
	}
}

// TestXAHeldAcrossRestart stops replication while a transaction is
// prepared on the source: the target shows none of its rows (as the
// source shows none), holds them, and applies them once the source
// commits, in a later run.
func TestXAHeldAcrossRestart(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	seed(t, "xahold", src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE xh", "CREATE TABLE xh.t (id INT PRIMARY KEY, v INT)", "INSERT INTO xh.t VALUES (1,1),(2,2)")
	c := xaConn(t, src)
	xaExec(t, c, "XA START 'h1'", "INSERT INTO xh.t VALUES (3,3)", "UPDATE xh.t SET v=20 WHERE id=2", "XA END 'h1'", "XA PREPARE 'h1'")
	xaDisconnect(t, c)
	sandboxtest.MustExec(t, src, "UPDATE xh.t SET v=10 WHERE id=1")
	until := sourcePos(t, src)
	if _, err := replicate(context.Background(), srcInst, runOpts{task: "xahold", until: until}); err != nil {
		t.Fatal(err)
	}
	sameChecksums(t, src, dst, "xh.t") // the source shows no prepared row either
	if n := heldXA(t, dst, "xahold"); n != 1 {
		t.Fatalf("%d XA transactions held, want 1", n)
	}
	// A second run with nothing new keeps holding it.
	if _, err := replicate(context.Background(), srcInst, runOpts{task: "xahold", until: until}); err != nil {
		t.Fatal(err)
	}
	c2 := xaConn(t, src)
	xaExec(t, c2, "XA COMMIT 'h1'")
	until = sourcePos(t, src)
	if _, err := replicate(context.Background(), srcInst, runOpts{task: "xahold", until: until}); err != nil {
		t.Fatal(err)
	}
	sameChecksums(t, src, dst, "xh.t")
	if n := heldXA(t, dst, "xahold"); n != 0 {
		t.Fatalf("%d XA transactions held after the commit, want 0", n)
	}
}

// TestXACrashAtEveryItem stops the applier abruptly (Close without Flush,
// as a crash leaves the target) after each stream item of a run of
// prepares, completions and ordinary transactions in turn, restarting from
// the checkpoint each time. Every window between a prepare, its hold, its
// completion and their checkpoints is hit; the target must end equal to
// the source with nothing held.
func TestXACrashAtEveryItem(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	seed(t, "xacrash", src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE xc", "CREATE TABLE xc.t (id INT PRIMARY KEY, n INT NOT NULL)", "INSERT INTO xc.t VALUES (1,0),(2,0),(3,0),(4,0)")
	for i := 0; i < 6; i++ {
		c := xaConn(t, src)
		xid := fmt.Sprintf("'c%d'", i)
		xaExec(t, c, "XA START "+xid, fmt.Sprintf("UPDATE xc.t SET n=n+%d WHERE id=%d", 1<<i, 1+i%2),
			fmt.Sprintf("INSERT INTO xc.t VALUES (%d, %d)", 100+i, i), "XA END "+xid, "XA PREPARE "+xid)
		xaDisconnect(t, c)
		sandboxtest.MustExec(t, src, fmt.Sprintf("UPDATE xc.t SET n=n+1 WHERE id=%d", 3+i%2))
		end := "XA COMMIT "
		if i%3 == 2 {
			end = "XA ROLLBACK "
		}
		sandboxtest.MustExec(t, src, end+xid)
	}
	until := sourcePos(t, src)
	crashes := 0
	for k := 1; k < 60; k++ {
		n := 0
		_, err := replicate(context.Background(), srcInst, runOpts{task: "xacrash", workers: 2, until: until,
			after: func(*apply.Applier) bool { n++; return n >= k }})
		if err == nil {
			break
		}
		if err != errCrashed {
			t.Fatalf("run %d: %v", k, err)
		}
		crashes++
	}
	if _, err := replicate(context.Background(), srcInst, runOpts{task: "xacrash", until: until}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d crashes", crashes)
	if crashes < 10 {
		t.Fatalf("only %d crashes: the runs did not stop inside the stream", crashes)
	}
	sameChecksums(t, src, dst, "xc.t")
	if n := heldXA(t, dst, "xacrash"); n != 0 {
		t.Fatalf("%d XA transactions held after all completed", n)
	}
}

// TestXAKill9WhilePrepared kills the replication process with SIGKILL while
// a transaction is prepared on the source and held on the target, placed
// by the target's observed progress past the prepare; then the source
// completes it, and the restarted process must apply it exactly once. A
// second round does the same with an XA ROLLBACK.
func TestXAKill9WhilePrepared(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	seed(t, "xakill", src)
	sandboxtest.MustExec(t, src,
		"CREATE DATABASE xk",
		"CREATE TABLE xk.acc (id INT PRIMARY KEY, n INT NOT NULL)",
		"CREATE TABLE xk.x (id INT PRIMARY KEY, v VARCHAR(20))",
		"INSERT INTO xk.x VALUES (1,'one'),(2,'two')")
	for i := 0; i < 20; i++ {
		sandboxtest.MustExec(t, src, fmt.Sprintf("INSERT INTO xk.acc VALUES (%d, 0)", i))
	}
	const per = 1500
	counter := func(base int) {
		parallelWriters(t, per, func(i int) error {
			return retryTxn(src, []string{fmt.Sprintf("UPDATE xk.acc SET n=n+1 WHERE id=%d", (base+i)%20)})
		})
	}
	prepare := func(xid string, id int) {
		c := xaConn(t, src)
		xaExec(t, c, "XA START '"+xid+"'", fmt.Sprintf("INSERT INTO xk.x VALUES (%d,'%s')", id, xid),
			"UPDATE xk.x SET v=CONCAT(v,'+"+xid+"') WHERE id=1", "XA END '"+xid+"'", "XA PREPARE '"+xid+"'")
		xaDisconnect(t, c) // the preparing session disconnects
	}
	committed := counterSum(dst, "xk.acc")
	for round, end := range []string{"XA COMMIT", "XA ROLLBACK"} {
		xid := fmt.Sprintf("k%d", round)
		prepare(xid, 10+round)
		counter(round * per)
		until := sourcePos(t, src)
		total := (round + 1) * per
		// The kill waits until the target is a quarter into this round's
		// ordinary transactions, which come after the prepare.
		step := max(1, round*per+per/4-committed())
		killAfterProgress(t, round, childCmd(srcInst, "xakill", until, "SLUICE_WORKERS=4", "SLUICE_BATCH=10", "SLUICE_MAX_BATCH=20"), committed, step, total)
		var held string
		if err := dst.QueryRow("SELECT GROUP_CONCAT(DISTINCT xid) FROM sluice_meta.apply_xa WHERE task='xakill'").Scan(&held); err != nil {
			t.Fatal(err)
		}
		if want := "X'" + hex.EncodeToString([]byte(xid)) + "',X'',1"; held != want {
			t.Fatalf("round %d: the target holds %q at the kill, want the prepared %s", round, held, want)
		}
		sameChecksums(t, src, dst, "xk.x") // neither side shows the prepared rows
		sandboxtest.MustExec(t, src, end+" '"+xid+"'")
	}
	sandboxtest.MustExec(t, src, "INSERT INTO xk.x VALUES (99,'last')")
	until := sourcePos(t, src)
	out, err := childCmd(srcInst, "xakill", until, "SLUICE_WORKERS=4", "SLUICE_BATCH=10", "SLUICE_MAX_BATCH=20").CombinedOutput()
	if err != nil {
		t.Fatalf("final run: %v: %s", err, out)
	}
	t.Logf("final run: %s", strings.TrimSpace(string(out)))
	sameChecksums(t, src, dst, "xk.acc", "xk.x")
	if n := heldXA(t, dst, "xakill"); n != 0 {
		t.Fatalf("%d XA transactions held after all completed", n)
	}
}

// TestXACommitNotHeld starts a task after a transaction was prepared: its
// XA COMMIT names rows sluice never read, and the task stops with a fix
// instead of applying nothing.
func TestXACommitNotHeld(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	sandboxtest.MustExec(t, src, "CREATE DATABASE xn", "CREATE TABLE xn.t (id INT PRIMARY KEY)")
	sandboxtest.MustExec(t, dst, "CREATE DATABASE xn", "CREATE TABLE xn.t (id INT PRIMARY KEY)")
	c := xaConn(t, src)
	xaExec(t, c, "XA START 'n1'", "INSERT INTO xn.t VALUES (1)", "XA END 'n1'", "XA PREPARE 'n1'")
	seed(t, "xanot", src)
	xaExec(t, c, "XA COMMIT 'n1'")
	_, err := replicate(context.Background(), srcInst, runOpts{task: "xanot", until: sourcePos(t, src)})
	var se *sluice.Error
	if !errors.Is(err, apply.ErrXANotHeld) || !errors.As(err, &se) || !strings.Contains(se.Hint, "sluice skip") {
		t.Fatalf("got %v, want ErrXANotHeld with a hint", err)
	}
	t.Logf("error shown to the user: %v", err)
}

// TestXADtmBranchShapes replays the SQL that dtm's XA branches run on a
// business database (dtmcli's XaHandleLocalTrans and XaHandlePhase2, the
// client sluice's dtx XA mode serves): xa start 'gid-branch', an INSERT
// IGNORE of the barrier row, the business change, xa end, xa prepare on
// one connection; xa commit or xa rollback later from a pooled connection,
// and after a rollback the barrier row as its own transaction.
func TestXADtmBranchShapes(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	seed(t, "xadtm", src)
	sandboxtest.MustExec(t, src,
		"CREATE DATABASE dtm_barrier",
		`CREATE TABLE dtm_barrier.barrier (id BIGINT AUTO_INCREMENT PRIMARY KEY, trans_type VARCHAR(45) DEFAULT '', gid VARCHAR(128) DEFAULT '',
			branch_id VARCHAR(128) DEFAULT '', op VARCHAR(45) DEFAULT '', barrier_id VARCHAR(45) DEFAULT '', reason VARCHAR(45) DEFAULT '',
			UNIQUE KEY (gid, branch_id, op, barrier_id))`,
		"CREATE DATABASE busi",
		"CREATE TABLE busi.user_account (user_id INT PRIMARY KEY, balance DECIMAL(10,2) NOT NULL)",
		"INSERT INTO busi.user_account VALUES (1, 10000), (2, 10000)")
	branch := func(gid, bid string, user int, amount string) {
		c := xaConn(t, src)
		xid := gid + "-" + bid
		xaExec(t, c, "xa start '"+xid+"'",
			"insert ignore into dtm_barrier.barrier(trans_type, gid, branch_id, op, barrier_id, reason) values('xa','"+gid+"','"+bid+"','action','01','action')",
			fmt.Sprintf("update busi.user_account set balance=balance+%s where user_id=%d", amount, user),
			"xa end '"+xid+"'", "xa prepare '"+xid+"'")
		xaDisconnect(t, c)
	}
	branch("g1", "01", 1, "-30")
	branch("g1", "02", 2, "30")
	sandboxtest.MustExec(t, src, "xa commit 'g1-01'")
	branch("g2", "01", 1, "-5000") // g1-02 still prepared
	sandboxtest.MustExec(t, src, "xa commit 'g1-02'")
	sandboxtest.MustExec(t, src, "xa rollback 'g2-01'",
		"insert ignore into dtm_barrier.barrier(trans_type, gid, branch_id, op, barrier_id, reason) values('xa','g2','01','action','01','rollback')")
	if _, err := replicate(context.Background(), srcInst, runOpts{task: "xadtm", workers: 4, until: sourcePos(t, src)}); err != nil {
		t.Fatal(err)
	}
	sameChecksums(t, src, dst, "dtm_barrier.barrier", "busi.user_account")
}
