package apply_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/apply"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/schema"
)

// execOn runs statements on one session of db, so that session variables
// (foreign_key_checks, check_constraint_checks) hold for all of them.
func execOn(t *testing.T, db *sql.DB, qs ...string) {
	t.Helper()
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The session ends with them: the pool must not hand its variables on.
	defer c.Raw(func(any) error { return driver.ErrBadConn }) //nolint:errcheck // closes the session
	for _, q := range qs {
		if _, err := c.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// TestFKCascades (issue 29, N1): MariaDB does not binlog what foreign key
// actions change, so the target must run them itself: DELETE and UPDATE
// cascades, SET NULL, several levels, a re-insert of a cascaded-away key,
// many small parent/child transactions on four workers, and a source
// session without foreign key checks (rows and DDL), in both commit orders.
func TestFKCascades(t *testing.T) {
	sandboxtest.SkipShort(t)
	for _, relaxed := range []bool{false, true} {
		name := "strict"
		if relaxed {
			name = "relaxed"
		}
		t.Run(name, func(t *testing.T) { testFKCascades(t, "fk"+name[:1], relaxed) })
	}
}

func testFKCascades(t *testing.T, d string, relaxed bool) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	task := "fkc_" + d
	seed(t, task, src)
	sandboxtest.MustExec(t, src,
		"CREATE DATABASE "+d,
		"CREATE TABLE "+d+".parent (id INT PRIMARY KEY, v INT)",
		"CREATE TABLE "+d+".child (id INT PRIMARY KEY, pid INT, v INT DEFAULT 0, KEY (pid), FOREIGN KEY (pid) REFERENCES parent(id) ON DELETE CASCADE ON UPDATE CASCADE)",
		"CREATE TABLE "+d+".child_n (id INT PRIMARY KEY, pid INT NULL, FOREIGN KEY (pid) REFERENCES parent(id) ON DELETE SET NULL ON UPDATE CASCADE)",
		"CREATE TABLE "+d+".grand (id INT PRIMARY KEY, cid INT, FOREIGN KEY (cid) REFERENCES child(id) ON DELETE CASCADE ON UPDATE CASCADE)",
		"CREATE TABLE "+d+".strict_c (id INT PRIMARY KEY, pid INT, FOREIGN KEY (pid) REFERENCES parent(id))",
		"CREATE TABLE "+d+".p2 (id INT PRIMARY KEY)",
		"CREATE TABLE "+d+".c2 (id INT PRIMARY KEY, pid INT, FOREIGN KEY (pid) REFERENCES p2(id))",
	)
	var ins []string
	for p := 1; p <= 8; p++ {
		ins = append(ins, fmt.Sprintf("INSERT INTO %s.parent VALUES (%d, %d)", d, p, p))
		for k := 1; k <= 3 && p <= 6; k++ {
			ins = append(ins,
				fmt.Sprintf("INSERT INTO %s.child (id, pid) VALUES (%d, %d)", d, p*10+k, p),
				fmt.Sprintf("INSERT INTO %s.child_n VALUES (%d, %d)", d, p*10+k, p),
				fmt.Sprintf("INSERT INTO %s.grand VALUES (%d, %d)", d, (p*10+k)*10+1, p*10+k))
		}
	}
	ins = append(ins, "INSERT INTO "+d+".strict_c VALUES (1, 7), (2, 8)")
	sandboxtest.MustExec(t, src, ins...)
	sandboxtest.MustExec(t, src,
		// Cascades over two levels, and SET NULL.
		"DELETE FROM "+d+".parent WHERE id IN (1,2,3)",
		// ON UPDATE CASCADE into child and child_n, and on from child's
		// key to grand (none changes: child's own id stays).
		"UPDATE "+d+".parent SET id=id+1000 WHERE id <= 6",
		// Keys the cascades took away come back.
		"INSERT INTO "+d+".parent VALUES (1, 100)",
		"INSERT INTO "+d+".child (id, pid) VALUES (11, 1)",
		"INSERT INTO "+d+".grand VALUES (111, 11)",
		"INSERT INTO "+d+".child_n VALUES (11, 1) ON DUPLICATE KEY UPDATE pid=1",
	)
	// Many small transactions on parent and child keys alike: with four
	// workers and groups of one, a child change may only run after its
	// parent's, and a parent delete after its children's.
	var small []string
	for i := 20; i < 60; i++ {
		small = append(small,
			fmt.Sprintf("INSERT INTO %s.parent VALUES (%d, 0)", d, i),
			fmt.Sprintf("INSERT INTO %s.child (id, pid) VALUES (%d, %d)", d, i*10, i),
			fmt.Sprintf("INSERT INTO %s.strict_c VALUES (%d, %d)", d, i, i),
			fmt.Sprintf("UPDATE %s.child SET v=v+1 WHERE id=%d", d, i*10))
		if i%2 == 0 {
			small = append(small,
				fmt.Sprintf("DELETE FROM %s.strict_c WHERE id=%d", d, i),
				fmt.Sprintf("DELETE FROM %s.parent WHERE id=%d", d, i),
				// A cascaded-away key, inserted again at once.
				fmt.Sprintf("INSERT INTO %s.child (id, pid) VALUES (%d, 1)", d, i*10))
		}
	}
	sandboxtest.MustExec(t, src, small...)
	// A cascade that takes a while on the target, and then the last child
	// it removes inserted again at once: the insert names no key the
	// delete names, so only the barrier keeps it behind the cascade (on
	// another worker it would find the row still there).
	many, filler := make([]string, 3000), make([]string, 3000)
	for i := range many {
		many[i] = fmt.Sprintf("(%d, 500)", 100000+i)
		filler[i] = fmt.Sprintf("(%d, 7)", 200000+i)
	}
	sandboxtest.MustExec(t, src,
		"INSERT INTO "+d+".parent VALUES (500, 0)",
		"INSERT INTO "+d+".child (id, pid) VALUES "+strings.Join(many, ","),
		"INSERT INTO "+d+".child_n (id, pid) VALUES "+strings.Join(filler, ","),
	)
	// Applied and committed first, so that nothing uncommitted links the
	// two transactions below.
	opts := runOpts{task: task, workers: 4, batch: 1, maxBatch: 1, relaxed: relaxed, until: sourcePos(t, src)}
	if _, err := replicate(context.Background(), srcInst, opts); err != nil {
		t.Fatal(err)
	}
	// The cascade comes after 3000 row statements of its transaction.
	execOn(t, src,
		"BEGIN",
		"UPDATE "+d+".child_n SET pid=8 WHERE id >= 200000",
		"DELETE FROM "+d+".parent WHERE id=500",
		"COMMIT")
	sandboxtest.MustExec(t, src,
		"INSERT INTO "+d+".child (id, pid) VALUES (102999, 1)",
	)
	// A source session without the checks: nothing cascades or is checked
	// there, and so nothing on the target either (rows and DDL).
	execOn(t, src,
		"SET SESSION foreign_key_checks=0",
		"DELETE FROM "+d+".parent WHERE id=1004",
		"INSERT INTO "+d+".child (id, pid) VALUES (999, 9999)",
		"DROP TABLE "+d+".p2")
	opts.until = sourcePos(t, src)
	if _, err := replicate(context.Background(), srcInst, opts); err != nil {
		t.Fatal(err)
	}
	sameTables(t, src, dst, d+".parent", d+".child", d+".child_n", d+".grand", d+".strict_c", d+".c2")
	var n int
	if err := dst.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA=? AND TABLE_NAME='p2'", d).Scan(&n); err != nil || n != 0 {
		t.Fatalf("p2 on the target: %d tables, %v; want it dropped", n, err)
	}
	// The target's sessions are left with the checks on: a row the source
	// refused would be refused here too.
	if err := dst.QueryRow("SELECT COUNT(*) FROM " + d + ".child WHERE pid=1004").Scan(&n); err != nil || n != 3 {
		t.Fatalf("children of 1004 left by the unchecked delete: %d, %v; want 3", n, err)
	}
}

// TestFKWritesets: a child row's foreign key values are hashed as its
// parent's key, so parent and child changes of one key conflict; a change
// that cascades makes its group a barrier.
func TestFKWritesets(t *testing.T) {
	ctx := context.Background()
	dst := sandboxtest.MustOpen(t, dstInst, "")
	sandboxtest.MustExec(t, dst,
		"CREATE DATABASE fkw",
		"CREATE TABLE fkw.parent (id INT PRIMARY KEY, v INT)",
		"CREATE TABLE fkw.child (id INT PRIMARY KEY, pid INT, FOREIGN KEY (pid) REFERENCES parent(id) ON DELETE CASCADE ON UPDATE CASCADE)",
		"CREATE TABLE fkw.parent_r (id VARCHAR(10) PRIMARY KEY, v INT)",
		"CREATE TABLE fkw.child_r (id INT PRIMARY KEY, pid VARCHAR(10), FOREIGN KEY (pid) REFERENCES parent_r(id))",
		"CREATE TABLE fkw.keyless_c (pid INT, FOREIGN KEY (pid) REFERENCES parent(id))",
	)
	tables := map[string]*sluice.Table{}
	for _, n := range []string{"parent", "child", "parent_r", "child_r", "keyless_c"} {
		tb, err := schema.Inspect(ctx, dst, sluice.TableRef{Schema: "fkw", Name: n})
		if err != nil {
			t.Fatal(err)
		}
		tables[n] = tb
	}
	ws := func(table string, c sluice.RowChange) ([]uint64, bool) {
		t.Helper()
		k, b, err := apply.Writeset(ctx, dst, tables[table], c)
		if err != nil {
			t.Fatal(err)
		}
		return k, b
	}
	overlap := func(a, b []uint64) bool {
		for _, x := range a {
			for _, y := range b {
				if x == y {
					return true
				}
			}
		}
		return false
	}
	ins := func(row ...any) sluice.RowChange { return sluice.RowChange{Kind: sluice.Insert, After: row} }
	del := func(row ...any) sluice.RowChange { return sluice.RowChange{Kind: sluice.Delete, Before: row} }
	upd := func(before, after []any) sluice.RowChange {
		return sluice.RowChange{Kind: sluice.Update, Before: before, After: after}
	}
	p5, _ := ws("parent", ins(int32(5), int32(1)))
	p6, _ := ws("parent", ins(int32(6), int32(1)))
	c5, cb := ws("child", ins(int32(10), int32(5)))
	k5, _ := ws("keyless_c", ins(int32(5)))
	if !overlap(p5, c5) || !overlap(p5, k5) {
		t.Errorf("a parent insert and its child's insert do not conflict")
	}
	if overlap(p6, c5) {
		t.Errorf("a child conflicts with another parent")
	}
	if cb {
		t.Errorf("a child insert is a barrier")
	}
	// RESTRICT: no barrier, but the parent's delete conflicts with the
	// child's delete, under the column's collation ('a' = 'A ').
	pr, prb := ws("parent_r", del("a", int32(1)))
	cr, _ := ws("child_r", del(int32(1), "A "))
	if !overlap(pr, cr) || prb {
		t.Errorf("RESTRICT: parent and child deletes conflict %v, parent delete barrier %v; want true, false", overlap(pr, cr), prb)
	}
	if _, b := ws("parent", del(int32(5), int32(1))); !b {
		t.Errorf("a delete under ON DELETE CASCADE is not a barrier")
	}
	if _, b := ws("parent", upd([]any{int32(5), int32(1)}, []any{int32(5), int32(2)})); b {
		t.Errorf("an update of a parent's other column is a barrier")
	}
	if _, b := ws("parent", upd([]any{int32(5), int32(1)}, []any{int32(7), int32(1)})); !b {
		t.Errorf("a key update under ON UPDATE CASCADE is not a barrier")
	}
	c := del(int32(5), int32(1))
	c.NoFKChecks = true
	if _, b := ws("parent", c); b {
		t.Errorf("a delete without foreign key checks is a barrier")
	}
}

// TestTargetTriggersRefused (issue 29, N12): a replicated table with
// triggers on the target stops the task before its first row, naming the
// triggers: they would fire for replicated rows, which a MariaDB replica
// never does, and double what the source's triggers wrote.
func TestTargetTriggersRefused(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	seed(t, "trg", src)
	sandboxtest.MustExec(t, src,
		"CREATE DATABASE trg",
		"CREATE TABLE trg.t (id INT PRIMARY KEY, v INT)",
		"CREATE TABLE trg.log (id INT AUTO_INCREMENT PRIMARY KEY, tid INT)",
	)
	until := sourcePos(t, src)
	if _, err := replicate(context.Background(), srcInst, runOpts{task: "trg", until: until}); err != nil {
		t.Fatal(err)
	}
	sandboxtest.MustExec(t, dst, "CREATE TRIGGER trg.t_ai AFTER INSERT ON trg.t FOR EACH ROW INSERT INTO trg.log (tid) VALUES (NEW.id)")
	sandboxtest.MustExec(t, src, "INSERT INTO trg.t VALUES (1, 1), (2, 2)")
	until = sourcePos(t, src)
	_, err := replicate(context.Background(), srcInst, runOpts{task: "trg", until: until})
	if !errors.Is(err, apply.ErrTargetTriggers) {
		t.Fatalf("got %v, want ErrTargetTriggers", err)
	}
	var se *sluice.Error
	if !errors.As(err, &se) || !strings.Contains(se.Error(), "trg.t_ai") || !strings.Contains(se.Hint, "drop") {
		t.Fatalf("the error names neither the trigger nor the fix: %v", err)
	}
	t.Logf("error shown to the user: %v", err)
	var n int
	if err := dst.QueryRow("SELECT (SELECT COUNT(*) FROM trg.t) + (SELECT COUNT(*) FROM trg.log)").Scan(&n); err != nil || n != 0 {
		t.Fatalf("rows on the target: %d, %v; want none", n, err)
	}
	// Dropped on the target, the task goes on.
	sandboxtest.MustExec(t, dst, "DROP TRIGGER trg.t_ai")
	if _, err := replicate(context.Background(), srcInst, runOpts{task: "trg", until: until}); err != nil {
		t.Fatal(err)
	}
	sameTables(t, src, dst, "trg.t", "trg.log")
}

// TestCheckConstraintsNotRechecked (issue 29, N13): a row the source wrote
// with check_constraint_checks=0 is applied, as a MariaDB replica applies
// it.
func TestCheckConstraintsNotRechecked(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	seed(t, "ccc", src)
	sandboxtest.MustExec(t, src,
		"CREATE DATABASE ccc",
		"CREATE TABLE ccc.t (id INT PRIMARY KEY, v INT)",
		"INSERT INTO ccc.t VALUES (1, 1)",
	)
	until := sourcePos(t, src)
	if _, err := replicate(context.Background(), srcInst, runOpts{task: "ccc", until: until}); err != nil {
		t.Fatal(err)
	}
	// The constraint is added on each side by hand, not replicated: the
	// DDL's rendering is another matter (N8).
	execOn(t, src, "SET SESSION sql_log_bin=0", "ALTER TABLE ccc.t ADD CONSTRAINT pos CHECK (v > 0)")
	sandboxtest.MustExec(t, dst, "ALTER TABLE ccc.t ADD CONSTRAINT pos CHECK (v > 0)")
	execOn(t, src,
		"SET SESSION check_constraint_checks=0",
		"INSERT INTO ccc.t VALUES (2, -2)",
		"UPDATE ccc.t SET v=-1 WHERE id=1")
	until = sourcePos(t, src)
	if _, err := replicate(context.Background(), srcInst, runOpts{task: "ccc", until: until}); err != nil {
		t.Fatal(err)
	}
	sameTables(t, src, dst, "ccc.t")
}
