package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice/internal/procstat"
)

// peerSpec is one -peer: name=..,prefix=..,committed=0|1,log=FILE,cmd=...
// (cmd last: it may hold commas). The command is run with sh -c 'exec ...',
// so the pid measured is the peer's own process (sluice, or the JVM).
type peerSpec struct {
	Name, Prefix, Log, Cmd string
	Committed              bool
}

func parsePeer(s string) (peerSpec, error) {
	var p peerSpec
	rest := s
	for rest != "" {
		if c, ok := strings.CutPrefix(rest, "cmd="); ok {
			p.Cmd = c
			break
		}
		kv, tail, _ := strings.Cut(rest, ",")
		rest = tail
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return p, fmt.Errorf("peer %q: %q is not key=value", s, kv)
		}
		switch k {
		case "name":
			p.Name = v
		case "prefix":
			p.Prefix = v
		case "log":
			p.Log = v
		case "committed":
			p.Committed = v == "1" || v == "true"
		default:
			return p, fmt.Errorf("peer %q: unknown key %q (want name, prefix, committed, log, cmd)", s, k)
		}
	}
	if p.Name == "" || p.Prefix == "" || p.Cmd == "" {
		return p, fmt.Errorf("peer %q: name, prefix and cmd (last) are needed", s)
	}
	return p, nil
}

// result is one peer's figures in one row of the benchmark.
type result struct {
	Part       string  `json:"part"` // backlog | live
	Round      int     `json:"round"`
	Name       string  `json:"name"`
	When       string  `json:"when"`
	Events     int     `json:"events"`
	Dups       int     `json:"dups"`
	Tombstones int     `json:"tombstones"`
	Bytes      int64   `json:"bytes"`
	StartSecs  float64 `json:"start_secs"` // process start to first event
	Secs       float64 `json:"secs"`       // first to last event
	TotalSecs  float64 `json:"total_secs"` // process start to last event
	FirstBatch int     `json:"first_batch"`
	EPS        float64 `json:"eps"`
	MBps       float64 `json:"mbps"`
	CPUSecs    float64 `json:"cpu_secs"`       // in the first-to-last window
	CPUTotal   float64 `json:"cpu_total_secs"` // from process start (JVM start-up included)
	RSSMB      float64 `json:"peak_rss_mb"`
	DTp50      float64 `json:"dt_p50_ms,omitempty"`
	DTp99      float64 `json:"dt_p99_ms,omitempty"`
	DTn        int64   `json:"dt_n,omitempty"`
	SourceTPS  float64 `json:"source_tps,omitempty"`
	HBInserted int64   `json:"hb_inserted,omitempty"` // heartbeat rows inserted from the load's start (the marker included)
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(s string) error { *m = append(*m, s); return nil }

// peerRun is one started peer and its consumer.
type peerRun struct {
	spec      peerSpec
	cmd       *exec.Cmd
	exited    chan struct{} // closed when the process has exited
	exitErr   error
	c         *consumer
	start     time.Time
	cpuFirst  float64
	firstOnce sync.Once
	rss       *procstat.PeakRSS
}

func runCmd(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	var peers multi
	fs.Var(&peers, "peer", "name=..,prefix=..,committed=0|1,log=FILE,cmd=SHELL COMMAND (repeat; cmd last)")
	brokers := fs.String("brokers", "", "bootstrap brokers, comma-separated")
	db := fs.String("db", "sbtest", "the source database")
	tables := fs.Int("tables", 4, "sysbench tables (topics <prefix>.<db>.sbtest1..n)")
	expect := fs.Int("expect", 0, "row changes to wait for (the backlog's, from mariadb-binlog)")
	part := fs.String("part", "backlog", "label: backlog or live")
	round := fs.Int("round", 0, "label")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up on a peer after this long")
	heartbeat := fs.String("heartbeat", "", "live: DSN of the source to write heartbeat rows to")
	load := fs.String("load", "", "live: the load's shell command (sysbench ... run)")
	count := fs.String("count", "", "live: shell command printing the row changes the load wrote (run after it)")
	out := fs.String("json", "", "append the results to this file (JSON lines)")
	_ = fs.Parse(args)
	live := *load != ""
	if len(peers) == 0 || *brokers == "" {
		return errors.New("need -brokers and at least one -peer")
	}
	if live && (*heartbeat == "" || *count == "") {
		return errors.New("a live run (-load) needs -heartbeat and -count")
	}
	if !live && *expect <= 0 {
		return errors.New("need -expect (the backlog's row changes)")
	}
	// SIGINT/SIGTERM end the run through ctx, so that the deferred stops
	// end the peers too (a JVM left behind would hold the ports).
	sctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(sctx, *timeout)
	defer cancel()
	bl := strings.Split(*brokers, ",")

	var hb *sql.DB
	if live {
		var err error
		if hb, err = sql.Open("mysql", *heartbeat); err != nil {
			return err
		}
		defer hb.Close()
		for _, q := range []string{"CREATE DATABASE IF NOT EXISTS bench",
			"CREATE TABLE IF NOT EXISTS " + heartbeatTable + " (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, ts BIGINT NOT NULL, mark TINYINT NOT NULL)"} {
			if _, err := hb.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("heartbeat: %s: %w", q, err)
			}
		}
	}

	var runs []*peerRun
	var wg sync.WaitGroup
	errc := make(chan error, 2*len(peers))
	dead := make(chan *peerRun, len(peers)) // any peer that exits
	defer func() {
		for _, r := range runs {
			r.stop()
		}
		cancel()
		wg.Wait()
	}()
	for _, s := range peers {
		spec, err := parsePeer(s)
		if err != nil {
			return err
		}
		offs, err := prepareTopics(ctx, bl, topicsOf(spec.Prefix, *db, *tables, live))
		if err != nil {
			return fmt.Errorf("%s: %w", spec.Name, err)
		}
		want := *expect
		if live {
			want = 1 << 62 // set once the load is over
		}
		c, err := newConsumer(spec.Name, bl, offs, spec.Committed, want, live)
		if err != nil {
			return err
		}
		r := &peerRun{spec: spec, c: c, exited: make(chan struct{})}
		c.onFirst = func() { r.firstOnce.Do(func() { r.cpuFirst = procstat.ProcessCPU(r.pid()) }) }
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.run(ctx); err != nil {
				errc <- err
			}
		}()
		if err := r.startProcess(dead); err != nil {
			return err
		}
		runs = append(runs, r)
	}

	var sourceTPS float64
	var loadStart time.Time
	var hbInserted int64
	if live {
		// Heartbeats from now on; the load starts once every peer has
		// delivered one (Connect takes tens of seconds to start).
		hbStop := make(chan struct{})
		hbDone := make(chan error, 1)
		go func() { hbDone <- heartbeats(hbStop, hb) }()
		for _, r := range runs {
			if err := r.waitHeartbeat(ctx, errc); err != nil {
				close(hbStop)
				return err
			}
		}
		loadStart = time.Now()
		for _, r := range runs {
			r.c.delaySince(loadStart)
		}
		var err error
		sourceTPS, err = runLoad(ctx, *load)
		close(hbStop)
		err = errors.Join(err, <-hbDone)
		if err != nil {
			return err
		}
		if _, err := hb.ExecContext(ctx, "INSERT INTO "+heartbeatTable+" (ts, mark) VALUES (?, 1)", time.Now().UnixMicro()); err != nil {
			return fmt.Errorf("final heartbeat: %w", err)
		}
		// Every heartbeat inserted from the load's start must reach each
		// peer: the delay's sample count is checked against this.
		if err := hb.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+heartbeatTable+" WHERE ts >= ?", loadStart.UnixMicro()).Scan(&hbInserted); err != nil {
			return fmt.Errorf("count heartbeats: %w", err)
		}
		n, err := countRows(ctx, *count)
		if err != nil {
			return err
		}
		for _, r := range runs {
			r.c.setWant(n)
		}
		fmt.Printf("  load: %.0f TPS, %d row changes\n", sourceTPS, n)
	}

	var res []result
	for _, r := range runs {
		select {
		case <-r.c.done:
		case err := <-errc:
			return err
		case d := <-dead:
			return fmt.Errorf("%s exited before delivering every event: %v (see %s)", d.spec.Name, d.exitErr, d.spec.Log)
		case <-ctx.Done():
			t := r.c.snapshot()
			return fmt.Errorf("%s: %d of %d events after %s (see %s)", r.spec.Name, t.Events, r.c.want, *timeout, r.spec.Log)
		}
		cpu := procstat.ProcessCPU(r.pid())
		t := r.c.snapshot()
		x := result{Part: *part, Round: *round, Name: r.spec.Name, When: r.start.UTC().Format("2006-01-02 15:04 UTC"),
			Events: t.Events, Dups: t.Dups, Tombstones: t.Tombstones, Bytes: t.Bytes,
			StartSecs: t.First.Sub(r.start).Seconds(), Secs: t.Last.Sub(t.First).Seconds(),
			TotalSecs: t.Last.Sub(r.start).Seconds(), FirstBatch: t.FirstBatch,
			CPUSecs: cpu - r.cpuFirst, CPUTotal: cpu, RSSMB: r.rss.Stop(), SourceTPS: sourceTPS, HBInserted: hbInserted}
		x.EPS, x.MBps = rate(t, x.Secs)
		x.DTp50, x.DTp99, x.DTn = t.delay()
		r.rss = nil
		res = append(res, x)
	}
	for _, x := range res {
		fmt.Printf("  %-9s %7d events (%d repeated) in %6.1f s (first after %4.1f s, %d with it): %7.0f events/s %6.2f MB/s; CPU %5.1f s (%.1f from start), peak RSS %4.0f MB%s\n",
			x.Name, x.Events, x.Dups, x.Secs, x.StartSecs, x.FirstBatch, x.EPS, x.MBps, x.CPUSecs, x.CPUTotal, x.RSSMB, dtLine(x))
	}
	if *out == "" {
		return nil
	}
	f, err := os.OpenFile(*out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, x := range res {
		line, _ := json.Marshal(x)
		if _, err := f.Write(append(line, '\n')); err != nil {
			return err
		}
	}
	return nil
}

// rate is events/s and MB/s over the window from the first arrival to the
// last: the events that came with the first arrival were produced before
// the window opened, so they are left out (for sluice that is one Kafka
// transaction, up to 2000 source transactions; for Debezium one poll).
// Bytes are scaled by the same share.
func rate(t tally, secs float64) (eps, mbps float64) {
	if secs <= 0 || t.Events <= t.FirstBatch {
		return 0, 0
	}
	n := float64(t.Events - t.FirstBatch)
	return n / secs, float64(t.Bytes) * n / float64(t.Events) / 1e6 / secs
}

func dtLine(x result) string {
	if x.DTn == 0 {
		return ""
	}
	return fmt.Sprintf("; delay p50 %.1f ms p99 %.1f ms (n=%d of %d heartbeats inserted)", x.DTp50, x.DTp99, x.DTn, x.HBInserted)
}

func (r *peerRun) pid() int {
	if r.cmd == nil || r.cmd.Process == nil {
		return 0
	}
	return r.cmd.Process.Pid
}

func (r *peerRun) startProcess(dead chan<- *peerRun) error {
	log, err := os.OpenFile(r.spec.Log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("%s: log: %w", r.spec.Name, err)
	}
	r.cmd = exec.Command("sh", "-c", "exec "+r.spec.Cmd)
	r.cmd.Stdout, r.cmd.Stderr = log, log
	r.start = time.Now()
	if err := r.cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("%s: start: %w", r.spec.Name, err)
	}
	r.rss = procstat.StartPeakRSS(r.cmd.Process.Pid)
	go func() {
		r.exitErr = r.cmd.Wait()
		log.Close()
		close(r.exited)
		dead <- r
	}()
	return nil
}

// stop ends the peer with SIGTERM (Connect then flushes its offsets, sluice
// commits its open Kafka transaction) and waits up to a minute.
func (r *peerRun) stop() {
	if r.rss != nil {
		r.rss.Stop()
		r.rss = nil
	}
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(time.Minute):
		_ = r.cmd.Process.Kill()
		<-r.exited
	}
	r.cmd = nil
}

func (r *peerRun) waitHeartbeat(ctx context.Context, errc <-chan error) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if r.c.snapshot().Heartbeats > 0 {
			return nil
		}
		select {
		case <-t.C:
		case err := <-errc:
			return err
		case <-r.exited:
			return fmt.Errorf("%s exited: %v (see %s)", r.spec.Name, r.exitErr, r.spec.Log)
		case <-ctx.Done():
			return fmt.Errorf("%s delivered no heartbeat in time (see %s)", r.spec.Name, r.spec.Log)
		}
	}
}

// heartbeats inserts a row holding the current time in µs every 10 ms
// until stop is closed (a slow insert delays the next: no pile-up).
func heartbeats(stop <-chan struct{}, db *sql.DB) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return nil
		case <-t.C:
		}
		if _, err := db.Exec("INSERT INTO "+heartbeatTable+" (ts, mark) VALUES (?, 0)", time.Now().UnixMicro()); err != nil {
			return fmt.Errorf("heartbeat: %w", err)
		}
	}
}

var sysbenchTPS = regexp.MustCompile(`transactions:\s+\d+\s+\(([0-9.]+) per sec`)

func runLoad(ctx context.Context, load string) (float64, error) {
	out, err := exec.CommandContext(ctx, "sh", "-c", load).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("load %q: %w\n%s", load, err, out)
	}
	var tps float64
	if m := sysbenchTPS.FindSubmatch(out); m != nil {
		tps, _ = strconv.ParseFloat(string(m[1]), 64)
	}
	return tps, nil
}

func countRows(ctx context.Context, cmd string) (int, error) {
	out, err := exec.CommandContext(ctx, "sh", "-c", cmd).Output()
	if err != nil {
		return 0, fmt.Errorf("count %q: %w", cmd, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("count %q printed %q, want a positive number", cmd, out)
	}
	return n, nil
}
