// Command cdc-bench is the consumer side of `make bench-cdc` (issue 14's
// benchmark, the PolarDB-X CDC seed's tables): it reads one or more binlog
// endpoints (sluice serve, and MariaDB directly as the peer) at the same
// time with go-mysql's BinlogSyncer, decoding every event, while a load runs
// on the sources, and reports EPS, BPS, TPS and DT per endpoint plus
// sluice's CPU and peak RSS. bench/cdc.sh starts the sandboxes and sluice.
//
//	cdc-bench run -consumer served=repl:pw@127.0.0.1:3310 -consumer direct=root:@127.0.0.1:3307 \
//	    -heartbeat 'root@tcp(127.0.0.1:3307)/' -load 'sysbench oltp_insert ... run' -pid PID -json out.jsonl
//	cdc-bench table -in out.jsonl -out cdc.md
//
// DT comes from a heartbeat table: during the load -hb-writers writers per
// source each insert (run, now in µs) into bench.heartbeat every 10 ms; each consumer
// decodes those rows and records its arrival time minus the row's time in
// an HdrHistogram. When the load ends each writer inserts a final marker
// row; a consumer's window runs from the load's start to the arrival of
// its last marker, so an endpoint that falls behind shows a lower rate.
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
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sluice-db/sluice/internal/procstat"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(s string) error { *m = append(*m, s); return nil }

// record is one measurement: one load, every consumer's figures.
type record struct {
	Part      string   `json:"part"` // sysbench | global | large
	Workload  string   `json:"workload,omitempty"`
	Threads   int      `json:"threads,omitempty"`
	Rate      int      `json:"rate,omitempty"` // sysbench --rate, 0 unthrottled
	Sources   int      `json:"sources"`
	Size      int64    `json:"size,omitempty"` // large: the transaction's bytes of row data
	When      string   `json:"when"`
	LoadSecs  float64  `json:"load_secs"`
	SourceTPS float64  `json:"source_tps"` // sum of the loads' sysbench TPS
	Consumers []result `json:"consumers"`
	SluiceCPU float64  `json:"sluice_cpu_secs"`
	SluiceRSS float64  `json:"sluice_peak_rss_mb"`
	WindowSec float64  `json:"window_secs"`     // the longest consumer window (for sluice's CPU share)
	Round     int      `json:"round,omitempty"` // catchup: which round
	// The heartbeats' commit round trip, INSERT sent to OK (ms): the gap
	// between the DT columns' two bounds (commitdt.go).
	HBCommitP50 float64 `json:"hb_commit_p50_ms,omitempty"`
	HBCommitP99 float64 `json:"hb_commit_p99_ms,omitempty"`
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: cdc-bench run|catchup|table [flags] (-h for each)")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = runCmd(os.Args[2:])
	case "catchup":
		err = catchupCmd(os.Args[2:])
	case "table":
		err = tableCmd(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q: use run, catchup or table", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cdc-bench:", err)
		os.Exit(1)
	}
}

func runCmd(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	var consumers, heartbeats, loads multi
	fs.Var(&consumers, "consumer", "name=user:password@host:port[/markers] of an endpoint to read (repeat; ${VAR} in the password is expanded)")
	fs.Var(&heartbeats, "heartbeat", "DSN of a source to write heartbeats to (repeat; the first also takes -large)")
	fs.Var(&loads, "load", "shell command run as load, all at once (repeat); sysbench's 'transactions:' line gives source TPS")
	large := fs.Int64("large", 0, "instead of -load: one transaction of this many bytes of ~1 MB rows on the first -heartbeat source")
	pid := fs.Int("pid", 0, "sluice's pid, for its CPU and peak RSS")
	part := fs.String("part", "sysbench", "label: sysbench, global or large")
	workload := fs.String("workload", "", "label")
	threads := fs.Int("threads", 0, "label")
	rate := fs.Int("rate", 0, "label: the load's sysbench --rate (0: unthrottled)")
	// One writer gets one heartbeat per commit round trip: at 64 threads
	// that was 300 in 15 s, and a p99 of 300 samples is their third
	// largest. Several writers, each every 10 ms, sample the same delay
	// more often.
	hbWriters := fs.Int("hb-writers", 4, "heartbeat writers per source, each inserting every 10 ms")
	drain := fs.Duration("drain", 2*time.Minute, "how long to wait after the load for every consumer's final marker")
	out := fs.String("json", "", "append the record to this file (JSON lines)")
	_ = fs.Parse(args)
	if len(consumers) == 0 || len(heartbeats) == 0 {
		return errors.New("need at least one -consumer and one -heartbeat")
	}
	if *hbWriters < 1 {
		return errors.New("-hb-writers must be at least 1")
	}
	if (len(loads) == 0) == (*large == 0) {
		return errors.New("give either -load or -large")
	}
	runID := time.Now().UnixNano()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	srcs := make([]*sql.DB, len(heartbeats))
	for i, dsn := range heartbeats {
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			return err
		}
		defer db.Close()
		srcs[i] = db
		for _, q := range []string{
			"CREATE DATABASE IF NOT EXISTS bench",
			"CREATE TABLE IF NOT EXISTS bench.heartbeat (run BIGINT NOT NULL, ts BIGINT NOT NULL, mark TINYINT NOT NULL, id BIGINT NOT NULL AUTO_INCREMENT, PRIMARY KEY (id))",
			"ALTER TABLE bench.heartbeat ADD COLUMN IF NOT EXISTS src TINYINT NOT NULL DEFAULT 0",
			"CREATE TABLE IF NOT EXISTS bench.big (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, b LONGBLOB)",
		} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("heartbeat source %d: %s: %w", i+1, q, err)
			}
		}
	}

	cs := make([]*consumer, len(consumers))
	var wg sync.WaitGroup
	errs := make(chan error, len(consumers))
	for i, s := range consumers {
		ep, err := parseEndpoint(s)
		if err != nil {
			return err
		}
		markers := len(heartbeats)
		if ep.Markers > 0 {
			markers = ep.Markers
		}
		cs[i] = newConsumer(ep, uint32(60000+i), markers, runID)
		ready := make(chan error, 1)
		wg.Add(1)
		go func(c *consumer) {
			defer wg.Done()
			if err := c.run(ctx, ready); err != nil {
				errs <- err
			}
		}(cs[i])
		if err := <-ready; err != nil {
			cancel()
			wg.Wait()
			return err
		}
	}
	defer func() { cancel(); wg.Wait() }()

	cpu0 := procCPU(*pid)
	rss := procstat.StartPeakRSS(*pid)
	t0 := time.Now()
	for _, c := range cs {
		c.open(t0)
	}
	hbStop := make(chan struct{})
	var hbWG sync.WaitGroup
	hbErr := make(chan error, len(srcs)**hbWriters)
	hb := newHBLog()
	for i, db := range srcs {
		for range *hbWriters {
			hbWG.Add(1)
			go func(db *sql.DB, src int8) {
				defer hbWG.Done()
				if err := heartbeat(hbStop, db, runID, src, hb); err != nil {
					hbErr <- err
				}
			}(db, int8(i))
		}
	}

	rec := record{Part: *part, Workload: *workload, Threads: *threads, Rate: *rate, Sources: len(heartbeats),
		When: t0.UTC().Format("2006-01-02 15:04 UTC"), Size: *large}
	var commitSent time.Time
	var loadErr error
	if *large > 0 {
		commitSent, loadErr = largeTxn(ctx, srcs[0], *large)
	} else {
		rec.SourceTPS, loadErr = runLoads(ctx, loads)
	}
	rec.LoadSecs = time.Since(t0).Seconds()
	close(hbStop)
	hbWG.Wait()
	close(hbErr)
	for err := range hbErr {
		loadErr = errors.Join(loadErr, err)
	}
	if loadErr != nil {
		return loadErr
	}
	for i, db := range srcs {
		if _, err := db.ExecContext(ctx, "INSERT INTO bench.heartbeat (run, ts, mark) VALUES (?, ?, 1)", runID, time.Now().UnixMicro()); err != nil {
			return fmt.Errorf("final marker on source %d: %w", i+1, err)
		}
	}
	deadline := time.After(*drain)
	for _, c := range cs {
		select {
		case <-c.done:
		case err := <-errs:
			return err
		case <-deadline:
			fmt.Fprintf(os.Stderr, "cdc-bench: %s did not deliver the final marker within %s; its figures cover the window up to now\n", c.ep.Name, *drain)
		}
	}
	end := time.Now()
	rec.SluiceCPU = procCPU(*pid) - cpu0
	rec.SluiceRSS = rss.Stop()
	for _, c := range cs {
		r := c.result(end, commitSent)
		rec.Consumers = append(rec.Consumers, r)
		rec.WindowSec = max(rec.WindowSec, r.Secs)
	}
	commitDT(rec.Consumers, cs, hb)
	rec.HBCommitP50, rec.HBCommitP99 = float64(hb.commit.ValueAtQuantile(50))/1000, float64(hb.commit.ValueAtQuantile(99))/1000
	for _, r := range rec.Consumers {
		fmt.Printf("  %-8s %8.0f TPS %9.0f EPS %7.2f MB/s  DT p50 %6.1f ms p99 %7.1f ms (n=%d); from the OK p50 %.1f p99 %.1f ms (%d early); behind first p50 %.1f p99 %.1f ms%s%s\n",
			r.Name, r.TPS, r.EPS, r.BPS/1e6, r.DTp50, r.DTp99, r.DTn, r.AckDTp50, r.AckDTp99, r.AckEarly, r.Behindp50, r.Behindp99, largeLine(r), stallLine(r.Stalls))
	}
	if rec.HBCommitP99 > 0 {
		fmt.Printf("  heartbeat commit round trip (INSERT sent to OK) p50 %.1f ms p99 %.1f ms\n", rec.HBCommitP50, rec.HBCommitP99)
	}
	fmt.Printf("  source TPS (sysbench) %.0f; sluice CPU %.1f s, peak RSS %.0f MB\n", rec.SourceTPS, rec.SluiceCPU, rec.SluiceRSS)
	if *out == "" {
		return nil
	}
	f, err := os.OpenFile(*out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	line, _ := json.Marshal(rec)
	_, err = f.Write(append(line, '\n'))
	return err
}

// stallLine lists the seconds of the window with a heartbeat 200 ms late
// or more, as second:worst-ms.
func stallLine(st []stall) string {
	if len(st) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("; stalls (s:ms)")
	for _, x := range st {
		fmt.Fprintf(&b, " %d:%d", x.At, x.MS)
	}
	return b.String()
}

func largeLine(r result) string {
	if r.LargeBPS == 0 {
		return ""
	}
	return fmt.Sprintf("; large txn DT %.0f ms, %.1f MB/s, %.1f EPS", r.LargeDT, r.LargeBPS/1e6, r.LargeEPS)
}

// heartbeat inserts a row holding the current time in µs every 10 ms
// until stop is closed. A slow insert (the source is busy) delays the next
// one rather than piling them up: the ticker drops ticks. An insert is
// never cancelled midway: the server could still commit it after the final
// marker, where one reader's window would count it and another's not.
func heartbeat(stop <-chan struct{}, db *sql.DB, runID int64, src int8, hb *hbLog) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return nil
		case <-t.C:
		}
		sent := time.Now().UnixMicro()
		res, err := db.Exec("INSERT INTO bench.heartbeat (run, ts, mark, src) VALUES (?, ?, 0, ?)", runID, sent, src)
		if err != nil {
			return fmt.Errorf("heartbeat: %w", err)
		}
		acked := time.Now().UnixMicro()
		if id, err := res.LastInsertId(); err == nil {
			hb.note(hbKey{src, id}, sent, acked)
		}
	}
}

var sysbenchTPS = regexp.MustCompile(`transactions:\s+\d+\s+\(([0-9.]+) per sec`)

// runLoads runs the commands at once and returns the sum of their TPS.
func runLoads(ctx context.Context, loads []string) (float64, error) {
	type res struct {
		tps float64
		err error
	}
	ch := make(chan res, len(loads))
	for _, l := range loads {
		go func(l string) {
			cmd := exec.CommandContext(ctx, "sh", "-c", l)
			// The load generator runs in its own session, hence its own
			// scheduler autogroup (Linux groups CPU time by session): in
			// this process's session its 64 threads took the consumer's
			// and heartbeat writers' share, and the measuring instrument
			// stalled for both readers alike (issue 14). On the seed's
			// machines load, database, CDC node and consumer each have
			// their own host.
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			out, err := cmd.CombinedOutput()
			if err != nil {
				ch <- res{err: fmt.Errorf("load %q: %w\n%s", l, err, out)}
				return
			}
			var tps float64
			if m := sysbenchTPS.FindSubmatch(out); m != nil {
				tps, _ = strconv.ParseFloat(string(m[1]), 64)
			}
			ch <- res{tps: tps}
		}(l)
	}
	var sum float64
	var err error
	for range loads {
		r := <-ch
		sum += r.tps
		err = errors.Join(err, r.err)
	}
	return sum, err
}

// largeTxn writes one transaction of size bytes as ~1 MB-row INSERTs into
// bench.big, and returns when COMMIT was sent.
func largeTxn(ctx context.Context, db *sql.DB, size int64) (time.Time, error) {
	const row = 1 << 20
	if _, err := db.ExecContext(ctx, "TRUNCATE bench.big"); err != nil {
		return time.Time{}, err
	}
	buf := make([]byte, row)
	for i := range buf {
		buf[i] = byte('a' + i%26)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return time.Time{}, err
	}
	defer func() { _ = tx.Rollback() }()
	for n := int64(0); n < size; n += row {
		if _, err := tx.ExecContext(ctx, "INSERT INTO bench.big (b) VALUES (?)", buf); err != nil {
			return time.Time{}, fmt.Errorf("large transaction at %d MB: %w", n>>20, err)
		}
	}
	sent := time.Now()
	return sent, tx.Commit()
}
