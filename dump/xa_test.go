package dump_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/dump"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestSnapshotRefusesPreparedXA: a transaction prepared before the snapshot
// is in neither the copy (uncommitted) nor the stream that starts at the
// snapshot's position (its prepare group is before it), so its XA COMMIT
// could not be applied exactly. A copy that replication follows refuses
// to take its snapshot while XA RECOVER lists one, naming the XID; a copy
// alone does not care. Before the fix the snapshot was taken and the
// replication stopped later, at the XA COMMIT, with the copy to redo.
func TestSnapshotRefusesPreparedXA(t *testing.T) {
	db := sandboxtest.MustOpen(t, src, "")
	sandboxtest.MustExec(t, db, "DROP DATABASE IF EXISTS xap", "CREATE DATABASE xap",
		"CREATE TABLE xap.t (id INT PRIMARY KEY, v INT)", "INSERT INTO xap.t VALUES (1, 0), (2, 0)")
	ctx := context.Background()
	a, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, q := range []string{"XA START 'h3xa'", "UPDATE xap.t SET v = 1 WHERE id = 1", "XA END 'h3xa'", "XA PREPARE 'h3xa'"} {
		if _, err := a.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	prepared := true
	defer func() {
		if prepared {
			_, _ = a.ExecContext(ctx, "XA ROLLBACK 'h3xa'")
		}
	}()
	cfg := dump.DefaultConfig()
	cfg.Source, cfg.Threads, cfg.LockWait = src.Endpoint(), 1, 30*time.Second
	cfg.Select = func(r sluice.TableRef) bool { return r.Schema == "xap" }

	alone, err := dump.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("a copy alone: %v", err)
	}
	alone.Close()

	cfg.RefusePreparedXA = true
	d, err := dump.Open(ctx, cfg)
	if err == nil {
		d.Close()
		t.Fatal("the snapshot was taken while an XA transaction was prepared")
	}
	var se *sluice.Error
	if !errors.Is(err, dump.ErrPreparedXA) || !errors.As(err, &se) || se.Hint == "" {
		t.Fatalf("error %v: want dump.ErrPreparedXA with a fix", err)
	}
	// The XID as XA COMMIT takes it (FORMAT='SQL').
	if msg := err.Error(); !strings.Contains(msg, "'h3xa'") || strings.Contains(msg, "\n") || !strings.Contains(msg, "XA ROLLBACK") {
		t.Fatalf("error %q: want one line naming 'h3xa' and the fix", msg)
	}
	// The refusal released the global read lock.
	if _, err := db.ExecContext(ctx, "INSERT INTO xap.t VALUES (3, 0)"); err != nil {
		t.Fatalf("write after the refusal: %v", err)
	}

	// A statement waiting for the prepared transaction's row lock holds
	// FLUSH TABLES WITH READ LOCK off: the timeout names the XA.
	b, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 600"); err != nil {
		t.Fatal(err)
	}
	bDone := make(chan error, 1)
	go func() {
		_, err := b.ExecContext(ctx, "UPDATE xap.t SET v = 2 WHERE id = 1")
		bDone <- err
	}()
	waitProcess(t, db, "UPDATE xap.t SET v = 2", "")
	cfg.RefusePreparedXA, cfg.LockWait = false, 2*time.Second
	if d, err := dump.Open(ctx, cfg); err == nil {
		d.Close()
		t.Fatal("FLUSH TABLES WITH READ LOCK succeeded behind a waiting UPDATE")
	} else if !strings.Contains(err.Error(), "prepared XA") || !strings.Contains(err.Error(), "'h3xa'") {
		t.Fatalf("lock timeout %q: want it to name the prepared XA 'h3xa'", err)
	}

	if _, err := a.ExecContext(ctx, "XA ROLLBACK 'h3xa'"); err != nil {
		t.Fatal(err)
	}
	prepared = false
	if err := <-bDone; err != nil {
		t.Fatal(err)
	}
	cfg.RefusePreparedXA, cfg.LockWait = true, 30*time.Second
	d, err = dump.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("with no prepared XA: %v", err)
	}
	d.Close()
}
