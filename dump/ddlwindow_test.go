package dump_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/dump"
	"github.com/sluice-db/sluice/internal/chunk"
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

// bytesSink keeps each table's dumped bytes.
type bytesSink struct {
	mu  sync.Mutex
	out map[string]*bytes.Buffer
}

type bytesChunk struct {
	s     *bytesSink
	table string
	buf   bytes.Buffer
}

func (s *bytesSink) OpenChunk(_ context.Context, t *sluice.Table, _ chunk.Range) (dump.ChunkWriter, error) {
	return &bytesChunk{s: s, table: t.Ref.Name}, nil
}

func (c *bytesChunk) Write(p []byte) (int, error) { return c.buf.Write(p) }
func (c *bytesChunk) Abort(error)                 {}
func (c *bytesChunk) Commit(int64) error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if c.s.out[c.table] == nil {
		c.s.out[c.table] = &bytes.Buffer{}
	}
	c.s.out[c.table].Write(c.buf.Bytes())
	return nil
}

// TestDDLAfterSnapshotCannotChangeReads runs DDL after the snapshot and
// before the tables are read (difftest seeds 1102, 1112, 1113). A snapshot
// read does not fail after an instant ALTER or a RENAME: it reads the
// snapshot's rows through the new definition (a column dropped and added
// again reads as the new column's default) or from whatever table has the
// name now. The dump must read what the snapshot holds: the DDL has to
// wait for it.
func TestDDLAfterSnapshotCannotChangeReads(t *testing.T) {
	db := sandboxtest.MustOpen(t, src, "")
	sandboxtest.MustExec(t, db, "DROP DATABASE IF EXISTS dp", "CREATE DATABASE dp",
		// Keyless: the dump plans them without reading them.
		"CREATE TABLE dp.x (a INT, b VARCHAR(10))", "INSERT INTO dp.x VALUES (11, 'x1'), (12, 'x2')",
		"CREATE TABLE dp.y (a INT, b VARCHAR(10))", "INSERT INTO dp.y VALUES (21, 'y1'), (22, 'y2')")
	cfg := dump.DefaultConfig()
	cfg.Source, cfg.Threads = src.Endpoint(), 1
	cfg.Select = func(r sluice.TableRef) bool { return r.Schema == "dp" }
	d, err := dump.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ddl, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer ddl.Close()
	if _, err := ddl.ExecContext(context.Background(), "SET SESSION lock_wait_timeout = 2"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"ALTER TABLE dp.x DROP COLUMN a, ADD COLUMN a INT DEFAULT 99 FIRST", "RENAME TABLE dp.x TO dp.tmp, dp.y TO dp.x, dp.tmp TO dp.y"} {
		if _, err := ddl.ExecContext(context.Background(), q); err == nil {
			t.Logf("%s ran after the snapshot", q)
		}
	}
	sink := &bytesSink{out: map[string]*bytes.Buffer{}}
	if err := d.Run(context.Background(), sink); err != nil {
		t.Fatal(err)
	}
	for tb, want := range map[string][]string{"x": {"11", "12", "x1"}, "y": {"21", "22", "y1"}} {
		got := sink.out[tb].String()
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("dp.%s was dumped as %q, the snapshot holds %v", tb, got, want)
				break
			}
		}
	}
}
