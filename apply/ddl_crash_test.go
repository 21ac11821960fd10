package apply_test

import (
	"context"
	"testing"

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
