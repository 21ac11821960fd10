package apply_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/apply"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestNonTransactionalGroupRunsAlone: a source transaction that changes a
// non-transactional (Aria) target table must be a target transaction of its
// own, run after every earlier group committed, as MariaDB's parallel
// replica runs a group without FL_TRANSACTIONAL. Here three transactions
// arrive at once: an InnoDB update, an Aria delete, and an InnoDB insert of
// a key the test holds on the target (an uncommitted insert of its own);
// that last group waits and then fails (its session is killed). Before the
// fix the three ran as one target transaction, the delete before the
// insert (a group's deletes run first): its rollback kept the Aria delete
// but not its checkpoint, so the restart from the checkpoint deleted again
// and stopped with "row missing on the target". Now the Aria delete commits
// with its own checkpoint, and the restart applies everything exactly once.
func TestNonTransactionalGroupRunsAlone(t *testing.T) {
	src, dst := sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, "")
	for _, db := range []*sql.DB{src, dst} {
		sandboxtest.MustExec(t, db, "DROP DATABASE IF EXISTS nt_ap", "CREATE DATABASE nt_ap",
			"CREATE TABLE nt_ap.i (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
			"CREATE TABLE nt_ap.a (id INT PRIMARY KEY, v INT) ENGINE=Aria",
			"CREATE TABLE nt_ap.j (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
			"INSERT INTO nt_ap.i VALUES (1, 0)", "INSERT INTO nt_ap.a VALUES (1, 0), (2, 0)")
	}
	const task = "nt_ap"
	seed(t, task, src)
	sandboxtest.MustExec(t, src, "UPDATE nt_ap.i SET v = 1 WHERE id = 1", "DELETE FROM nt_ap.a WHERE id = 1", "INSERT INTO nt_ap.j VALUES (5, 1)")
	until := sourcePos(t, src)
	keep := func(r sluice.TableRef) bool { return r.Schema == "nt_ap" }

	ctx := context.Background()
	hold, err := dst.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	for _, q := range []string{"BEGIN", "INSERT INTO nt_ap.j VALUES (5, 0)"} {
		if _, err := hold.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	var ap atomic.Pointer[apply.Applier]
	done := make(chan error, 1)
	go func() {
		_, err := replicate(ctx, srcInst, runOpts{task: task, workers: 2, keep: keep, until: until,
			after: func(a *apply.Applier) bool { ap.Store(a); return false }})
		done <- err
	}()
	// Observed progress: a group waits for the held key. The Aria delete
	// ran before it, in the same target transaction (before the fix) or
	// committed alone. (Its table is not read meanwhile: an Aria table
	// written in an open transaction stays locked until it ends.)
	var waiting int64
	for limit := time.Now().Add(2 * time.Minute); waiting == 0; {
		_ = dst.QueryRow("SELECT trx_mysql_thread_id FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'").Scan(&waiting)
		if time.Now().After(limit) {
			t.Fatalf("no group waited for the held row")
		}
		select {
		case err := <-done:
			t.Fatalf("replication ended before the waiting group failed: %v", err)
		// The server refreshes its copy of the lock tables only when nobody
		// read it for 100 ms (apply/lockwait.go).
		case <-time.After(150 * time.Millisecond):
		}
	}
	if a := ap.Load(); a != nil {
		st := a.Stats()
		t.Logf("a group waits (session %d); %d source transactions in %d target transactions committed", waiting, st.Txns, st.Commits)
	}
	if _, err := dst.Exec(fmt.Sprintf("KILL %d", waiting)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("replication did not fail when the waiting group's session was killed")
	} else {
		t.Logf("replication failed as planned: %v", err)
	}
	var left int
	if err := dst.QueryRow("SELECT COUNT(*) FROM nt_ap.a").Scan(&left); err != nil {
		t.Fatal(err)
	}
	t.Logf("after the failure the Aria table holds %d row(s) (the source 1)", left)
	if _, err := hold.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	// Restart from the checkpoint, as the task does.
	if _, err := replicate(ctx, srcInst, runOpts{task: task, workers: 2, keep: keep, until: until}); err != nil {
		t.Fatalf("the restart from the checkpoint: %v", err)
	}
	sameTables(t, src, dst, "nt_ap.i", "nt_ap.a", "nt_ap.j")
}
