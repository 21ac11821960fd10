package dump_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/dump"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// waitProcess waits until a session on db runs a statement starting with
// prefix in a state containing state (observed progress, not a sleep).
func waitProcess(t *testing.T, db *sql.DB, prefix, state string) {
	t.Helper()
	sandboxtest.Eventually(t, 5*time.Minute, fmt.Sprintf("a session running %q in state %q", prefix, state), func() bool {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE CONCAT(?, '%') AND STATE LIKE CONCAT('%', ?, '%')", prefix, state).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
}

// TestLockCycleDoesNotStallSource: FLUSH TABLES WITH READ LOCK waits for a
// running UPDATE, which waits for a row lock of an open transaction, whose
// next statement waits for the FLUSH. No deadlock detector sees this cycle;
// a single long FTWRL attempt stalled every write on the source until a
// timeout (difftest seeds 619, 625, 626: about 50 s without a write) and
// then failed the dump. Short attempts with pauses let the transaction go
// on and end, and the dump then gets its snapshot.
func TestLockCycleDoesNotStallSource(t *testing.T) {
	db := sandboxtest.MustOpen(t, src, "")
	sandboxtest.MustExec(t, db, "DROP DATABASE IF EXISTS lc", "CREATE DATABASE lc",
		"CREATE TABLE lc.t (id INT PRIMARY KEY, v INT)", "INSERT INTO lc.t VALUES (1, 0), (2, 0)")
	ctx := context.Background()
	a, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, q := range []string{"BEGIN", "UPDATE lc.t SET v = 1 WHERE id = 1"} {
		if _, err := a.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 600"); err != nil {
		t.Fatal(err)
	}
	bDone := make(chan error, 1)
	go func() {
		_, err := b.ExecContext(ctx, "UPDATE lc.t SET v = 2 WHERE id = 1")
		bDone <- err
	}()
	waitProcess(t, db, "UPDATE lc.t SET v = 2", "")

	cfg := dump.DefaultConfig()
	// Long enough that the old single attempt would wait out the whole
	// test; the fix needs a few seconds at most.
	cfg.Source, cfg.Threads, cfg.LockWait = src.Endpoint(), 2, 30*time.Second
	cfg.Select = func(r sluice.TableRef) bool { return r.Schema == "lc" }
	type opened struct {
		d   *dump.Dumper
		err error
	}
	dumpDone := make(chan opened, 1)
	go func() {
		d, err := dump.Open(ctx, cfg)
		dumpDone <- opened{d, err}
	}()
	waitProcess(t, db, "FLUSH TABLES WITH READ LOCK", "")
	// The transaction's next statement queues behind the pending FTWRL:
	// the cycle is closed.
	if _, err := a.ExecContext(ctx, "INSERT INTO lc.t VALUES (3, 0)"); err != nil {
		t.Fatalf("the open transaction's next write: %v", err)
	}
	if _, err := a.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if err := <-bDone; err != nil {
		t.Fatalf("the waiting UPDATE: %v", err)
	}
	o := <-dumpDone
	if o.err != nil {
		t.Fatalf("dump: %v", o.err)
	}
	defer o.d.Close()
	sink := &memSink{rows: map[string]int64{}, lines: map[string]int64{}}
	if err := o.d.Run(ctx, sink); err != nil {
		t.Fatal(err)
	}
	if sink.rows["t"] != 3 {
		t.Fatalf("snapshot has %d rows of lc.t, want 3 (taken after the transaction committed)", sink.rows["t"])
	}
}
