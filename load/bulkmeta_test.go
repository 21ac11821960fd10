package load_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-db/sluice/internal/dumpfmt"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/load"
	"github.com/sluice-db/sluice/sqlgen"
)

// TestWholeTableLoadsShareEmptyCheckpointTable: two tables loaded whole at
// once (one transaction each, unique_checks=0 for InnoDB's bulk insert into
// an empty table) both write their checkpoint rows into load_checkpoint.
// When that table is empty too (a task's first checkpoints on a fresh
// target), the checkpoint INSERT must not take the bulk path as well: its
// table X lock is taken after the statement's IX lock, so two transactions
// that both hold IX wait for each other's X and InnoDB kills one with
// Error 1213 (a CI flake of TestRerunWaitsForKilledRunsLastChunk: "load
// kf.k chunk 0: Error 1213 (40001): Deadlock found").
//
// The interleaving is forced: a session of the test takes the table X lock
// of the empty load_checkpoint first (its own bulk INSERT), both loaders
// are seen waiting behind it, and it rolls back, which grants both waiting
// IX locks at once. With the bulk path, each loader then asks for X while
// the other holds IX: a deadlock every time.
func TestWholeTableLoadsShareEmptyCheckpointTable(t *testing.T) {
	const schema, metaSchema = "bulkmeta", "bulkmeta_meta"
	src, dst := sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, "")
	sandboxtest.MustExec(t, src, "DROP DATABASE IF EXISTS "+schema, "CREATE DATABASE "+schema,
		"CREATE TABLE "+schema+".t (id INT PRIMARY KEY, v VARCHAR(20))",
		"INSERT INTO "+schema+".t SELECT seq, CONCAT('v', seq) FROM "+schema+".seq_1_to_1000",
		"CREATE TABLE "+schema+".k (a INT, b VARCHAR(20))",
		"INSERT INTO "+schema+".k SELECT seq % 7, 'x' FROM "+schema+".seq_1_to_500")
	sandboxtest.MustExec(t, dst, "DROP DATABASE IF EXISTS "+schema, "DROP DATABASE IF EXISTS "+metaSchema)
	// A meta schema of its own: the shared sluice_meta holds other tests'
	// checkpoints, and the bulk path is only taken into an empty table.
	sandboxtest.MustExec(t, dst, sqlgen.CheckpointDDL(metaSchema)...)

	cfgPath := taskFile(t, schema, schema+".*", "rows-per-chunk: 200")
	dir := filepath.Join(t.TempDir(), "dump")
	mustSluice(t, "dump", "--config", cfgPath, "--dir", dir)
	m, err := dumpfmt.ReadMetadata(dir)
	if err != nil {
		t.Fatal(err)
	}

	ctx := t.Context()
	cfg := load.DefaultConfig()
	cfg.Target, cfg.Task, cfg.MetaSchema = dstInst.Endpoint(), schema, metaSchema
	cfg.CommitUnit, cfg.PoolSize = load.CommitTable, 2
	l, err := load.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var specs []load.TableSpec
	for _, tm := range m.Tables {
		specs = append(specs, load.TableSpec{Table: tm.Table, Plan: dumpfmt.Plan(tm.Chunks)})
	}
	if len(specs) != 2 {
		t.Fatalf("the dump has %d tables, want 2", len(specs))
	}
	if err := l.Prepare(ctx, m.Position, specs); err != nil {
		t.Fatal(err)
	}

	// The holder: the first insert into the empty load_checkpoint, in a
	// transaction with both checks off, holds the table's X lock.
	holder, err := dst.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	for _, q := range []string{"SET SESSION unique_checks = 0, foreign_key_checks = 0", "BEGIN",
		"INSERT INTO " + metaSchema + ".load_checkpoint (task, tbl, chunk, `rows`, bytes) VALUES ('holder', 'x', 0, 0, 0)"} {
		if _, err := holder.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	l.Start(ctx)
	for _, tm := range m.Tables {
		if !l.WholeTable(tm.Table.Ref) {
			t.Fatalf("%s is not loaded whole", tm.Table.Ref)
		}
		for _, c := range tm.Chunks {
			if err := l.LoadFile(ctx, tm.Table.Ref, c, filepath.Join(dir, c.File)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Both loaders have loaded their table and wait at their checkpoint
	// INSERT behind the holder.
	// (Were the holder's lock not a table X lock, they would not wait and
	// their checkpoint rows would show.)
	waitFor(t, nil, &syncBuffer{}, "both loaders to wait for the checkpoint table", func() bool {
		var waiting, committed int
		_ = dst.QueryRow("SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT' AND trx_query LIKE ?",
			"INSERT INTO `"+metaSchema+"`.load_checkpoint%").Scan(&waiting)
		_ = dst.QueryRow("SELECT COUNT(*) FROM "+metaSchema+".load_checkpoint WHERE task = ?", schema).Scan(&committed)
		if committed > 0 {
			t.Fatalf("a loader committed past the holder's insert into the empty checkpoint table: the server took no table X lock (no bulk insert path), so the test cannot force the interleaving")
		}
		return waiting == 2
	})
	// The fix must not cost the data its bulk path: the loader of t holds
	// t's table X lock, so an insert of a key that no loaded row is near
	// waits (row by row, it would not).
	probe, err := dst.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	var probeID int64
	if err := probe.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&probeID); err != nil {
		t.Fatal(err)
	}
	if _, err := probe.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	probed := make(chan error, 1)
	go func() {
		_, err := probe.ExecContext(ctx, "INSERT INTO "+schema+".t VALUES (1000000, 'probe')")
		probed <- err
	}()
	waitFor(t, nil, &syncBuffer{}, "the probe insert into t to wait", func() bool {
		select {
		case err := <-probed:
			t.Fatalf("an insert into t did not wait for its loader (%v): t was not loaded by the bulk path", err)
		default:
		}
		var n int
		_ = dst.QueryRow("SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT' AND trx_mysql_thread_id = ?", probeID).Scan(&n)
		return n == 1
	})
	if _, err := dst.Exec(fmt.Sprintf("KILL QUERY %d", probeID)); err != nil {
		t.Fatal(err)
	}
	<-probed
	if _, err := probe.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}

	if _, err := holder.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if err := l.Wait(); err != nil {
		t.Fatalf("whole-table loads after the checkpoint table's lock was released: %v\n%s", err, latestDeadlock(t, dst))
	}
	sameTables(t, src, dst, schema, schema)
	var n int
	if err := dst.QueryRow("SELECT COUNT(*) FROM "+metaSchema+".load_checkpoint WHERE task = ?", schema).Scan(&n); err != nil || n != len(m.Tables[0].Chunks)+len(m.Tables[1].Chunks) {
		t.Errorf("%d checkpoint rows (%v), want one per chunk", n, err)
	}
}

// latestDeadlock is the LATEST DETECTED DEADLOCK section of the server's
// InnoDB status, or "".
func latestDeadlock(t *testing.T, db *sql.DB) string {
	t.Helper()
	var typ, name, status string
	if err := db.QueryRow("SHOW ENGINE INNODB STATUS").Scan(&typ, &name, &status); err != nil {
		return ""
	}
	i := strings.Index(status, "LATEST DETECTED DEADLOCK")
	if i < 0 {
		return ""
	}
	s := status[i:]
	if j := strings.Index(s, "\nTRANSACTIONS\n"); j >= 0 {
		s = s[:j]
	}
	return s
}
