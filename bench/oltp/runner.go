package oltp

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice/bench/report"
)

// Config is one `sluice bench oltp run`: every workload at every thread count.
type Config struct {
	Conn      Conn
	Mix       Mix
	Dist      Dist
	Workloads []string
	Threads   []int
	Time      time.Duration // measured time per workload and thread count
	Warmup    time.Duration // unmeasured time before each measurement
	// ReportInterval is how often a progress line is printed; 0 prints none.
	ReportInterval time.Duration
	// SeriesInterval is the width of one point of Result.Series; 0 means 1s.
	SeriesInterval time.Duration
	Ignore         IgnoreSet
	Seed           uint64    // 0: from the clock
	Progress       io.Writer // progress lines; nil discards them
	// ClientIO is how worker connections wait for the server: "blocking"
	// (the default: one OS thread per worker asleep in read(), as in
	// sysbench; see blockingConn) or "netpoll" (Go's usual network poller).
	ClientIO string
}

// Validate checks everything that can be checked without a server.
func (c *Config) Validate() error {
	if err := c.Conn.Validate(); err != nil {
		return err
	}
	if err := c.Mix.Validate(); err != nil {
		return err
	}
	if err := c.Dist.Validate(); err != nil {
		return err
	}
	if len(c.Workloads) == 0 {
		return errors.New("no --workload given")
	}
	for _, w := range c.Workloads {
		if _, err := Lookup(w); err != nil {
			return err
		}
	}
	if len(c.Threads) == 0 {
		return errors.New("no --threads given")
	}
	for _, t := range c.Threads {
		if t < 1 || t > 10000 {
			return fmt.Errorf("invalid --threads %d: use 1 to 10000", t)
		}
	}
	if c.Time <= 0 {
		return fmt.Errorf("invalid --time %v: use a positive duration such as 60s", c.Time)
	}
	if c.Warmup < 0 {
		return fmt.Errorf("invalid --warmup %v", c.Warmup)
	}
	switch c.ClientIO {
	case "", "blocking", "netpoll":
	default:
		return fmt.Errorf("invalid --client-io %q: use blocking or netpoll", c.ClientIO)
	}
	return nil
}

// Run measures every workload at every thread count, in that order, and
// adds one Result per pair to run (which also gets the server version and
// the parameters). It stops early, returning the context's error, when ctx
// is cancelled; the results measured so far stay in run.
func Run(ctx context.Context, cfg Config, run *report.Run) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	if cfg.SeriesInterval <= 0 {
		cfg.SeriesInterval = time.Second
	}
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	maxThreads := 0
	for _, t := range cfg.Threads {
		maxThreads = max(maxThreads, t)
	}
	db, err := cfg.Conn.open(ctx, cfg.Conn.DB, maxThreads+1)
	if err != nil {
		return err
	}
	defer db.Close()
	run.Server = ServerInfo(ctx, db, cfg.Conn)
	if err := CheckTables(ctx, db, cfg.Conn, cfg.Mix.Tables); err != nil {
		return err
	}
	recordParams(run, cfg)
	dcfg := cfg.Conn.driverConfig(cfg.Conn.DB)
	for _, name := range cfg.Workloads {
		w, _ := Lookup(name)
		for _, threads := range cfg.Threads {
			connector, err := workerConnector(dcfg, cfg.ClientIO, threads)
			if err != nil {
				return fmt.Errorf("connection settings: %v", err)
			}
			res, err := measure(ctx, connector, cfg, w, threads)
			if res != nil {
				run.Add(*res)
			}
			if err != nil {
				return err
			}
		}
	}
	run.Finished = time.Now().UTC()
	return nil
}

func recordParams(run *report.Run, cfg Config) {
	if run.Params == nil {
		run.Params = map[string]any{}
	}
	p := run.Params
	m := cfg.Mix
	p["tables"] = m.Tables
	p["table_size"] = m.TableSize
	p["time"] = cfg.Time.String()
	p["warmup"] = cfg.Warmup.String()
	p["rand_type"] = cfg.Dist.Type
	p["db"] = cfg.Conn.DB
	p["client_io"] = cfg.ClientIO
	if cfg.ClientIO == "" {
		p["client_io"] = "blocking"
	}
	p["range_size"] = m.RangeSize
	p["point_selects"] = m.PointSelects
	def := DefaultMix()
	// Only the mix options that differ from sysbench's defaults, to keep
	// the report short.
	for k, v := range map[string][2]int{"simple_ranges": {m.SimpleRanges, def.SimpleRanges}, "sum_ranges": {m.SumRanges, def.SumRanges},
		"order_ranges": {m.OrderRanges, def.OrderRanges}, "distinct_ranges": {m.DistinctRanges, def.DistinctRanges},
		"index_updates": {m.IndexUpdates, def.IndexUpdates}, "non_index_updates": {m.NonIndexUpd, def.NonIndexUpd},
		"delete_inserts": {m.DeleteInserts, def.DeleteInserts}} {
		if v[0] != v[1] {
			p[k] = v[0]
		}
	}
	if !m.RangeSelects {
		p["range_selects"] = false
	}
	if m.SkipTrx {
		p["skip_trx"] = true
	}
}

// maxProcs caps the GOMAXPROCS that blocking client I/O asks for.
const maxProcs = 1026

// workerConnector opens the worker connections of one measurement at
// threads. With blocking client I/O over TCP their waits are raw system
// calls when every worker gets a P of its own (see blockingConn and
// measure), ordinary ones past maxProcs.
func workerConnector(dcfg *mysql.Config, clientIO string, threads int) (driver.Connector, error) {
	c := dcfg.Clone()
	if clientIO != "netpoll" && c.Net == "tcp" {
		c.DialFunc = blockingDialer(threads+2 <= maxProcs)
	}
	return mysql.NewConnector(c)
}

// tally is one worker's figures since the collector last took them.
type tally struct {
	mu                                        sync.Mutex
	lat                                       *report.Latency
	events, reads, writes, other, errs, recon int64
}

func (t *tally) takeInto(dst *tally) {
	t.mu.Lock()
	dst.lat.Merge(t.lat)
	t.lat.Reset()
	dst.events += t.events
	dst.reads += t.reads
	dst.writes += t.writes
	dst.other += t.other
	dst.errs += t.errs
	dst.recon += t.recon
	t.events, t.reads, t.writes, t.other, t.errs, t.recon = 0, 0, 0, 0, 0, 0
	t.mu.Unlock()
}

func (t *tally) add(o *tally) {
	t.lat.Merge(o.lat)
	t.events += o.events
	t.reads += o.reads
	t.writes += o.writes
	t.other += o.other
	t.errs += o.errs
	t.recon += o.recon
}

func (t *tally) reset() {
	t.lat.Reset()
	t.events, t.reads, t.writes, t.other, t.errs, t.recon = 0, 0, 0, 0, 0, 0
}

func newTally() *tally { return &tally{lat: report.NewLatency()} }

// measure runs one workload at one thread count: warmup, then Time of
// measurement sampled every SeriesInterval.
func measure(ctx context.Context, connector driver.Connector, cfg Config, w *Workload, threads int) (*report.Result, error) {
	kinds := w.Kinds(cfg.Mix)
	if cfg.ClientIO != "netpoll" {
		// A worker waiting for the server keeps its P (a raw ppoll, see
		// blockingConn); with a P per worker and two to spare, the
		// collector and the runtime always find one. Restored when the
		// measurement ends. Capped, since each P costs memory; past the
		// cap the waits are ordinary system calls whose P sysmon hands
		// off, which is slower but correct.
		want := min(threads+2, maxProcs)
		if prev := runtime.GOMAXPROCS(0); prev < want {
			runtime.GOMAXPROCS(want)
			defer runtime.GOMAXPROCS(prev)
		}
	}
	// Open and prepare every worker's connection before the clock starts.
	execs := make([]*sqlExec, threads)
	for i := range execs {
		x, err := newExec(ctx, connector, kinds, cfg.Mix.Tables)
		if err != nil {
			for _, x := range execs[:i] {
				x.close(false)
			}
			return nil, fmt.Errorf("%s: open connection %d of %d: %w", w.Name, i+1, threads, cfg.Conn.classify(err))
		}
		execs[i] = x
	}
	tallies := make([]*tally, threads)
	for i := range tallies {
		tallies[i] = newTally()
	}
	var stop atomic.Bool
	var fatalOnce sync.Once
	var fatal error
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	context.AfterFunc(wctx, func() { stop.Store(true) })
	var wg sync.WaitGroup
	for i := 0; i < threads; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			seed := cfg.Seed ^ (uint64(i+1) * 0x9e3779b97f4a7c15) ^ rand.Uint64()
			err := worker(wctx, &stop, cfg, w, execs[i], NewRand(cfg.Dist, seed), tallies[i])
			if err != nil {
				fatalOnce.Do(func() { fatal = err; stop.Store(true); cancel() })
			}
		}(i)
	}

	total, interval, progress := newTally(), newTally(), newTally()
	collect := func() {
		interval.reset()
		for _, t := range tallies {
			t.takeInto(interval)
		}
	}
	res := &report.Result{Workload: w.Name, Threads: threads}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	// phase runs for d, sampling every SeriesInterval (the last sample ends
	// at the deadline); false means the workers or ctx ended it early.
	phase := func(d time.Duration, warm bool) bool {
		start := time.Now()
		deadline := start.Add(d)
		lastPrint, lastTick, next := start, start, start
		for {
			next = next.Add(cfg.SeriesInterval)
			if next.After(deadline) {
				next = deadline
			}
			timer := time.NewTimer(time.Until(next))
			select {
			case <-done:
				timer.Stop()
				return false
			case <-ctx.Done():
				timer.Stop()
				return false
			case <-timer.C:
			}
			now := time.Now()
			collect()
			if !warm {
				total.add(interval)
				res.Series = append(res.Series, point(now.Sub(start), now.Sub(lastTick), interval))
			}
			progress.add(interval)
			lastTick = now
			last := !next.Before(deadline)
			if cfg.ReportInterval > 0 && (now.Sub(lastPrint) >= cfg.ReportInterval-cfg.SeriesInterval/2 || last) {
				printProgress(cfg.Progress, w.Name, threads, now.Sub(start), now.Sub(lastPrint), progress, warm)
				progress.reset()
				lastPrint = now
			}
			if last {
				return true
			}
		}
	}
	ok := true
	if cfg.Warmup > 0 {
		ok = phase(cfg.Warmup, true)
		collect() // discard what the warmup left
		progress.reset()
	}
	var elapsed time.Duration
	if ok {
		start := time.Now()
		ok = phase(cfg.Time, false)
		stop.Store(true)
		wg.Wait()
		// Events that were running at the deadline finish and count, as in
		// sysbench; the measured time ends when the last of them does.
		collect()
		total.add(interval)
		elapsed = time.Since(start)
	}
	stop.Store(true)
	cancel()
	wg.Wait()
	for _, x := range execs {
		x.close(false)
	}
	if fatal != nil {
		return nil, fmt.Errorf("%s at %d threads: %w", w.Name, threads, fatal)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%s at %d threads: workers stopped early", w.Name, threads)
	}
	secs := elapsed.Seconds()
	res.DurationS = round2(secs)
	res.Events = total.events
	res.Reads, res.Writes, res.Other = total.reads, total.writes, total.other
	res.Queries = total.reads + total.writes + total.other
	res.QPS = round2(float64(res.Queries) / secs)
	res.TPS = round2(float64(res.Events) / secs)
	res.Errors, res.Reconnects = total.errs, total.recon
	res.LatencySummary = total.lat.Summary()
	printSummary(cfg.Progress, res)
	return res, nil
}

func point(at, width time.Duration, t *tally) report.Interval {
	s := width.Seconds()
	if s <= 0 {
		s = 1e-9
	}
	return report.Interval{T: round2(at.Seconds()), QPS: round2(float64(t.reads+t.writes+t.other) / s), TPS: round2(float64(t.events) / s),
		P95Ms: t.lat.Percentile(95), Errors: t.errs, Reconnects: t.recon}
}

func round2(v float64) float64 { return float64(int64(v*100+0.5)) / 100 }

// printProgress writes one line in sysbench's --report-interval format.
func printProgress(w io.Writer, name string, threads int, at, width time.Duration, t *tally, warm bool) {
	s := width.Seconds()
	if s <= 0 {
		return
	}
	tag := ""
	if warm {
		tag = " (warmup)"
	}
	fmt.Fprintf(w, "[ %ds ] %s thds: %d tps: %.2f qps: %.2f (r/w/o: %.2f/%.2f/%.2f) lat (ms,95%%): %.2f err/s: %.2f reconn/s: %.2f%s\n",
		int(at.Seconds()+0.5), name, threads, float64(t.events)/s, float64(t.reads+t.writes+t.other)/s,
		float64(t.reads)/s, float64(t.writes)/s, float64(t.other)/s, t.lat.Percentile(95), float64(t.errs)/s, float64(t.recon)/s, tag)
}

func printSummary(w io.Writer, r *report.Result) {
	fmt.Fprintf(w, "%s threads=%d: %.2f qps, %.2f tps, latency ms p50 %.2f p95 %.2f p99 %.2f max %.2f, %d errors, %d reconnects (%.1fs)\n",
		r.Workload, r.Threads, r.QPS, r.TPS, r.P50Ms, r.P95Ms, r.P99Ms, r.MaxMs, r.Errors, r.Reconnects, r.DurationS)
}

// worker runs events until stop, recording each completed event's latency.
//
// Statements run under a context that is never cancelled: with a cancellable
// one, database/sql starts a goroutine per query and the driver hands every
// statement to its cancel watcher, which costs the client as much CPU as
// sysbench spends per query in all. Cancelling ctx sets stop instead (see
// measure), and the statement in flight finishes.
func worker(ctx context.Context, stop *atomic.Bool, cfg Config, w *Workload, x *sqlExec, r *Rand, t *tally) error {
	m := cfg.Mix
	qctx := context.Background()
	for !stop.Load() {
		if x.conn == nil {
			if err := x.connect(ctx); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				t.mu.Lock()
				t.errs++
				t.mu.Unlock()
				if classifyErr(err, cfg.Ignore) == errFatal {
					return cfg.Conn.classify(err)
				}
				sleep(ctx, 200*time.Millisecond)
				continue
			}
			t.mu.Lock()
			t.recon++
			t.mu.Unlock()
		}
		x.reads, x.writes, x.other = 0, 0, 0
		start := time.Now()
		err := w.Event(qctx, &m, r, x)
		d := time.Since(start)
		if err == nil {
			t.mu.Lock()
			t.lat.Record(d)
			t.events++
			t.reads += x.reads
			t.writes += x.writes
			t.other += x.other
			t.mu.Unlock()
			continue
		}
		if ctx.Err() != nil {
			return nil // cancelled: not the server's fault
		}
		switch classifyErr(err, cfg.Ignore) {
		case errFatal:
			x.rollback(context.Background())
			return cfg.Conn.classify(err)
		case errIgnored:
			t.mu.Lock()
			t.errs++
			t.reads += x.reads
			t.writes += x.writes
			t.other += x.other
			t.mu.Unlock()
			if !x.rollback(qctx) {
				x.close(true)
			}
		case errLost:
			t.mu.Lock()
			t.errs++
			t.mu.Unlock()
			x.close(true)
		}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
