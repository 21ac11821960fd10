package apply_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sluice-db/sluice/apply"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestDDLRerunAfterCrash covers a crash after a DDL ran on the target but
// before its checkpoint was written: the restart replays the DDL, which for
// a RENAME TABLE fails with "table does not exist". The pending-DDL mark in
// the checkpoint makes sluice accept that for this one statement and go on.
func TestDDLRerunAfterCrash(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	seed(t, "ddlcrash", src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE dr", "CREATE TABLE dr.t (id INT PRIMARY KEY)", "INSERT INTO dr.t VALUES (1)")
	ctx := context.Background()
	if _, err := replicate(ctx, srcInst, runOpts{task: "ddlcrash", until: sourcePos(t, src)}); err != nil {
		t.Fatal(err)
	}
	sandboxtest.MustExec(t, src, "RENAME TABLE dr.t TO dr.t2")
	ddlEnd := sourcePos(t, src)
	sandboxtest.MustExec(t, src, "INSERT INTO dr.t2 VALUES (2)")
	until := sourcePos(t, src)
	// What a crash leaves behind: the DDL done, the checkpoint before it,
	// the DDL marked pending.
	sandboxtest.MustExec(t, dst, "RENAME TABLE dr.t TO dr.t2")
	if _, err := dst.Exec("UPDATE sluice_meta.apply_checkpoint SET ddl_pending=? WHERE task='ddlcrash' AND worker=-1", ddlEnd.String()); err != nil {
		t.Fatal(err)
	}
	st, err := replicate(ctx, srcInst, runOpts{task: "ddlcrash", until: until})
	if err != nil {
		t.Fatalf("restart after a crash inside DDL: %v", err)
	}
	if st.DDL != 1 {
		t.Fatalf("DDL applied %d, want 1", st.DDL)
	}
	sameTables(t, src, dst, "dr.t2")

	// Without the mark the same situation is an error, not silently skipped.
	sandboxtest.MustExec(t, src, "RENAME TABLE dr.t2 TO dr.t3")
	until = sourcePos(t, src)
	sandboxtest.MustExec(t, dst, "RENAME TABLE dr.t2 TO dr.t3")
	if _, err := replicate(ctx, srcInst, runOpts{task: "ddlcrash", until: until}); err == nil {
		t.Fatal("a DDL failing on the target without a pending mark must stop replication")
	}
}

// TestRenameSwapRerunAfterCrash: a crash after a RENAME TABLE swap ran on the
// target but before its checkpoint. Run again, the same statement succeeds
// and swaps the tables back, so every later change would land in the other
// table (the difftest's bug I). The marker renamed in the same statement
// tells the restart that the swap is done. Both a swap of tables of one
// definition (nothing but the marker can tell) and of different ones.
func TestRenameSwapRerunAfterCrash(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	seed(t, "swapcrash", src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE sw",
		"CREATE TABLE sw.a (id INT PRIMARY KEY, v INT)", "CREATE TABLE sw.b (id INT PRIMARY KEY, v INT)",
		"CREATE TABLE sw.c (id INT PRIMARY KEY, w VARCHAR(5))",
		"INSERT INTO sw.a VALUES (1, 10)", "INSERT INTO sw.b VALUES (2, 20)", "INSERT INTO sw.c VALUES (3, 'x')")
	ctx := context.Background()
	if _, err := replicate(ctx, srcInst, runOpts{task: "swapcrash", until: sourcePos(t, src)}); err != nil {
		t.Fatal(err)
	}
	sandboxtest.MustExec(t, src, "RENAME TABLE sw.a TO sw.tmp, sw.b TO sw.a, sw.tmp TO sw.b",
		"RENAME TABLE sw.a TO sw.tmp, sw.c TO sw.a, sw.tmp TO sw.c",
		"INSERT INTO sw.a VALUES (4, 'y')", "UPDATE sw.b SET v = 11 WHERE id = 1", "UPDATE sw.c SET v = 21 WHERE id = 2")
	until := sourcePos(t, src)
	// The first run of each DDL dies right after the statement; its rerun
	// (the next run of the applier) lives. So run 1 dies after swap 1, run
	// 2 reruns swap 1 and dies after swap 2, run 3 reruns swap 2 and ends.
	calls, crashes := 0, 0
	undo := apply.SetAfterDDLHook(func() error {
		calls++
		if calls%2 == 0 {
			return nil
		}
		crashes++
		return errors.New("simulated crash between a DDL and its checkpoint")
	})
	defer undo()
	for i := 0; i < 2; i++ {
		if _, err := replicate(ctx, srcInst, runOpts{task: "swapcrash", until: until}); err == nil {
			t.Fatalf("run %d: the simulated crash did not stop the applier", i+1)
		}
	}
	if _, err := replicate(ctx, srcInst, runOpts{task: "swapcrash", until: until}); err != nil {
		t.Fatalf("restart after crashes inside RENAME swaps: %v", err)
	}
	if crashes != 2 || calls != 4 {
		t.Fatalf("%d simulated crashes in %d DDL runs, want 2 in 4", crashes, calls)
	}
	sameTables(t, src, dst, "sw.a", "sw.b", "sw.c")
	var left int
	if err := dst.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA='sluice_meta' AND TABLE_NAME LIKE '\\_sluice\\_rename%'").Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		var names []string
		rs, _ := dst.Query("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA='sluice_meta'")
		for rs.Next() {
			var n string
			_ = rs.Scan(&n)
			names = append(names, n)
		}
		t.Fatalf("%d rename markers left in sluice_meta: %v", left, names)
	}
}
