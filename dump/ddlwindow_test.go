package dump_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/dump"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestDDLBetweenInspectAndSnapshot runs DDL after the dumper has read the
// tables and before its snapshot (difftest bug D): a column dropped, a
// table dropped, a table renamed, a table created. The dump must describe
// and read the tables as the snapshot has them, not fail with "Unknown
// column" or "doesn't exist".
func TestDDLBetweenInspectAndSnapshot(t *testing.T) {
	db := sandboxtest.MustOpen(t, src, "")
	sandboxtest.MustExec(t, db, "DROP DATABASE IF EXISTS dw", "CREATE DATABASE dw",
		"CREATE TABLE dw.a (id INT PRIMARY KEY, c1 INT, c2 VARCHAR(10))",
		"INSERT INTO dw.a SELECT seq, seq, 'x' FROM dw.seq_1_to_100",
		"CREATE TABLE dw.gone (id INT PRIMARY KEY)", "INSERT INTO dw.gone VALUES (1)",
		"CREATE TABLE dw.old (id INT PRIMARY KEY)", "INSERT INTO dw.old VALUES (1), (2)")
	attempts := 0
	dump.SetAfterInspectHook(func(attempt int) {
		attempts = attempt
		if attempt == 1 {
			sandboxtest.MustExec(t, db, "ALTER TABLE dw.a DROP COLUMN c2", "DROP TABLE dw.gone",
				"RENAME TABLE dw.old TO dw.new", "CREATE TABLE dw.made (id INT PRIMARY KEY)", "INSERT INTO dw.made VALUES (5)")
		}
	})
	defer dump.SetAfterInspectHook(nil)
	cfg := dump.DefaultConfig()
	cfg.Source, cfg.Threads, cfg.RowsPerChunk = src.Endpoint(), 2, 30
	cfg.Select = func(r sluice.TableRef) bool { return r.Schema == "dw" }
	d, err := dump.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if attempts != 2 {
		t.Errorf("the tables were read %d times, want 2 (once more after the DDL)", attempts)
	}
	var names []string
	for _, tp := range d.Tables() {
		names = append(names, tp.Table.Ref.Name)
		if tp.Table.Ref.Name == "a" && len(tp.Table.Columns) != 2 {
			t.Errorf("dw.a is described with %d columns, the snapshot has 2", len(tp.Table.Columns))
		}
	}
	if want := []string{"a", "made", "new"}; !slices.Equal(names, want) {
		t.Errorf("tables %v, the snapshot has %v", names, want)
	}
	sink := &memSink{rows: map[string]int64{}, lines: map[string]int64{}}
	if err := d.Run(context.Background(), sink); err != nil {
		t.Fatal(err)
	}
	if sink.rows["a"] != 100 || sink.rows["new"] != 2 || sink.rows["made"] != 1 {
		t.Errorf("rows read: %v", sink.rows)
	}
}

// TestDDLKeepsComing: a DDL lands in the window on every attempt but the
// last, which reads the tables under the snapshot's lock (DDL waits).
func TestDDLKeepsComing(t *testing.T) {
	db := sandboxtest.MustOpen(t, src, "")
	sandboxtest.MustExec(t, db, "DROP DATABASE IF EXISTS dk", "CREATE DATABASE dk",
		"CREATE TABLE dk.a (id INT PRIMARY KEY, c0 INT)", "INSERT INTO dk.a SELECT seq, seq FROM dk.seq_1_to_50")
	attempts := 0
	dump.SetAfterInspectHook(func(attempt int) {
		attempts = attempt
		sandboxtest.MustExec(t, db, fmt.Sprintf("ALTER TABLE dk.a ADD COLUMN c%d INT DEFAULT %d", attempt, attempt))
	})
	defer dump.SetAfterInspectHook(nil)
	cfg := dump.DefaultConfig()
	cfg.Source, cfg.Threads, cfg.RowsPerChunk = src.Endpoint(), 2, 20
	cfg.Select = func(r sluice.TableRef) bool { return r.Schema == "dk" }
	d, err := dump.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var cols int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'dk' AND TABLE_NAME = 'a'").Scan(&cols); err != nil {
		t.Fatal(err)
	}
	if attempts != 3 || len(d.Tables()) != 1 || len(d.Tables()[0].Table.Columns) != cols {
		t.Fatalf("after %d attempts the dump describes dk.a with %d columns, the source has %d", attempts, len(d.Tables()[0].Table.Columns), cols)
	}
	sink := &memSink{rows: map[string]int64{}, lines: map[string]int64{}}
	if err := d.Run(context.Background(), sink); err != nil {
		t.Fatal(err)
	}
}
