package apply_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// cutNontxGroup runs replication of everything up to until and cuts the
// one group that changes schema db's table j: the test holds j's key 5 (an
// uncommitted insert of its own), the group waits for it after its rows to
// the non-transactional table a were written (a group's inserts run last,
// and a's rows come first), and the waiting session is killed, as a target
// restart or a lost connection would end it. It returns once replication
// failed and the holding transaction rolled back, and reports how many
// rows of a the cut group left behind.
func cutNontxGroup(t *testing.T, dst *sql.DB, task, db string, until sluice.Position, large int) {
	t.Helper()
	keep := func(r sluice.TableRef) bool { return r.Schema == db }
	ctx := context.Background()
	hold, err := dst.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	for _, q := range []string{"BEGIN", "INSERT INTO " + db + ".j VALUES (5, 0)"} {
		if _, err := hold.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := replicate(ctx, srcInst, runOpts{task: task, workers: 2, keep: keep, until: until, large: large})
		done <- err
	}()
	// Observed progress: the group waits for the held key, so its
	// statements before that insert (the Aria rows) have run.
	var waiting int64
	for limit := time.Now().Add(2 * time.Minute); waiting == 0; {
		_ = dst.QueryRow("SELECT trx_mysql_thread_id FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'").Scan(&waiting)
		if time.Now().After(limit) {
			t.Fatalf("no group waited for the held row")
		}
		select {
		case err := <-done:
			t.Fatalf("replication ended before the waiting group was cut: %v", err)
		case <-time.After(150 * time.Millisecond): // lock tables refresh (lockwait.go)
		}
	}
	if _, err := dst.Exec(fmt.Sprintf("KILL %d", waiting)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("replication did not fail when the waiting group's session was killed")
	} else {
		t.Logf("replication failed as planned: %v", err)
	}
	if _, err := hold.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
}

// hexRows is every row of table in key order, each column as HEX().
func hexRows(t *testing.T, db *sql.DB, table string, cols ...string) string {
	t.Helper()
	h := make([]string, len(cols))
	for i, c := range cols {
		h[i] = "IFNULL(HEX(" + c + "),'NULL')"
	}
	rows, err := db.Query("SELECT CONCAT_WS(','," + strings.Join(h, ",") + ") FROM " + table + " ORDER BY " + cols[0])
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, "\n")
}

func checksum(t *testing.T, db *sql.DB, table string) string {
	t.Helper()
	var v sql.NullString
	if err := db.QueryRow("CHECKSUM TABLE "+table+" EXTENDED").Scan(new(string), &v); err != nil {
		t.Fatal(err)
	}
	return v.String
}

// TestNontxGroupCutIsReplayed (issue 29, difftest seeds 2708 and 2735): a
// group that changes a non-transactional (Aria) target table is cut after
// its Aria rows were written. Its InnoDB rows and its checkpoint rolled
// back, the Aria rows stayed. Before the fix the restart applied the group
// again from the checkpoint and stopped with "Duplicate entry '10' for key
// 'PRIMARY'" on the Aria table; now the restart replays the marked group's
// Aria changes idempotently (INSERT, an UPDATE of the key, an UPDATE of a
// value, a DELETE whose unique value a later INSERT reuses) and the target
// equals the source.
func TestNontxGroupCutIsReplayed(t *testing.T) {
	sandboxtest.SkipShort(t)
	testNontxGroupCut(t, "nt_rp", 0)
}

// TestNontxLargeGroupCutIsReplayed: the same with the transaction streamed
// to the target (larger than LargeTxnBytes), whose mark names its GTID.
func TestNontxLargeGroupCutIsReplayed(t *testing.T) {
	sandboxtest.SkipShort(t)
	testNontxGroupCut(t, "nt_rpl", 4096)
}

func testNontxGroupCut(t *testing.T, db string, large int) {
	src, dst := sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, "")
	// The source's a is InnoDB, so one source transaction changes a and j
	// (a source Aria table's rows are a group of their own); the target's
	// is Aria, which sluice accepts.
	for _, conn := range []*sql.DB{src, dst} {
		engine := "InnoDB"
		if conn == dst {
			engine = "Aria"
		}
		sandboxtest.MustExec(t, conn, "DROP DATABASE IF EXISTS "+db, "CREATE DATABASE "+db,
			"CREATE TABLE "+db+".a (id INT PRIMARY KEY, v VARCHAR(20), u INT, UNIQUE KEY (u)) ENGINE="+engine,
			"CREATE TABLE "+db+".j (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
			"CREATE TABLE "+db+".f (id INT PRIMARY KEY, b TEXT) ENGINE=InnoDB",
			"INSERT INTO "+db+".a VALUES (1, 'one', 1), (2, 'two', 2), (3, 'three', 3)")
	}
	task := db
	seed(t, task, src)
	// The filler row makes the transaction larger than 4096 bytes, so
	// that it is streamed when large is set.
	sandboxtest.MustExec(t, src, "BEGIN",
		"INSERT INTO "+db+".f VALUES (1, REPEAT('x', 5000))",
		"INSERT INTO "+db+".a VALUES (10, 'ten', 10), (11, 'eleven', 11)",
		"UPDATE "+db+".a SET v = 'uno' WHERE id = 1",
		"UPDATE "+db+".a SET id = 20 WHERE id = 2",
		"DELETE FROM "+db+".a WHERE id = 3",
		"INSERT INTO "+db+".a VALUES (12, 'twelve', 3)",
		"UPDATE "+db+".a SET u = 110 WHERE id = 11",
		"INSERT INTO "+db+".j VALUES (5, 1)",
		"COMMIT",
		"INSERT INTO "+db+".a VALUES (13, 'after', 13)")
	until := sourcePos(t, src)
	cutNontxGroup(t, dst, task, db, until, large)
	var left int
	if err := dst.QueryRow("SELECT COUNT(*) FROM " + db + ".a WHERE id IN (10, 11, 12, 20)").Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left == 0 {
		t.Fatal("the cut group left none of its Aria rows: the test did not cut it after them")
	}
	t.Logf("the cut group left %d of its 4 new Aria rows", left)
	keep := func(r sluice.TableRef) bool { return r.Schema == db }
	if _, err := replicate(context.Background(), srcInst, runOpts{task: task, workers: 2, keep: keep, until: until, large: large}); err != nil {
		t.Fatalf("the restart from the checkpoint: %v", err)
	}
	for _, tbl := range []struct {
		name string
		cols []string
	}{{db + ".a", []string{"id", "v", "u"}}, {db + ".j", []string{"id", "v"}}} {
		if s, d := hexRows(t, src, tbl.name, tbl.cols...), hexRows(t, dst, tbl.name, tbl.cols...); s != d {
			t.Fatalf("%s differs:\nsource:\n%s\ntarget:\n%s", tbl.name, s, d)
		}
	}
	if s, d := checksum(t, src, db+".j"), checksum(t, dst, db+".j"); s != d {
		t.Fatalf("CHECKSUM TABLE %s.j: source %s, target %s", db, s, d)
	}
	var marks int
	if err := dst.QueryRow("SELECT COUNT(*) FROM sluice_meta.apply_checkpoint WHERE task=? AND nontx_pending IS NOT NULL", task).Scan(&marks); err != nil {
		t.Fatal(err)
	}
	if marks != 0 {
		t.Fatalf("%d non-transactional mark(s) left after the replay", marks)
	}
}

// TestNontxGroupCutKeylessStops: the same cut on an Aria table without a
// key cannot be replayed exactly (identical rows cannot be told apart).
// Before the fix the restart inserted the row a second time, silently; now
// it stops with one line that says why.
func TestNontxGroupCutKeylessStops(t *testing.T) {
	src, dst := sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, "")
	for _, db := range []*sql.DB{src, dst} {
		engine := "InnoDB"
		if db == dst {
			engine = "Aria"
		}
		sandboxtest.MustExec(t, db, "DROP DATABASE IF EXISTS nt_rk", "CREATE DATABASE nt_rk",
			"CREATE TABLE nt_rk.a (v INT, w VARCHAR(10)) ENGINE="+engine,
			"CREATE TABLE nt_rk.j (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
			"INSERT INTO nt_rk.a VALUES (1, 'x')")
	}
	const task = "nt_rk"
	seed(t, task, src)
	sandboxtest.MustExec(t, src, "BEGIN", "INSERT INTO nt_rk.a VALUES (1, 'x'), (2, 'y')",
		"INSERT INTO nt_rk.j VALUES (5, 1)", "COMMIT")
	until := sourcePos(t, src)
	cutNontxGroup(t, dst, task, "nt_rk", until, 0)
	keep := func(r sluice.TableRef) bool { return r.Schema == "nt_rk" }
	_, err := replicate(context.Background(), srcInst, runOpts{task: task, workers: 2, keep: keep, until: until})
	if err == nil {
		var n int
		_ = dst.QueryRow("SELECT COUNT(*) FROM nt_rk.a").Scan(&n)
		t.Fatalf("the restart replayed a cut group on a keyless Aria table without a word (target rows %d, source 3)", n)
	}
	msg := err.Error()
	t.Logf("the restart stopped: %v", msg)
	if !strings.Contains(msg, "nt_rk") || !strings.Contains(msg, "no primary key") || strings.Contains(msg, "\n") {
		t.Fatalf("not the named one-line stop: %q", msg)
	}
}
