package oltp

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/bench/report"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sandbox"
)

// One MariaDB sandbox serves the package's integration tests.
var inst *sandbox.Instance

func TestMain(m *testing.M) {
	code := func() int {
		flag.Parse()
		if !testing.Short() && os.Getenv("SLUICE_SKIP_SANDBOX") == "" {
			i, stop, err := sandboxtest.New("oltp")
			if err != nil {
				fmt.Fprintln(os.Stderr, err, "(is mariadb-server installed? run 'make deps')")
				return 1
			}
			defer stop()
			inst = i
		}
		return m.Run()
	}()
	os.Exit(code)
}

func needServer(t *testing.T) Conn {
	t.Helper()
	if inst == nil {
		t.Skip("no sandbox (-short or SLUICE_SKIP_SANDBOX)")
	}
	c := DefaultConn()
	c.Port = inst.Port
	c.DB = "sbtest_" + strings.ToLower(strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
	return c
}

func TestPrepareRunCleanup(t *testing.T) {
	c := needServer(t)
	ctx := context.Background()
	m := DefaultMix()
	m.Tables, m.TableSize = 2, 500
	if err := Prepare(ctx, c, m, DefaultDist(), 2, 1, nil); err != nil {
		t.Fatal(err)
	}
	db := sandboxtest.MustOpen(t, inst, c.DB)

	// The tables are sysbench's: columns, primary key, index k_N, rows.
	for n := 1; n <= m.Tables; n++ {
		var count, minID, maxID, badK, badC, badPad int
		q := fmt.Sprintf(`SELECT COUNT(*), MIN(id), MAX(id),
			SUM(k < 1 OR k > %d),
			SUM(c NOT REGEXP '^([0-9]{11}-){9}[0-9]{11}$'),
			SUM(pad NOT REGEXP '^([0-9]{11}-){4}[0-9]{11}$') FROM sbtest%d`, m.TableSize, n)
		if err := db.QueryRow(q).Scan(&count, &minID, &maxID, &badK, &badC, &badPad); err != nil {
			t.Fatal(err)
		}
		if count != m.TableSize || minID != 1 || maxID != m.TableSize || badK+badC+badPad != 0 {
			t.Errorf("sbtest%d: %d rows, ids %d..%d, %d bad k, %d bad c, %d bad pad", n, count, minID, maxID, badK, badC, badPad)
		}
		var idx string
		if err := db.QueryRow(`SELECT GROUP_CONCAT(INDEX_NAME ORDER BY INDEX_NAME) FROM information_schema.STATISTICS
			WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?`, c.DB, fmt.Sprintf("sbtest%d", n)).Scan(&idx); err != nil {
			t.Fatal(err)
		}
		if idx != fmt.Sprintf("PRIMARY,k_%d", n) && idx != fmt.Sprintf("k_%d,PRIMARY", n) {
			t.Errorf("sbtest%d indexes %q", n, idx)
		}
	}

	// Preparing again is refused, as sysbench does.
	if err := Prepare(ctx, c, m, DefaultDist(), 1, 1, nil); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("second prepare: %v", err)
	}

	// A short sweep of every workload; delete last so the others see rows.
	cfg := Config{Conn: c, Mix: m, Dist: DefaultDist(), Threads: []int{1, 2}, Time: time.Second,
		Warmup: 200 * time.Millisecond, SeriesInterval: 250 * time.Millisecond, ReportInterval: 500 * time.Millisecond,
		Ignore: DefaultIgnore(), Workloads: Names()}
	var progress strings.Builder
	cfg.Progress = &progress
	run := report.NewRun("sluice bench oltp", "")
	if err := Run(ctx, cfg, run); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(run.Server.Version, "MariaDB") {
		t.Errorf("server version %q", run.Server.Version)
	}
	if len(run.Results) != len(Names())*2 {
		t.Fatalf("%d results, want %d", len(run.Results), len(Names())*2)
	}
	perEvent := map[string]float64{"point_select": 1, "read_only": 16, "read_write": 20, "write_only": 6,
		"update_index": 1, "update_non_index": 1, "delete": 1, "insert": 1}
	for _, r := range run.Results {
		if r.Events == 0 || r.QPS <= 0 || r.TPS <= 0 || r.DurationS < 1 {
			t.Errorf("%s/%d: nothing measured: %+v", r.Workload, r.Threads, r)
			continue
		}
		if r.Errors == 0 && r.Queries != int64(perEvent[r.Workload])*r.Events {
			t.Errorf("%s/%d: %d queries for %d events, want %v per event", r.Workload, r.Threads, r.Queries, r.Events, perEvent[r.Workload])
		}
		if !(r.MinMs <= r.P50Ms && r.P50Ms <= r.P95Ms && r.P95Ms <= r.P99Ms && r.P99Ms <= r.MaxMs) || r.P50Ms <= 0 {
			t.Errorf("%s/%d: percentiles out of order: %+v", r.Workload, r.Threads, r.LatencySummary)
		}
		if len(r.Series) < 3 {
			t.Errorf("%s/%d: %d series points for 1s at 250ms", r.Workload, r.Threads, len(r.Series))
		}
		if r.Reconnects != 0 {
			t.Errorf("%s/%d: %d reconnects on a healthy server", r.Workload, r.Threads, r.Reconnects)
		}
	}
	if ro := run.Find("read_only", 1); ro != nil && ro.Writes != 0 {
		t.Errorf("read_only wrote %d times", ro.Writes)
	}
	if wo := run.Find("write_only", 2); wo != nil && (wo.Reads != 0 || (wo.Errors == 0 && wo.Other != 2*wo.Events)) {
		t.Errorf("write_only: %d reads, %d other for %d events", wo.Reads, wo.Other, wo.Events)
	}
	if !strings.Contains(progress.String(), "] point_select thds: 1 tps: ") || !strings.Contains(progress.String(), "(warmup)") {
		t.Errorf("progress lines missing:\n%s", progress.String())
	}

	// The insert workload added rows; delete removed some.
	var rows int
	if err := db.QueryRow("SELECT (SELECT COUNT(*) FROM sbtest1) + (SELECT COUNT(*) FROM sbtest2)").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows == 2*m.TableSize {
		t.Errorf("insert and delete changed nothing: %d rows", rows)
	}

	if err := Cleanup(ctx, c, m.Tables, nil); err != nil {
		t.Fatal(err)
	}
	var left int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?", c.DB).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Errorf("%d tables left after cleanup", left)
	}
}

func TestRunMissingTable(t *testing.T) {
	c := needServer(t)
	ctx := context.Background()
	m := DefaultMix()
	m.Tables, m.TableSize = 1, 10
	if err := Prepare(ctx, c, m, DefaultDist(), 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	m.Tables = 3
	cfg := Config{Conn: c, Mix: m, Dist: DefaultDist(), Threads: []int{1}, Time: time.Second, Workloads: []string{"point_select"}}
	err := Run(ctx, cfg, report.NewRun("t", ""))
	if !errors.Is(err, sluice.ErrUnknownTable) || !strings.Contains(err.Error(), "sbtest2, sbtest3 missing") || !strings.Contains(err.Error(), "prepare") {
		t.Errorf("run with missing tables: %v", err)
	}
	// A table dropped under a running benchmark ends the run with the error.
	m.Tables = 1
	sandboxtest.MustExec(t, sandboxtest.MustOpen(t, inst, c.DB), "DROP TABLE sbtest1")
	cfg.Mix = m
	if err := Run(ctx, cfg, report.NewRun("t", "")); !errors.Is(err, sluice.ErrUnknownTable) {
		t.Errorf("run after drop: %v", err)
	}
}

func TestUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	c := DefaultConn()
	c.Port = port
	cfg := Config{Conn: c, Mix: DefaultMix(), Dist: DefaultDist(), Threads: []int{1}, Time: time.Second, Workloads: []string{"point_select"}}
	err = Run(context.Background(), cfg, report.NewRun("t", ""))
	if !errors.Is(err, sluice.ErrUnreachable) || !strings.Contains(err.Error(), "--host/--port") {
		t.Errorf("unreachable server: %v", err)
	}
	if err := Prepare(context.Background(), c, DefaultMix(), DefaultDist(), 1, 1, nil); !errors.Is(err, sluice.ErrUnreachable) {
		t.Errorf("prepare on unreachable server: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	base := Config{Conn: DefaultConn(), Mix: DefaultMix(), Dist: DefaultDist(), Threads: []int{1}, Time: time.Second, Workloads: []string{"point_select"}}
	bad := map[string]func(c *Config){
		"unknown workload": func(c *Config) { c.Workloads = []string{"tpcc"} },
		"zero threads":     func(c *Config) { c.Threads = []int{8, 0} },
		"no time":          func(c *Config) { c.Time = 0 },
		"zero tables":      func(c *Config) { c.Mix.Tables = 0 },
		"bad port":         func(c *Config) { c.Conn.Port = 70000 },
		"bad rand":         func(c *Config) { c.Dist.Type = "normal" },
		"negative warmup":  func(c *Config) { c.Warmup = -time.Second },
		"bad client io":    func(c *Config) { c.ClientIO = "epoll" },
	}
	if err := base.Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	for name, f := range bad {
		c := base
		c.Mix, c.Conn = base.Mix, base.Conn
		c.Threads = append([]int(nil), base.Threads...)
		f(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}

func TestParseDSN(t *testing.T) {
	c, err := DefaultConn().ParseDSN("root:pw@tcp(127.0.0.1:3307)/")
	if err != nil || c.Host != "127.0.0.1" || c.Port != 3307 || c.User != "root" || c.Password != "pw" || c.DB != "sbtest" {
		t.Errorf("ParseDSN = %+v, %v", c, err)
	}
	if _, err := DefaultConn().ParseDSN("nonsense"); err == nil {
		t.Error("bad DSN accepted")
	}
}

// TestReconnect kills the benchmark's connections on the server mid-run: the
// run goes on with new connections and counts the losses.
func TestReconnect(t *testing.T) {
	c := needServer(t)
	ctx := context.Background()
	m := DefaultMix()
	m.Tables, m.TableSize = 1, 100
	if err := Prepare(ctx, c, m, DefaultDist(), 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	for _, io := range []string{"blocking", "netpoll"} {
		t.Run(io, func(t *testing.T) { testReconnect(t, c, m, io) })
	}
}

func testReconnect(t *testing.T, c Conn, m Mix, clientIO string) {
	ctx := context.Background()
	admin, err := sandboxtest.MustOpen(t, inst, "").Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	cfg := Config{Conn: c, Mix: m, Dist: DefaultDist(), Threads: []int{2}, Time: 3 * time.Second,
		Workloads: []string{"point_select"}, Ignore: DefaultIgnore(), ClientIO: clientIO}
	run := report.NewRun("t", "")
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, run) }()
	// Kills are placed by what is seen (the run's connections in the
	// processlist), for as long as the run lasts, not in a fixed window: on
	// a loaded machine the run may connect late.
	killed := 0
	var runErr error
	finished := false
	for killed < 4 && !finished {
		select {
		case runErr = <-done:
			finished = true
			continue
		case <-time.After(100 * time.Millisecond):
		}
		rows, err := admin.QueryContext(ctx, "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()", c.DB)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		rows.Close()
		for _, id := range ids {
			if _, err := admin.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id)); err == nil {
				killed++
			}
		}
	}
	if !finished {
		runErr = <-done
	}
	if runErr != nil {
		t.Fatalf("run with killed connections: %v", runErr)
	}
	if killed == 0 {
		t.Fatal("found no benchmark connection to kill")
	}
	r := run.Results[0]
	if r.Reconnects == 0 || r.Errors == 0 || r.Events == 0 {
		t.Errorf("killed %d connections: %d reconnects, %d errors, %d events", killed, r.Reconnects, r.Errors, r.Events)
	}
}
