package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestMigrateDDLAfterSnapshot runs a DDL on a table after a resumed copy
// took its snapshot and before it read the table (difftest seed 1104): the
// snapshot cannot read that table any more ("Unknown column", "Table
// definition has changed"). The copy must go on from a new snapshot by
// itself, as a rerun would, and end with the target equal to the source in
// the table's new definition.
func TestMigrateDDLAfterSnapshot(t *testing.T) {
	inst := sandboxtest.Start(t, "mddl")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE msrc",
		"CREATE TABLE msrc.a (id INT PRIMARY KEY, c1 INT, c2 VARCHAR(10))",
		"INSERT INTO msrc.a SELECT seq, seq, 'x' FROM msrc.seq_1_to_300",
		"CREATE TABLE msrc.b (id INT PRIMARY KEY, c1 INT, c2 VARCHAR(10))",
		"INSERT INTO msrc.b SELECT seq, seq, 'y' FROM msrc.seq_1_to_300")
	ep := inst.Endpoint()
	cfgPath := verifyTask(t, strings.NewReplacer("vsrc", "msrc", "vdst", "mdst", "name: vt", "name: mt").Replace(verifyTaskYAML(ep, ep, "msrc.*", "")))
	migrate := func(ctx context.Context) (string, error) {
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(io.Discard)
		root.SetArgs([]string{"migrate", "--config", cfgPath, "--mode", "full"})
		err := root.ExecuteContext(ctx)
		return out.String(), err
	}

	// The first run stops before it reads a chunk: the rerun then plans
	// from the stored plan and its snapshot touches no table before it
	// reads it, so a DDL does not wait for the dump.
	ctx, cancel := context.WithCancel(context.Background())
	afterPrepare = cancel
	defer func() { afterPrepare = nil }()
	if out, err := migrate(ctx); err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("first run: %v\n%s", err, out)
	}

	prepared := 0
	afterPrepare = func() {
		prepared++
		if prepared == 1 {
			sandboxtest.MustExec(t, db, "SET SESSION lock_wait_timeout = 10",
				"ALTER TABLE msrc.a DROP COLUMN c2", "ALTER TABLE msrc.b ADD COLUMN c3 INT DEFAULT 7")
		}
	}
	out, err := migrate(context.Background())
	if err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	if prepared != 2 || !strings.Contains(out, "the copy goes on from a new snapshot") {
		t.Fatalf("the copy was prepared %d times, want 2, with a line saying why:\n%s", prepared, out)
	}
	for _, tb := range []string{"a", "b"} {
		var srcCols, dstCols int
		q := "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?"
		if err := db.QueryRow(q, "msrc", tb).Scan(&srcCols); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRow(q, "mdst", tb).Scan(&dstCols); err != nil {
			t.Fatal(err)
		}
		var n string
		var srcSum, dstSum int64
		if err := db.QueryRow("CHECKSUM TABLE msrc."+tb+" EXTENDED").Scan(&n, &srcSum); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRow("CHECKSUM TABLE mdst."+tb+" EXTENDED").Scan(&n, &dstSum); err != nil {
			t.Fatal(err)
		}
		if srcCols != dstCols || srcSum != dstSum {
			t.Errorf("table %s: source %d columns, checksum %d; target %d columns, checksum %d\n%s", tb, srcCols, srcSum, dstCols, dstSum, out)
		}
	}
}

// TestMigrateDDLWaitsForSnapshot runs a DDL on a table the snapshot has
// already touched (the dump planned its chunks in it): the DDL waits for
// the snapshot to end, and every later read of the table, the dump's other
// sessions' included, queues behind the DDL. The dump must not wait with
// it (it did, until the DDL gave up, with the source's writers of that
// table stopped meanwhile): it ends its snapshot, the DDL runs, and the
// copy goes on from a new one.
func TestMigrateDDLWaitsForSnapshot(t *testing.T) {
	inst := sandboxtest.Start(t, "mwait")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE wsrc",
		"CREATE TABLE wsrc.a (id INT PRIMARY KEY, c1 INT, c2 VARCHAR(10))",
		"INSERT INTO wsrc.a SELECT seq, seq, 'x' FROM wsrc.seq_1_to_1000")
	ep := inst.Endpoint()
	cfgPath := verifyTask(t, strings.NewReplacer("vsrc", "wsrc", "vdst", "wdst", "name: vt", "name: wt").Replace(verifyTaskYAML(ep, ep, "wsrc.*", "")))

	alter := make(chan error, 1)
	prepared := 0
	afterPrepare = func() {
		prepared++
		if prepared > 1 {
			return
		}
		go func() {
			c, err := db.Conn(context.Background())
			if err != nil {
				alter <- err
				return
			}
			defer c.Close()
			// Bounded so that a dump that waits too makes the test fail,
			// not hang.
			if _, err := c.ExecContext(context.Background(), "SET SESSION lock_wait_timeout = 120"); err != nil {
				alter <- err
				return
			}
			_, err = c.ExecContext(context.Background(), "ALTER TABLE wsrc.a ADD COLUMN c3 INT DEFAULT 3")
			alter <- err
		}()
		for {
			var n int
			if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE = 'Waiting for table metadata lock' AND INFO LIKE 'ALTER TABLE wsrc.a%'").Scan(&n); err != nil {
				t.Error(err)
				return
			}
			if n > 0 {
				return
			}
		}
	}
	defer func() { afterPrepare = nil }()

	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(io.Discard)
	root.SetArgs([]string{"migrate", "--config", cfgPath, "--mode", "full"})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out.String())
	}
	if err := <-alter; err != nil {
		t.Fatalf("the DDL waited for the dump: %v\n%s", err, out.String())
	}
	if prepared < 2 || !strings.Contains(out.String(), "a DDL waits for the snapshot to end") {
		t.Fatalf("the copy was prepared %d times, want a new snapshot after the DDL, with a line saying why:\n%s", prepared, out.String())
	}
	var n string
	var srcSum, dstSum int64
	if err := db.QueryRow("CHECKSUM TABLE wsrc.a EXTENDED").Scan(&n, &srcSum); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("CHECKSUM TABLE wdst.a EXTENDED").Scan(&n, &dstSum); err != nil {
		t.Fatal(err)
	}
	if srcSum != dstSum {
		t.Fatalf("checksum of wsrc.a %d, of wdst.a %d\n%s", srcSum, dstSum, out.String())
	}
}
