// Command dtx reproduces the DTM seed's benchmark table on a sandbox
// MariaDB: sysbench oltp_write_only as the raw figure, TransOut/TransIn
// called directly (no coordinator), and the same two-branch saga through
// sluice's coordinator and through dtm v1.19.0, with 0, 2 and 10 business
// SQL per branch, with and without the barrier. Every figure comes from the
// same run on the same server; Global-TPS and latency are measured by this
// client, DB-TPS (committed write transactions, Binlog_commits) and OPS
// (INSERT/UPDATE/DELETE/SELECT statements, Com_*) from the server's counters
// over the window.
//
// Usage: go run ./bench/dtx -sluice bin/sluice -dtm ~/.cache/sluice-bench/dtm-v1.19.0/dtm
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"google.golang.org/grpc"

	"github.com/sluice-db/sluice/bench/report"
	"github.com/sluice-db/sluice/dtx/dtxtest"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sandbox"
)

type options struct {
	duration, warmup time.Duration
	threads, rounds  int
	threadList       []int
	sluice, dtm      string
	dtmSQL           string
	out              string
	sbTables, sbSize int
	only             string
	sluiceArgs       []string
	profile          string
	// sluiceB and sluiceBArgs are a second sluice binary and its flags,
	// measured as the rows "sluice B, ...": an A/B of two builds or two
	// settings within one run, on the same database and the same moment's
	// machine (between runs, rounds move 10-20 %).
	sluiceB     string
	sluiceBArgs []string
	// rotate starts each round one row later than the one before, so
	// that no row always runs right after the same row (whose leftovers,
	// such as InnoDB's page flushing, it would always inherit).
	rotate bool
}

func main() {
	var o options
	flag.DurationVar(&o.duration, "duration", 15*time.Second, "measured time per row")
	flag.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured time before each row")
	th := flag.String("threads", "10", "comma-separated client counts; one table each (the seed's is c=10)")
	flag.IntVar(&o.rounds, "rounds", 1, "rounds over all rows; the table shows each row's median")
	flag.StringVar(&o.sluice, "sluice", "bin/sluice", "sluice binary")
	flag.StringVar(&o.dtm, "dtm", "", "dtm v1.19.0 binary (empty: skip the dtm rows)")
	flag.StringVar(&o.dtmSQL, "dtm-sql", "", "dtm's sqls/dtmsvr.storage.mysql.sql")
	flag.StringVar(&o.out, "out", "bench/out/dtx", "directory for results.json and results.md")
	flag.IntVar(&o.sbTables, "sysbench-tables", 4, "sysbench tables")
	flag.IntVar(&o.sbSize, "sysbench-size", 100000, "sysbench rows per table")
	flag.StringVar(&o.only, "only", "", "comma-separated row names to run (default: all)")
	flag.StringVar(&o.profile, "profile", "", "directory for a CPU profile of sluice per row (starts sluice with --pprof)")
	sa := flag.String("sluice-args", "", "extra space-separated flags for sluice dtx serve")
	flag.StringVar(&o.sluiceB, "sluice-b", "", "a second sluice binary, measured as the rows \"sluice B, ...\" (an A/B within one run)")
	sab := flag.String("sluice-b-args", "", "extra space-separated flags for the -sluice-b coordinator (default: -sluice-args)")
	flag.BoolVar(&o.rotate, "rotate", true, "start each round one row later, so that no row always follows the same one")
	chartFrom := flag.String("chart-from", "", "only draw the Global-TPS chart (SVG) of an earlier run's results.json into -out, and exit")
	flag.Parse()
	if *chartFrom != "" {
		r, err := report.Load(*chartFrom)
		if err == nil {
			err = os.MkdirAll(o.out, 0o755)
		}
		if err == nil {
			err = writeChart(r, filepath.Join(o.out, "dtx.svg"))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench dtx:", err)
			os.Exit(2)
		}
		return
	}
	o.sluiceArgs = strings.Fields(*sa)
	o.sluiceBArgs = o.sluiceArgs
	if *sab != "" {
		o.sluiceBArgs = strings.Fields(*sab)
	}
	if o.profile != "" {
		o.sluiceArgs = append(o.sluiceArgs, "--pprof")
		o.sluiceBArgs = append(o.sluiceBArgs, "--pprof")
	}
	for _, f := range strings.Split(*th, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			fmt.Fprintln(os.Stderr, "bench dtx: -threads wants positive integers")
			os.Exit(2)
		}
		o.threadList = append(o.threadList, n)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench dtx:", err)
		os.Exit(2)
	}
}

// row is one line of the seed's table.
type row struct {
	name        string
	coordinator string // "", "sluice", "dtm", "sysbench"
	sql         int    // business SQL per branch
	barrier     bool
	grpc        bool // dtm's gRPC protocol: submit and branch calls
}

// The "sluice" rows use sluice's default store (the embedded bolt file and
// its write-ahead log) and the "dtm" rows dtm's MySQL store, as the seed's
// table does; the rows at the end compare like with like: sluice on a
// MySQL store, dtm on its own default embedded store (boltdb), and both on
// one Redis server (appendonly yes, appendfsync always: the setting
// sluice's Redis store requires; dtm's does not check it).
var rows = []row{
	{name: "sysbench oltp_write_only", coordinator: "sysbench"},
	{name: "no coordinator, 2 SQL", sql: 2},
	{name: "sluice, 0 SQL", coordinator: "sluice"},
	{name: "dtm, 0 SQL", coordinator: "dtm"},
	{name: "sluice, 2 SQL", coordinator: "sluice", sql: 2},
	{name: "dtm, 2 SQL", coordinator: "dtm", sql: 2},
	{name: "sluice, 2 SQL, barrier", coordinator: "sluice", sql: 2, barrier: true},
	{name: "dtm, 2 SQL, barrier", coordinator: "dtm", sql: 2, barrier: true},
	{name: "no coordinator, 10 SQL", sql: 10},
	{name: "sluice, 10 SQL", coordinator: "sluice", sql: 10},
	{name: "dtm, 10 SQL", coordinator: "dtm", sql: 10},
	{name: "sluice, 10 SQL, barrier", coordinator: "sluice", sql: 10, barrier: true},
	{name: "dtm, 10 SQL, barrier", coordinator: "dtm", sql: 10, barrier: true},
	{name: "no coordinator, gRPC, 2 SQL", sql: 2, grpc: true},
	{name: "sluice, gRPC, 0 SQL", coordinator: "sluice", grpc: true},
	{name: "dtm, gRPC, 0 SQL", coordinator: "dtm", grpc: true},
	{name: "sluice, gRPC, 2 SQL", coordinator: "sluice", sql: 2, grpc: true},
	{name: "dtm, gRPC, 2 SQL", coordinator: "dtm", sql: 2, grpc: true},
	{name: "sluice (MySQL store), 0 SQL", coordinator: "sluice-mysql"},
	{name: "sluice (MySQL store), 2 SQL", coordinator: "sluice-mysql", sql: 2},
	{name: "dtm (boltdb store), 0 SQL", coordinator: "dtm-bolt"},
	{name: "dtm (boltdb store), 2 SQL", coordinator: "dtm-bolt", sql: 2},
	{name: "sluice (Redis store), 0 SQL", coordinator: "sluice-redis"},
	{name: "dtm (Redis store), 0 SQL", coordinator: "dtm-redis"},
	{name: "sluice (Redis store), 2 SQL", coordinator: "sluice-redis", sql: 2},
	{name: "dtm (Redis store), 2 SQL", coordinator: "dtm-redis", sql: 2},
}

// wanted tells whether row r is among the -only rows (all when empty).
func (o options) wanted(r row) bool {
	return o.only == "" || strings.Contains(","+o.only+",", ","+r.name+",")
}

// measurement of one row in one round.
type measurement struct {
	globalTPS, dbTPS, ops float64
	groups                float64 // binlog group commits per second (not fsyncs: sync_binlog is 0)
	// logFsyncs are InnoDB's fsyncs per second (Innodb_data_fsyncs: its
	// redo log's too; 10.11 has no Innodb_os_log_fsyncs), flushes the disk
	// cache flushes per second that the device holding the sandbox
	// completed (every process's: MariaDB's and the coordinator's).
	logFsyncs, flushes float64
	// coordCPU is the coordinator process's CPU time (user + system) per
	// completed global transaction, in ms; busy the share of the machine's
	// CPU time that was not idle, in %. Both over the window (Linux /proc).
	coordCPU, busy float64
	lat            report.LatencySummary
	errors         int64
}

func run(ctx context.Context, o options) error {
	dir, err := os.MkdirTemp("", "dtxbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	port, err := sandbox.FreePort()
	if err != nil {
		return err
	}
	c := sandbox.DefaultConfig()
	c.Dir, c.Name, c.Port, c.BufferPool = dir, "dtxbench", port, "1G"
	fmt.Fprintf(os.Stderr, "starting MariaDB sandbox on 127.0.0.1:%d\n", port)
	inst, err := sandbox.Up(ctx, c)
	if err != nil {
		return err
	}
	defer inst.Stop(context.Background(), time.Minute)
	db, err := sql.Open("mysql", inst.DSN("")+"?interpolateParams=true")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(200)
	db.SetMaxIdleConns(200)
	var version string
	_ = db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version)
	if err := dtxtest.Setup(ctx, db, 1<<50); err != nil {
		return err
	}
	// Transfers are spread over many accounts, as in dtm's own benchmark,
	// so that the figures measure the coordinator, not one hot row.
	if err := dtxtest.AddAccounts(ctx, db, 3, accounts+2, 1<<40); err != nil {
		return err
	}

	b := &bench{o: o, db: db, inst: inst, client: newClient(), disk: diskStat(dir)}
	defer b.stopCoordinators()
	if o.sluiceB != "" {
		if err := b.startSluiceBin(ctx, "sluice-b", "bolt://"+filepath.Join(dir, "sluice-b-dtx.db"), o.sluiceB, o.sluiceBArgs); err != nil {
			return err
		}
	}
	if err := b.startSluice(ctx, "sluice", "bolt://"+filepath.Join(dir, "sluice-dtx.db")); err != nil {
		return err
	}
	if err := b.startSluice(ctx, "sluice-mysql", fmt.Sprintf("mysql://root@127.0.0.1:%d/sluice_dtx", inst.Port)); err != nil {
		return err
	}
	// One redis-server for both Redis rows, started only when one runs.
	for _, r := range rows {
		if !strings.HasSuffix(r.coordinator, "-redis") || !o.wanted(r) || b.redis != nil {
			continue
		}
		rs, stopRedis, err := sandboxtest.NewRedis()
		if err != nil {
			return err
		}
		defer stopRedis()
		b.redis = rs
		fmt.Fprintf(os.Stderr, "started redis-server on %s (appendfsync always)\n", rs.Addr())
		// The password through the environment, as users should.
		os.Setenv("SLUICE_BENCH_REDIS_PW", rs.Password)
		if err := b.startSluice(ctx, "sluice-redis", "redis://:${SLUICE_BENCH_REDIS_PW}@"+rs.Addr()+"/1"); err != nil {
			return err
		}
	}
	if o.dtm != "" {
		if err := b.startDtm(ctx, "dtm", dir); err != nil {
			return err
		}
		if err := b.startDtm(ctx, "dtm-bolt", dir); err != nil {
			return err
		}
		if b.redis != nil {
			if err := b.startDtm(ctx, "dtm-redis", dir); err != nil {
				return err
			}
		}
	}

	results := map[int]map[string][]measurement{}
	// Each "sluice B" row runs next to its "sluice" twin (see roundOrder).
	var all, selected []row
	for _, r := range rows {
		all = append(all, r)
		if o.sluiceB != "" && r.coordinator == "sluice" && !r.grpc {
			r.name, r.coordinator = "sluice B"+strings.TrimPrefix(r.name, "sluice"), "sluice-b"
			all = append(all, r)
		}
	}
	selected = all
	if o.only != "" {
		selected = nil
		for _, r := range all {
			if o.wanted(r) {
				selected = append(selected, r)
			}
		}
	}
	for _, threads := range o.threadList {
		b.o.threads = threads
		results[threads] = map[string][]measurement{}
		for round := 1; round <= o.rounds; round++ {
			order := selected
			if o.rotate {
				order = roundOrder(selected, round)
			}
			for _, r := range order {
				if strings.HasPrefix(r.coordinator, "dtm") && o.dtm == "" {
					continue
				}
				if ctx.Err() != nil {
					return ctx.Err()
				}
				m, err := b.measure(ctx, r)
				if err != nil {
					return fmt.Errorf("%s: %w", r.name, err)
				}
				fmt.Fprintf(os.Stderr, "c=%d round %d  %-26s Global-TPS %7.0f  DB-TPS %7.0f  OPS %7.0f  InnoDB fsyncs/s %6.0f  disk flushes/s %6.0f  p50 %6.2f ms  p99 %6.2f ms  errors %d  coordinator CPU %.3f ms/txn  CPU busy %.0f %%\n",
					threads, round, r.name, m.globalTPS, m.dbTPS, m.ops, m.logFsyncs, m.flushes, m.lat.P50Ms, m.lat.P99Ms, m.errors, m.coordCPU, m.busy)
				results[threads][r.name] = append(results[threads][r.name], m)
			}
		}
	}
	return b.write(selected, results, version)
}

type bench struct {
	o      options
	db     *sql.DB
	inst   *sandbox.Instance
	client *http.Client
	procs  []*exec.Cmd
	urls   map[string]string
	pids   map[string]int
	// disk is the /sys stat file of the device that holds the sandbox.
	disk string
	// redis is the server of the Redis rows (nil when none runs).
	redis *sandboxtest.Redis
	// grpcAddrs are the coordinators' gRPC addresses, grpcConns the
	// connections to them and to the business services (grpc.go).
	grpcAddrs map[string]string
	grpcConns map[string]*grpc.ClientConn
}

// Binlog_commits counts every committed write transaction, autocommit
// statements included (the sandbox logs binlogs); Binlog_group_commits
// counts the groups they shared (not fsyncs: sync_binlog is 0, MariaDB's
// default); Innodb_data_fsyncs counts InnoDB's fsyncs, the redo log's
// included, which make the commits durable. The Com_ counters are the statements.
var statusNames = []string{"Binlog_commits", "Com_insert", "Com_update", "Com_delete", "Com_select", "Com_insert_select", "Com_replace", "Binlog_group_commits", "Innodb_data_fsyncs"}

var opNames = statusNames[1:7]

// counters are the server's, the machine's and the disk's counters at one
// moment; a row's figures are the differences over its window.
type counters struct {
	status              map[string]float64
	busy, idle, flushes float64
}

func (b *bench) counters(ctx context.Context) (counters, error) {
	st, err := b.status(ctx)
	if err != nil {
		return counters{}, err
	}
	c := counters{status: st}
	c.busy, c.idle = machineCPU()
	c.flushes = diskFlushes(b.disk)
	return c, nil
}

// addCounters sets m's server, CPU and disk figures from the counters
// around a window of el seconds.
func (m *measurement) addCounters(c0, c1 counters, el float64) {
	if d := (c1.busy - c0.busy) + (c1.idle - c0.idle); d > 0 {
		m.busy = 100 * (c1.busy - c0.busy) / d
	}
	s0, s1 := c0.status, c1.status
	m.dbTPS = (s1["Binlog_commits"] - s0["Binlog_commits"]) / el
	for _, k := range opNames {
		m.ops += (s1[k] - s0[k]) / el
	}
	m.groups = (s1["Binlog_group_commits"] - s0["Binlog_group_commits"]) / el
	m.logFsyncs = (s1["Innodb_data_fsyncs"] - s0["Innodb_data_fsyncs"]) / el
	m.flushes = (c1.flushes - c0.flushes) / el
}

func (b *bench) status(ctx context.Context) (map[string]float64, error) {
	rows, err := b.db.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('"+strings.Join(statusNames, "','")+"')")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]float64{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		out[k], _ = strconv.ParseFloat(v, 64)
	}
	return out, rows.Err()
}

func (b *bench) measure(ctx context.Context, r row) (measurement, error) {
	if r.coordinator == "sysbench" {
		return b.sysbench(ctx)
	}
	busi, err := dtxtest.Start(b.db, dtxtest.Config{Barrier: r.barrier, SQLPerBranch: r.sql, NoDB: r.sql == 0})
	if err != nil {
		return measurement{}, err
	}
	defer busi.Close()
	var fn func(ctx context.Context) error
	switch {
	case r.grpc:
		if fn, err = b.grpcLoad(busi, r.coordinator); err != nil {
			return measurement{}, err
		}
	case r.coordinator == "":
		fn = func(ctx context.Context) error { return b.direct(ctx, busi.URL) }
	default:
		base := b.urls[r.coordinator]
		fn = func(ctx context.Context) error { return b.saga(ctx, base, busi.URL) }
	}
	// Warm up, then measure a window with the server's counters around it.
	b.load(ctx, b.o.warmup, fn)
	c0, err := b.counters(ctx)
	if err != nil {
		return measurement{}, err
	}
	var prof sync.WaitGroup
	if b.o.profile != "" && strings.HasPrefix(r.coordinator, "sluice") {
		prof.Add(1)
		go func() {
			defer prof.Done()
			b.cpuProfile(ctx, r)
		}()
	}
	sluiceRow := strings.HasPrefix(r.coordinator, "sluice")
	var stats0 map[string]float64
	if sluiceRow {
		stats0 = b.sluiceMetrics(ctx, r.coordinator)
	}
	cpu0 := procCPU(b.pids[r.coordinator])
	start := time.Now()
	ok, errs, lat := b.load(ctx, b.o.duration, fn)
	var stats1 map[string]float64
	if sluiceRow {
		stats1 = b.sluiceMetrics(ctx, r.coordinator)
	}
	prof.Wait()
	el := time.Since(start).Seconds()
	cpu1 := procCPU(b.pids[r.coordinator])
	c1, err := b.counters(ctx)
	if err != nil {
		return measurement{}, err
	}
	m := measurement{globalTPS: float64(ok) / el, lat: lat.Summary(), errors: errs}
	if r.coordinator != "" && ok > 0 && cpu1 > 0 {
		m.coordCPU = 1000 * (cpu1 - cpu0) / float64(ok)
	}
	m.addCounters(c0, c1, el)
	// Let the coordinators finish what the window left in flight.
	time.Sleep(500 * time.Millisecond)
	if r.coordinator == "" && ok > 0 && !r.grpc {
		fmt.Fprintf(os.Stderr, "         no coordinator: clients saw %.2f ms per TransOut+TransIn pair\n", 1000*float64(b.o.threads)/m.globalTPS)
	}
	if sluiceRow && stats0 != nil && stats1 != nil {
		storeStats(r.coordinator, stats0, stats1, 1000*float64(b.o.threads)/m.globalTPS)
	}
	return m, nil
}

// cpuProfile saves sluice's CPU profile over the row's measured window.
func (b *bench) cpuProfile(ctx context.Context, r row) {
	secs := int(b.o.duration.Seconds())
	if secs < 1 {
		secs = 1
	}
	u := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", strings.TrimSuffix(b.urls[r.coordinator], "/api/dtmsvr"), secs)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	c := &http.Client{Timeout: b.o.duration + 30*time.Second}
	resp, err := c.Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return
	}
	defer resp.Body.Close()
	name := strings.NewReplacer(" ", "", ",", "_", "(", "", ")", "").Replace(r.name)
	path := filepath.Join(b.o.profile, fmt.Sprintf("c%d-%s.pprof", b.o.threads, name))
	if err := os.MkdirAll(b.o.profile, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
		return
	}
	data, _ := io.ReadAll(resp.Body)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "profile:", err)
	}
}

var promLine = regexp.MustCompile(`^(sluice_dtx_store_commit_(?:batch_size|seconds)_(?:sum|count)|sluice_dtx_branch_duration_seconds_(?:sum|count)\{mode="saga",op="action",result="SUCCESS"\}|sluice_dtx_saga_request_seconds_(?:sum|count)|sluice_dtx_saga_phase_seconds_total\{phase="[a-z_]+"\}) ([0-9.e+-]+)$`)

// sagaPhases are sluice's per-saga latency phases (dtx/trace.go), printed
// in a saga's order, each with a short name.
var sagaPhases = []struct{ name, short string }{
	{"request", "read"}, {"submit_commit_queue", "c1 queue"}, {"submit_commit_wait", "c1 wait"}, {"submit_commit_write", "c1 write"},
	{"submit_commit_wakeup", "c1 wake"}, {"to_first_branch", "to b1"}, {"branch_calls", "actions"},
	{"between_branches", "b1-b2"}, {"to_final_commit", "to c2"}, {"final_commit_queue", "c2 queue"}, {"final_commit_wait", "c2 wait"},
	{"final_commit_write", "c2 write"}, {"final_commit_wakeup", "c2 wake"}, {"answer", "answer"},
}

// sluiceMetrics reads the figures storeStats prints from sluice's
// /metrics (nil when it cannot).
func (b *bench) sluiceMetrics(ctx context.Context, name string) map[string]float64 {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(b.urls[name], "/dtmsvr")+"/metrics", nil)
	resp, err := b.client.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	cur := map[string]float64{}
	for _, l := range strings.Split(string(data), "\n") {
		if m := promLine.FindStringSubmatch(l); m != nil {
			cur[m[1]], _ = strconv.ParseFloat(m[2], 64)
		}
	}
	return cur
}

// storeStats prints sluice's figures over the measured window (from the
// metrics last and cur read around it): how many state changes shared one
// store transaction, and its latency; and where a saga's time went inside
// sluice (ms per saga, by phase), against clientMs, the mean saga latency
// the clients saw (clients / sagas per second).
func storeStats(name string, last, cur map[string]float64, clientMs float64) {
	d := func(k string) float64 { return cur[k] - last[k] }
	n := d("sluice_dtx_store_commit_seconds_count")
	if n > 0 {
		fmt.Fprintf(os.Stderr, "         %s store: %.0f commits, %.1f changes per commit, %.2f ms per commit",
			name, n, d("sluice_dtx_store_commit_batch_size_sum")/n, 1000*d("sluice_dtx_store_commit_seconds_sum")/n)
		const act = `{mode="saga",op="action",result="SUCCESS"}`
		if bn := d("sluice_dtx_branch_duration_seconds_count" + act); bn > 0 {
			fmt.Fprintf(os.Stderr, "; saga actions %.2f ms each", 1000*d("sluice_dtx_branch_duration_seconds_sum"+act)/bn)
		}
		fmt.Fprintln(os.Stderr)
	}
	if sn := d("sluice_dtx_saga_request_seconds_count"); sn > 0 {
		in := 1000 * d("sluice_dtx_saga_request_seconds_sum") / sn
		fmt.Fprintf(os.Stderr, "         %s saga, ms per saga (%.0f traced): clients saw %.2f, outside sluice %.2f, sluice read->answer %.2f =", name, sn, clientMs, clientMs-in, in)
		for _, p := range sagaPhases {
			fmt.Fprintf(os.Stderr, " %s %.2f", p.short, 1000*d(`sluice_dtx_saga_phase_seconds_total{phase="`+p.name+`"}`)/sn)
		}
		fmt.Fprintln(os.Stderr)
	}
}

// load runs fn from o.threads clients for d.
func (b *bench) load(ctx context.Context, d time.Duration, fn func(context.Context) error) (int64, int64, *report.Latency) {
	var ok, errs atomic.Int64
	lats := make([]*report.Latency, b.o.threads)
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := 0; w < b.o.threads; w++ {
		lats[w] = report.NewLatency()
		wg.Add(1)
		go func(l *report.Latency) {
			defer wg.Done()
			for time.Now().Before(deadline) && ctx.Err() == nil {
				t := time.Now()
				if err := fn(ctx); err != nil {
					errs.Add(1)
					continue
				}
				l.Record(time.Since(t))
				ok.Add(1)
			}
		}(lats[w])
	}
	wg.Wait()
	all := report.NewLatency()
	for _, l := range lats {
		all.Merge(l)
	}
	return ok.Load(), errs.Load(), all
}

func (b *bench) post(ctx context.Context, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.client.Do(req)
	if err != nil {
		return err
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || bytes.Contains(data, []byte("FAILURE")) {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, data)
	}
	return nil
}

const accounts = 20000

var uidCounter atomic.Int64

// payload is one transfer between two accounts no other client uses now.
func payload() []byte {
	u := int(uidCounter.Add(1)%accounts) + 3
	return []byte(fmt.Sprintf(`{"amount":1,"out_user":%d,"in_user":%d}`, u, accounts+5-u))
}

// direct is the no-coordinator baseline: TransOut then TransIn.
func (b *bench) direct(ctx context.Context, busi string) error {
	p := payload()
	if err := b.post(ctx, busi+"/TransOut", p); err != nil {
		return err
	}
	return b.post(ctx, busi+"/TransIn", p)
}

func newGid() string {
	var x [12]byte
	_, _ = rand.Read(x[:])
	return hex.EncodeToString(x[:])
}

// saga submits the two-branch saga and waits for its result (wait_result).
func (b *bench) saga(ctx context.Context, base, busi string) error {
	p := payload()
	body, _ := json.Marshal(map[string]any{
		"gid": newGid(), "trans_type": "saga", "wait_result": true,
		"steps": []map[string]string{
			{"action": busi + "/TransOut", "compensate": busi + "/TransOutCompensate"},
			{"action": busi + "/TransIn", "compensate": busi + "/TransInCompensate"},
		},
		"payloads": []string{string(p), string(p)},
	})
	return b.post(ctx, base+"/submit", body)
}

func median(ms []measurement, f func(measurement) float64) float64 {
	v := make([]float64, len(ms))
	for i, m := range ms {
		v[i] = f(m)
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func (b *bench) write(selected []row, results map[int]map[string][]measurement, version string) error {
	run := report.NewRun("bench/dtx.sh", "sluice dtx vs dtm v1.19.0")
	run.Server = report.Server{Version: version, Addr: fmt.Sprintf("127.0.0.1:%d", b.inst.Port)}
	run.Params = map[string]any{"threads": b.o.threadList, "duration_s": b.o.duration.Seconds(), "rounds": b.o.rounds,
		"sysbench_tables": b.o.sbTables, "sysbench_table_size": b.o.sbSize, "accounts": accounts,
		"saga":        "TransOut + TransIn, wait_result",
		"sluice_args": strings.Join(b.o.sluiceArgs, " ")}
	var md bytes.Buffer
	for _, threads := range b.o.threadList {
		if err := b.table(&md, run, selected, threads, results[threads]); err != nil {
			return err
		}
	}
	run.Notes = append(run.Notes, strings.TrimSpace(md.String()))
	run.Finished = time.Now().UTC()
	if err := os.MkdirAll(b.o.out, 0o755); err != nil {
		return err
	}
	if err := run.Save(filepath.Join(b.o.out, "results.json")); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(b.o.out, "results.md"), md.Bytes(), 0o644); err != nil {
		return err
	}
	if err := writeChart(run, filepath.Join(b.o.out, "dtx.svg")); err != nil {
		return err
	}
	_, err := os.Stdout.Write(md.Bytes())
	return err
}

// table writes the seed's table for one client count, with the goal ratios.
func (b *bench) table(md *bytes.Buffer, run *report.Run, selected []row, threads int, results map[string][]measurement) error {
	t := &report.Table{Title: fmt.Sprintf("c=%d", threads), Columns: []string{"<", "Global-TPS", "DB-TPS", "OPS", "InnoDB fsyncs/s", "disk flushes/s", "p50 (ms)", "p99 (ms)", "errors", "coordinator CPU/txn (ms)", "CPU busy (%)"}}
	get := map[string]float64{}
	for _, r := range selected {
		ms := results[r.name]
		if len(ms) == 0 {
			continue
		}
		g := median(ms, func(m measurement) float64 { return m.globalTPS })
		d := median(ms, func(m measurement) float64 { return m.dbTPS })
		o := median(ms, func(m measurement) float64 { return m.ops })
		gr := median(ms, func(m measurement) float64 { return m.groups })
		lf := median(ms, func(m measurement) float64 { return m.logFsyncs })
		fl := median(ms, func(m measurement) float64 { return m.flushes })
		p50 := median(ms, func(m measurement) float64 { return m.lat.P50Ms })
		p99 := median(ms, func(m measurement) float64 { return m.lat.P99Ms })
		cc := median(ms, func(m measurement) float64 { return m.coordCPU })
		busy := median(ms, func(m measurement) float64 { return m.busy })
		var errs int64
		for _, m := range ms {
			errs += m.errors
		}
		get[r.name] = g
		gs, p50s, p99s, ccs := report.Num(g), report.Num(p50), report.Num(p99), fmt.Sprintf("%.3f", cc)
		if r.coordinator == "sysbench" {
			gs, p50s, p99s = "-", "-", "-"
		}
		if r.coordinator == "" || r.coordinator == "sysbench" || cc == 0 {
			ccs = "-"
		}
		t.AddRow(r.name, gs, report.Num(d), report.Num(o), report.Num(lf), report.Num(fl), p50s, p99s, strconv.FormatInt(errs, 10), ccs, fmt.Sprintf("%.0f", busy))
		res := report.Result{Workload: r.name, Threads: threads, DurationS: b.o.duration.Seconds(), TPS: g, QPS: o, Errors: errs,
			Metrics: map[string]float64{"global_tps": g, "db_tps": d, "ops": o, "binlog_group_commits_per_s": gr, "innodb_fsyncs_per_s": lf, "disk_flushes_per_s": fl, "coordinator_cpu_ms_per_txn": cc, "cpu_busy_pct": busy}}
		res.LatencySummary = ms[len(ms)/2].lat
		res.P50Ms, res.P99Ms = p50, p99
		run.Add(res)
	}
	if err := t.Markdown(md); err != nil {
		return err
	}
	ratio := func(a, b string) string {
		if get[a] == 0 || get[b] == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.2f", get[a]/get[b])
	}
	fmt.Fprintf(md, "\nc=%d: sluice / dtm Global-TPS: 0 SQL %s, 2 SQL %s (goal >= 2), 2 SQL barrier %s, 10 SQL %s, 10 SQL barrier %s\n",
		threads, ratio("sluice, 0 SQL", "dtm, 0 SQL"), ratio("sluice, 2 SQL", "dtm, 2 SQL"), ratio("sluice, 2 SQL, barrier", "dtm, 2 SQL, barrier"),
		ratio("sluice, 10 SQL", "dtm, 10 SQL"), ratio("sluice, 10 SQL, barrier", "dtm, 10 SQL, barrier"))
	fmt.Fprintf(md, "c=%d: sluice / no coordinator Global-TPS: 2 SQL %s (goal >= 0.80), 10 SQL %s\n",
		threads, ratio("sluice, 2 SQL", "no coordinator, 2 SQL"), ratio("sluice, 10 SQL", "no coordinator, 10 SQL"))
	fmt.Fprintf(md, "c=%d: like with like: sluice (MySQL store) / dtm (MySQL store): 0 SQL %s, 2 SQL %s; sluice (embedded) / dtm (boltdb): 0 SQL %s, 2 SQL %s\n",
		threads, ratio("sluice (MySQL store), 0 SQL", "dtm, 0 SQL"), ratio("sluice (MySQL store), 2 SQL", "dtm, 2 SQL"),
		ratio("sluice, 0 SQL", "dtm (boltdb store), 0 SQL"), ratio("sluice, 2 SQL", "dtm (boltdb store), 2 SQL"))
	fmt.Fprintf(md, "c=%d: sluice (Redis store) / dtm (Redis store), one redis-server with appendfsync always: 0 SQL %s, 2 SQL %s\n\n",
		threads, ratio("sluice (Redis store), 0 SQL", "dtm (Redis store), 0 SQL"), ratio("sluice (Redis store), 2 SQL", "dtm (Redis store), 2 SQL"))
	fmt.Fprintf(md, "c=%d: gRPC (dtm's gRPC API and gRPC branches): sluice / dtm 0 SQL %s, 2 SQL %s; sluice / no coordinator 2 SQL %s\n\n",
		threads, ratio("sluice, gRPC, 0 SQL", "dtm, gRPC, 0 SQL"), ratio("sluice, gRPC, 2 SQL", "dtm, gRPC, 2 SQL"), ratio("sluice, gRPC, 2 SQL", "no coordinator, gRPC, 2 SQL"))
	if b.o.sluiceB != "" {
		for _, r := range selected {
			if r.coordinator != "sluice-b" {
				continue
			}
			a := "sluice" + strings.TrimPrefix(r.name, "sluice B")
			var rounds []string
			for i, m := range results[r.name] {
				if i < len(results[a]) && results[a][i].globalTPS > 0 {
					rounds = append(rounds, fmt.Sprintf("%.2f", m.globalTPS/results[a][i].globalTPS))
				}
			}
			fmt.Fprintf(md, "c=%d: %s / %s Global-TPS: %s (rounds %s)\n", threads, r.name, a, ratio(r.name, a), strings.Join(rounds, ", "))
		}
		fmt.Fprintln(md)
	}
	return nil
}
