package e2e_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/logx"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/sandbox"
)

// Package e2e holds the end-to-end tests (gh-ost's localtests): each drives
// replication as a user does, a whole task (reader, relay, decoder,
// applier, or sluice migrate itself) from a real source to a real target,
// and checks what the target stores. The stage packages keep their unit
// tests and their real-server tests of that stage alone.
//
// One source and one target serve every test here; each test uses its own
// schemas.
var srcInst, dstInst *sandbox.Instance

func TestMain(m *testing.M) {
	os.Exit(sandboxtest.Run(m, sandboxtest.Want{Name: "src", Inst: &srcInst}, sandboxtest.Want{Name: "dst", Inst: &dstInst}))
}

func masterStatus(tb testing.TB, db *sql.DB) sluice.Position { return sandboxtest.MasterStatus(tb, db) }

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }

type running struct {
	task   *replicate.Task
	cancel context.CancelFunc
	done   chan error
	ended  bool
	err    error
}

// startTask replicates the schemas in schemas from start.
func startTask(t *testing.T, name string, start sluice.Position, schemas ...string) *running {
	t.Helper()
	return startTaskWith(t, name, start, nil, schemas...)
}

// startTaskWith is startTask with the config changed by mod first.
func startTaskWith(t *testing.T, name string, start sluice.Position, mod func(*replicate.Config), schemas ...string) *running {
	t.Helper()
	cfg := replicate.DefaultConfig(name, t.TempDir())
	cfg.Source, cfg.Target = srcInst.Endpoint(), dstInst.Endpoint()
	cfg.Binlog.Heartbeat = 200 * time.Millisecond
	cfg.Binlog.MinBackoff, cfg.Binlog.MaxBackoff = 50*time.Millisecond, time.Second
	cfg.Apply.Workers, cfg.Apply.Batch = 4, 20
	cfg.StatusEvery = 100 * time.Millisecond
	cfg.RetryMin, cfg.RetryMax = 100*time.Millisecond, time.Second
	cfg.Start = start
	cfg.MetricsAddr = ""
	in := func(s string) bool {
		for _, x := range schemas {
			if strings.EqualFold(s, x) {
				return true
			}
		}
		return false
	}
	cfg.Decode.Selected = func(r sluice.TableRef) bool { return in(r.Schema) }
	cfg.Decode.SchemaSelected = in
	if mod != nil {
		mod(&cfg)
	}
	cfg.Log = logx.New(testWriter{t}, "replicate "+cfg.Name)
	task, err := replicate.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{task: task, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- task.Run(ctx, nil) }()
	t.Cleanup(func() {
		cancel()
		if !r.ended {
			r.err, r.ended = <-r.done, true
		}
	})
	return r
}

func after(p, q sluice.Position) bool { return p.Compare(q) >= 0 }

// waitApplied waits until the task has applied the source up to pos, and
// fails the test with the task's error if it stops first.
func (r *running) waitApplied(t *testing.T, pos sluice.Position) {
	t.Helper()
	sandboxtest.Eventually(t, 2*time.Minute, fmt.Sprintf("the task applied %s", pos), func() bool {
		s := r.task.Status()
		if after(s.Applied, pos) {
			return true
		}
		select {
		case err := <-r.done:
			r.err, r.ended = err, true
			t.Fatalf("task ended before applying %s (at %s): %v", pos, s.Applied, err)
		default:
		}
		return false
	}, func() string { return fmt.Sprintf("at %s", r.task.Status().Applied) })
}

// hexRows reads every row of schema.table as the HEX() of every column
// (NULL distinct), sorted: a keyless table compares as a multiset.
func hexRows(t *testing.T, db *sql.DB, schema, table string) []string {
	t.Helper()
	rows, err := db.Query(`SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`, schema, table)
	if err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		exprs = append(exprs, "IFNULL(HEX("+sluice.QuoteIdent(name)+"), 'NULL')")
	}
	rows.Close()
	if len(exprs) == 0 {
		t.Fatalf("%s.%s: no such table", schema, table)
	}
	rs, err := db.Query("SELECT CONCAT_WS('|', " + strings.Join(exprs, ", ") + ") FROM " + sluice.TableRef{Schema: schema, Name: table}.Quoted())
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var out []string
	for rs.Next() {
		var s string
		if err := rs.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func showCreate(t *testing.T, db *sql.DB, ref sluice.TableRef) string {
	t.Helper()
	var name, create string
	if err := db.QueryRow("SHOW CREATE TABLE "+ref.Quoted()).Scan(&name, &create); err != nil {
		t.Fatal(err)
	}
	return create
}

func checksum(t *testing.T, db *sql.DB, ref sluice.TableRef) string {
	t.Helper()
	var name string
	var sum sql.NullInt64
	if err := db.QueryRow("CHECKSUM TABLE "+ref.Quoted()+" EXTENDED").Scan(&name, &sum); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprint(sum)
}

// sameTables compares the tables on both servers with CHECKSUM TABLE and
// the HEX() of every column of every row; it prints the first differences.
func sameTables(t *testing.T, schema string, tables ...string) {
	t.Helper()
	src, dst := sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, "")
	for _, tb := range tables {
		ref := sluice.TableRef{Schema: schema, Name: tb}
		a, b := hexRows(t, src, schema, tb), hexRows(t, dst, schema, tb)
		shown := 0
		for i := 0; i < len(a) || i < len(b); i++ {
			var x, y string
			if i < len(a) {
				x = a[i]
			}
			if i < len(b) {
				y = b[i]
			}
			if x != y && shown < 5 {
				t.Errorf("%s: row %d differs:\nsource: %s\ntarget: %s", ref, i, x, y)
				shown++
			}
		}
		if len(a) != len(b) {
			t.Errorf("%s: %d rows on the source, %d on the target", ref, len(a), len(b))
		}
		if a, b := showCreate(t, src, ref), showCreate(t, dst, ref); a != b {
			t.Errorf("%s: definitions differ:\nsource: %s\ntarget: %s", ref, a, b)
		}
		if cs, cd := checksum(t, src, ref), checksum(t, dst, ref); cs != cd {
			t.Errorf("%s: CHECKSUM TABLE differs: source %s, target %s", ref, cs, cd)
		}
	}
}
