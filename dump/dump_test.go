package dump_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/dump"
	"github.com/sluice-db/sluice/internal/chunk"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sandbox"
)

var src *sandbox.Instance

func TestMain(m *testing.M) { os.Exit(sandboxtest.Run(m, sandboxtest.Want{Name: "src", Inst: &src})) }

// memSink counts what the dumper writes, per table.
type memSink struct {
	mu    sync.Mutex
	rows  map[string]int64
	lines map[string]int64
}

type memChunk struct {
	s     *memSink
	table string
	buf   bytes.Buffer
}

func (s *memSink) OpenChunk(_ context.Context, t *sluice.Table, _ chunk.Range) (dump.ChunkWriter, error) {
	return &memChunk{s: s, table: t.Ref.Name}, nil
}

func (c *memChunk) Write(p []byte) (int, error) { return c.buf.Write(p) }
func (c *memChunk) Abort(error)                 {}
func (c *memChunk) Commit(rows int64) error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	c.s.rows[c.table] += rows
	c.s.lines[c.table] += int64(bytes.Count(c.buf.Bytes(), []byte{'\n'}))
	return nil
}

func gtidSeq(t *testing.T, set string) int64 {
	t.Helper()
	// MariaDB: domain-server-seq; the sandbox writes one domain.
	parts := strings.Split(set, "-")
	n, err := strconv.ParseInt(parts[len(parts)-1], 10, 64)
	if err != nil {
		t.Fatalf("gtid set %q: %v", set, err)
	}
	return n
}

// TestSnapshotIsConsistent dumps two tables on four connections while a
// writer commits transactions that each add one row to both. Every
// connection must see the same snapshot (equal counts), and the recorded
// GTID position must be exactly the point of that snapshot.
func TestSnapshotIsConsistent(t *testing.T) {
	db := sandboxtest.MustOpen(t, src, "")
	sandboxtest.MustExec(t, db, "DROP DATABASE IF EXISTS snap", "CREATE DATABASE snap",
		"CREATE TABLE snap.a (id INT AUTO_INCREMENT PRIMARY KEY, v INT)",
		"CREATE TABLE snap.b (id INT AUTO_INCREMENT PRIMARY KEY, v INT)",
		"INSERT INTO snap.a (v) SELECT seq FROM snap.seq_1_to_2000",
		"INSERT INTO snap.b (v) SELECT seq FROM snap.seq_1_to_2000")
	var g0 string
	if err := db.QueryRow("SELECT @@gtid_binlog_pos").Scan(&g0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var commits atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			tx, err := db.Begin()
			if err != nil {
				return
			}
			_, err1 := tx.Exec("INSERT INTO snap.a (v) VALUES (1)")
			_, err2 := tx.Exec("INSERT INTO snap.b (v) VALUES (1)")
			if err1 != nil || err2 != nil || tx.Commit() != nil {
				tx.Rollback()
				return
			}
			commits.Add(1)
		}
	}()
	defer func() { cancel(); wg.Wait() }()
	for commits.Load() < 50 {
		// Let the writer get going so the snapshot lands mid-stream.
		time.Sleep(time.Millisecond)
	}
	cfg := dump.DefaultConfig()
	cfg.Source, cfg.Threads, cfg.RowsPerChunk = src.Endpoint(), 4, 97
	cfg.Select = func(r sluice.TableRef) bool { return r.Schema == "snap" }
	d, err := dump.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	sink := &memSink{rows: map[string]int64{}, lines: map[string]int64{}}
	if err := d.Run(context.Background(), sink); err != nil {
		t.Fatal(err)
	}
	cancel()
	wg.Wait()
	a, b := sink.rows["a"], sink.rows["b"]
	if a != b {
		t.Fatalf("inconsistent snapshot: a has %d rows, b has %d", a, b)
	}
	if sink.lines["a"] != a {
		t.Fatalf("a: %d lines written for %d rows", sink.lines["a"], a)
	}
	pos := d.Position()
	if pos.File == "" || pos.Flavor != "mariadb" {
		t.Fatalf("position %+v lacks the binlog file or flavour", pos)
	}
	if want := 2000 + gtidSeq(t, pos.GTIDSet) - gtidSeq(t, g0); a != want {
		t.Fatalf("position %s does not match the data: %d rows, the GTID says %d", pos, a, want)
	}
	if a <= 2050 || a >= 2000+commits.Load() {
		t.Fatalf("snapshot not taken mid-stream: %d rows, %d commits", a, commits.Load())
	}
	if len(d.Tables()) != 2 || len(d.Tables()[0].Chunks) < 20 {
		t.Fatalf("expected two tables of many chunks, got %d tables, %d chunks", len(d.Tables()), len(d.Tables()[0].Chunks))
	}
}

// TestMissingReloadPrivilege: without RELOAD the snapshot cannot be taken,
// and the error says which grant fixes it.
func TestMissingReloadPrivilege(t *testing.T) {
	db := sandboxtest.MustOpen(t, src, "")
	sandboxtest.MustExec(t, db, "CREATE USER IF NOT EXISTS 'noreload'@'127.0.0.1' IDENTIFIED BY 'x'", "GRANT SELECT ON *.* TO 'noreload'@'127.0.0.1'")
	cfg := dump.DefaultConfig()
	cfg.Source = sluice.Endpoint{Host: "127.0.0.1", Port: src.Port, User: "noreload", Password: "x"}
	d, err := dump.Open(context.Background(), cfg)
	if err == nil {
		d.Close()
		t.Fatal("dump without RELOAD succeeded")
	}
	if !strings.Contains(err.Error(), "RELOAD") || !errors.Is(err, sluice.ErrPrivilege) {
		t.Fatalf("error does not name the missing privilege: %v", err)
	}
}
