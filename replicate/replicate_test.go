package replicate_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/logx"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/sandbox"
	"github.com/sluice-db/sluice/verify"
)

var srcInst, dstInst *sandbox.Instance

func TestMain(m *testing.M) {
	os.Exit(sandboxtest.Run(m, sandboxtest.Want{Name: "src", Inst: &srcInst}, sandboxtest.Want{Name: "dst", Inst: &dstInst}))
}

func masterStatus(tb testing.TB, db *sql.DB) sluice.Position {
	return sandboxtest.MasterStatusGTID(tb, db)
}

func taskConfig(t *testing.T, name string, src, dst *sandbox.Instance, start sluice.Position) replicate.Config {
	cfg := replicate.DefaultConfig(name, t.TempDir())
	cfg.Source, cfg.Target = src.Endpoint(), dst.Endpoint()
	cfg.Binlog.Heartbeat = 200 * time.Millisecond
	cfg.Binlog.MinBackoff, cfg.Binlog.MaxBackoff = 50*time.Millisecond, time.Second
	cfg.Apply.Workers, cfg.Apply.Batch = 4, 20
	cfg.StatusEvery = 100 * time.Millisecond
	cfg.RetryMin, cfg.RetryMax = 100*time.Millisecond, time.Second
	cfg.Start = sluice.Position{File: start.File, Pos: start.Pos}
	cfg.MetricsAddr = "127.0.0.1:0"
	return cfg
}

type running struct {
	task   *replicate.Task
	cancel context.CancelFunc
	done   chan error
	ended  bool
	err    error
}

func run(t *testing.T, cfg replicate.Config) *running {
	t.Helper()
	cfg.Log = logx.New(testWriter{t}, "replicate "+cfg.Name)
	task, err := replicate.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{task: task, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- task.Run(ctx, nil) }()
	// A test that fails before stop must not leave its task replicating:
	// it would stay a replica of the shared source and starve later tests.
	t.Cleanup(func() {
		cancel()
		if !r.ended {
			r.err, r.ended = <-r.done, true
		}
	})
	return r
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	if !r.ended {
		r.err, r.ended = <-r.done, true
	}
	if r.err != nil {
		t.Fatalf("task stopped with %v", r.err)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }

func after(p, q sluice.Position) bool { return p.Compare(q) >= 0 }

// waitApplied waits until the task's applied position reaches pos.
func (r *running) waitApplied(t *testing.T, pos sluice.Position) replicate.Status {
	t.Helper()
	// A bound against a hang only: a loaded machine may take minutes.
	var s replicate.Status
	sandboxtest.Eventually(t, 10*time.Minute, fmt.Sprintf("the task applied %s", pos), func() bool {
		s = r.task.Status()
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
	}, func() string { return fmt.Sprintf("applied %s", s.Applied) })
	return s
}

func sameData(t *testing.T, src, dst *sandbox.Instance, schema string) {
	t.Helper()
	ctx := context.Background()
	s, d := sandboxtest.MustOpen(t, src, ""), sandboxtest.MustOpen(t, dst, "")
	tables, err := verify.SchemaTables(ctx, s, schema)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := verify.Run(ctx, verify.DefaultConfig(), s, d, tables)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Equal() {
		t.Fatalf("source and target differ: %v", rep.Err())
	}
}

func workload(t *testing.T, db *sql.DB, schema string, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		sandboxtest.MustExec(t, db,
			fmt.Sprintf("INSERT INTO %s.t (id, k, v) VALUES (%d, %d, 'v%d')", schema, i, i%7, i),
			fmt.Sprintf("INSERT INTO %s.nokey VALUES (%d, 'row %d')", schema, i%5, i))
		if i%3 == 0 {
			sandboxtest.MustExec(t, db, fmt.Sprintf("UPDATE %s.t SET k=k+1, v=CONCAT(v,'!') WHERE id=%d", schema, i-1))
		}
		if i%10 == 0 {
			sandboxtest.MustExec(t, db, fmt.Sprintf("DELETE FROM %s.t WHERE id=%d", schema, i-5))
		}
	}
}

func TestReplicateStopAndResume(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	start := masterStatus(t, src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE rs", "CREATE TABLE rs.t (id int primary key, k int, v varchar(50))",
		"CREATE TABLE rs.nokey (a int, b varchar(50))")
	cfg := taskConfig(t, "rs", srcInst, dstInst, start)
	cfg.Decode.Selected = func(r sluice.TableRef) bool { return r.Schema == "rs" }
	cfg.Decode.SchemaSelected = func(s string) bool { return s == "rs" }
	r := run(t, cfg)
	workload(t, src, "rs", 1, 60)
	st := r.waitApplied(t, masterStatus(t, src))
	sameData(t, srcInst, dstInst, "rs")
	if st.Txns < 120 || st.Source.File == "" || st.Relay.File == "" || st.Stage != replicate.StageRunning {
		t.Fatalf("status after the first run: %+v", st)
	}
	// The same figures on the Prometheus endpoint. The gauges are refreshed
	// by the status loop once a second, so wait for the stage to show there.
	for {
		resp, err := http.Get("http://" + st.MetricsAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var missing string
		for _, want := range []string{`sluice_replication_lag_seconds{task="rs"}`, `sluice_replication_binlog_offset{position="applied",task="rs"}`,
			`sluice_replication_stage{stage="running",task="rs"} 1`, `sluice_replication_transactions_total{task="rs"}`,
			`# TYPE sluice_replication_events_total counter`, `sluice_relay_size{task="rs",unit="bytes"}`, `sluice_build_info{`,
			`go_goroutines `, `process_resident_memory_bytes `} {
			if !strings.Contains(string(body), want) {
				missing = want
			}
		}
		if strings.Contains(string(body), "_per_second") {
			t.Fatalf("a precomputed rate is exported (rates are rate()'s business):\n%s", body)
		}
		if missing == "" {
			break
		}
		select {
		case err := <-r.done:
			r.err, r.ended = err, true
			t.Fatalf("task ended (%v) while metrics lack %s:\n%s", err, missing, body)
		case <-time.After(100 * time.Millisecond):
		}
	}
	r.stop(t)
	saved, err := replicate.ReadStatus(cfg.Dir)
	if err != nil || saved.Stage != replicate.StageStopped || saved.Applied != st.Applied && !after(saved.Applied, st.Applied) {
		t.Fatalf("status file after stop: %+v %v", saved, err)
	}

	// Written while stopped; the rerun resumes from the checkpoint.
	workload(t, src, "rs", 100, 40)
	sandboxtest.MustExec(t, src, "ALTER TABLE rs.t ADD COLUMN extra int DEFAULT 7")
	workload(t, src, "rs", 200, 10)
	r = run(t, cfg)
	defer r.stop(t)
	r.waitApplied(t, masterStatus(t, src))
	sameData(t, srcInst, dstInst, "rs")

	// Schema changes while it runs, with rows in flight around them.
	sandboxtest.MustExec(t, src,
		"CREATE TABLE rs.t2 (id int primary key, s varchar(20))",
		"INSERT INTO rs.t2 VALUES (1, 'a'), (2, 'b')",
		"RENAME TABLE rs.t2 TO rs.t3",
		"INSERT INTO rs.t3 VALUES (3, 'c')",
		"CREATE TABLE rs.gone (id int primary key)",
		"INSERT INTO rs.gone VALUES (1)",
		"DROP TABLE rs.gone",
		"ALTER TABLE rs.t DROP COLUMN extra",
		"ALTER TABLE rs.t MODIFY COLUMN v varchar(120)",
		"UPDATE rs.t SET v = REPEAT('x', 100) WHERE id % 4 = 0")
	workload(t, src, "rs", 300, 10)
	r.waitApplied(t, masterStatus(t, src))
	sameData(t, srcInst, dstInst, "rs")
	var tables string
	dst := sandboxtest.MustOpen(t, dstInst, "")
	if err := dst.QueryRow("SELECT GROUP_CONCAT(table_name ORDER BY table_name) FROM information_schema.tables WHERE table_schema='rs'").Scan(&tables); err != nil || tables != "nokey,t,t3" {
		t.Fatalf("target tables after CREATE/RENAME/DROP: %q %v", tables, err)
	}

	// Idle: heartbeats keep the source position current and the lag at 0.
	// Polled rather than read once after a fixed sleep: on a loaded host the
	// heartbeat that brings the source position may come late. The bound
	// only turns a task that never settles into a failure, not a hang.
	time.Sleep(600 * time.Millisecond) // idle a while first
	sandboxtest.Eventually(t, 30*time.Second, "an idle task at lag 0 and the source's position",
		func() bool { s := r.task.Status(); return s.LagSeconds == 0 && after(s.Applied, s.Source) },
		func() string {
			s := r.task.Status()
			return fmt.Sprintf("lag %.1fs, applied %s, source %s", s.LagSeconds, s.Applied, s.Source)
		})
}

func TestRelaySurvivesSourcePurgeAndTargetRestart(t *testing.T) {
	dst := sandboxtest.Start(t, "dst2")
	src := sandboxtest.MustOpen(t, srcInst, "")
	start := masterStatus(t, src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE pg", "CREATE TABLE pg.t (id int primary key, k int, v varchar(50))",
		"CREATE TABLE pg.nokey (a int, b varchar(50))")
	cfg := taskConfig(t, "pg", srcInst, dst, start)
	cfg.Decode.Selected = func(r sluice.TableRef) bool { return r.Schema == "pg" }
	cfg.Decode.SchemaSelected = func(s string) bool { return s == "pg" }
	r := run(t, cfg)
	defer r.stop(t)
	workload(t, src, "pg", 1, 20)
	r.waitApplied(t, masterStatus(t, src))

	// The target goes away; the source keeps writing and purges its binlogs.
	if err := dst.Stop(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	workload(t, src, "pg", 100, 30)
	sandboxtest.MustExec(t, src, "FLUSH BINARY LOGS")
	workload(t, src, "pg", 200, 30)
	end := masterStatus(t, src)
	sandboxtest.Eventually(t, 5*time.Minute, fmt.Sprintf("the relay at %s with the target down", end), func() bool { return after(r.task.Status().Relay, end) },
		func() string { return fmt.Sprintf("relay at %s", r.task.Status().Relay) })
	sandboxtest.MustExec(t, src, "PURGE BINARY LOGS TO '"+end.File+"'")

	sandboxtest.Up(t, dst)
	st := r.waitApplied(t, end)
	if st.Restarts == 0 {
		t.Fatalf("the applier never restarted while the target was down: %+v", st)
	}
	sameData(t, srcInst, dst, "pg")
}

func TestRefusesBadStart(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	ctx := context.Background()
	// No checkpoint and no start position.
	cfg := taskConfig(t, "nostart", srcInst, dstInst, sluice.Position{})
	task, err := replicate.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Run(ctx, nil); !errors.Is(err, sluice.ErrConfig) {
		t.Fatalf("no start position: %v", err)
	}
	// A file the source does not have.
	cfg = taskConfig(t, "purged", srcInst, dstInst, sluice.Position{File: "mysql-bin.000000", Pos: 4})
	task, _ = replicate.New(cfg)
	if err := task.Run(ctx, nil); !errors.Is(err, sluice.ErrBinlogPurged) {
		t.Fatalf("purged start: %v", err)
	}
	// Statement-based binlog on the source.
	sandboxtest.MustExec(t, src, "SET GLOBAL binlog_format='STATEMENT'")
	defer sandboxtest.MustExec(t, src, "SET GLOBAL binlog_format='ROW'")
	cfg = taskConfig(t, "stmt", srcInst, dstInst, masterStatus(t, src))
	task, _ = replicate.New(cfg)
	if err := task.Run(ctx, nil); !errors.Is(err, sluice.ErrBinlogFormat) {
		t.Fatalf("STATEMENT binlog: %v", err)
	}
}

// A new task started from a GTID set replicates exactly the transactions
// after it.
func TestStartFromGTIDSet(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	sandboxtest.MustExec(t, src, "CREATE DATABASE gs", "CREATE TABLE gs.t (id int primary key)", "INSERT INTO gs.t VALUES (1), (2)")
	sandboxtest.MustExec(t, dst, "CREATE DATABASE gs", "CREATE TABLE gs.t (id int primary key)", "INSERT INTO gs.t VALUES (1), (2)")
	mid := masterStatus(t, src)
	sandboxtest.MustExec(t, src, "INSERT INTO gs.t VALUES (3)", "DELETE FROM gs.t WHERE id = 1")
	cfg := taskConfig(t, "gs", srcInst, dstInst, sluice.Position{})
	cfg.Start = sluice.Position{GTIDSet: mid.GTIDSet}
	cfg.Decode.Selected = func(r sluice.TableRef) bool { return r.Schema == "gs" }
	cfg.Decode.SchemaSelected = func(s string) bool { return s == "gs" }
	r := run(t, cfg)
	defer r.stop(t)
	st := r.waitApplied(t, masterStatus(t, src))
	if st.Txns != 2 {
		t.Fatalf("applied %d transactions after %s, want 2", st.Txns, mid.GTIDSet)
	}
	sameData(t, srcInst, dstInst, "gs")
}
