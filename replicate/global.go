package replicate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/binlog"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/internal/dumpfmt"
	"github.com/sluice-db/sluice/internal/metricshttp"
	"github.com/sluice-db/sluice/merge"
	"github.com/sluice-db/sluice/relay"
	"github.com/sluice-db/sluice/task"
)

// GlobalStatusFile, in the task directory, is the global binlog's status,
// refreshed every second.
const GlobalStatusFile = "global-status.json"

// GlobalStatus is the global binlog's status: the merge's, and what each
// source's relay last heard from its source.
type GlobalStatus struct {
	Updated time.Time          `json:"updated"`
	Merge   merge.Status       `json:"merge"`
	Sources []GlobalSourceStat `json:"sources"`
	// Rates of the merged stream over the last interval.
	Rates Rates `json:"rates"`
	// Serve is the binlog service: its address and each replica reading.
	Serve *ServeStatus `json:"serve,omitempty"`
	// MetricsAddr serves the merge's and the service's Prometheus metrics.
	MetricsAddr string `json:"metrics_addr,omitempty"`
}

// Rates are per second, over the last status interval.
type Rates struct {
	Transactions float64 `json:"transactions_per_sec"`
	Events       float64 `json:"events_per_sec"`
	Bytes        float64 `json:"bytes_per_sec"`
}

// ReadGlobalStatus reads a global binlog's status file.
func ReadGlobalStatus(dir string) (GlobalStatus, error) {
	var s GlobalStatus
	b, err := os.ReadFile(filepath.Join(dir, GlobalStatusFile))
	if errors.Is(err, os.ErrNotExist) {
		return s, &sluice.Error{Op: "read global binlog status", Err: fmt.Errorf("%w: no %s in %s", sluice.ErrConfig, GlobalStatusFile, dir),
			Hint: "the global binlog has not run yet; start it with sluice serve --config"}
	}
	if err != nil {
		return s, fmt.Errorf("read global binlog status: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("read global binlog status %s: %w", filepath.Join(dir, GlobalStatusFile), err)
	}
	return s, nil
}

// GlobalSourceStat is one source's part of GlobalStatus.
type GlobalSourceStat struct {
	Name     string          `json:"name"`
	DomainID uint32          `json:"domain_id"`
	Relay    sluice.Position `json:"relay"`
	Heard    time.Time       `json:"heard"`
	Merged   sluice.Position `json:"merged"`
	// Its part of the merged stream (totals and lag: Merge.Sources).
	Rates Rates `json:"rates"`
}

// globalSource is one source of the global binlog at run time.
type globalSource struct {
	cfg  task.Source
	bcfg binlog.Config
	log  *relay.Log
	pos  sluice.Position // where its relay continues
	// start is the source's GTID position at its relay's start.
	start string

	mu sync.Mutex
	w  *relay.Writer
}

func (g *globalSource) heard() (sluice.Position, time.Time) {
	g.mu.Lock()
	w := g.w
	g.mu.Unlock()
	if w == nil {
		return sluice.Position{}, time.Time{}
	}
	return WriterHeard(w)
}

// RunGlobalServe runs the global binlog of a task file with sources::
// each source's binlog is copied into its own relay log (dir/relay/<name>),
// the relays are merged into one binlog (dir/global), and that binlog is
// served over the MySQL replication protocol until ctx ends. A restart
// continues every relay and the merged binlog where their complete data
// ends. log takes the messages (nil drops them).
func RunGlobalServe(ctx context.Context, t *task.Config, log *slog.Logger, ready func(addr string)) error {
	rc, err := FromTask(t)
	if err != nil {
		return err
	}
	rc.Log = log
	log = rc.logger()
	logf := func(format string, a ...any) { log.Info(fmt.Sprintf(format, a...)) }
	srcs := make([]*globalSource, len(t.Sources))
	for i, s := range t.Sources {
		g, err := openGlobalSource(ctx, t, rc, s, logf)
		if err != nil {
			return err
		}
		defer g.log.Close()
		srcs[i] = g
	}
	gdir := filepath.Join(t.Dir, "global")
	gcfg := relay.DefaultConfig(gdir)
	// The merge's checkpoint must never run ahead of the merged data.
	gcfg.Sync, gcfg.Retain, gcfg.Flavor = relay.SyncCommit, rc.Relay.Retain, "mariadb"
	glog, err := relay.Open(gcfg)
	if err != nil {
		return err
	}
	defer glog.Close()
	gw, err := glog.NewWriter()
	if err != nil {
		return err
	}
	defer gw.Close()
	mcfg := merge.DefaultConfig(gdir, t.Serve.ServerID)
	if t.Serve.MaxBinlogSize > 0 {
		mcfg.MaxFileSize = t.Serve.MaxBinlogSize
	}
	if t.Serve.MergeMemory > 0 {
		mcfg.SpillAbove = t.Serve.MergeMemory
	}
	msrcs := make([]merge.Source, len(srcs))
	for i, g := range srcs {
		msrcs[i] = merge.Source{Name: g.cfg.Name, DomainID: *g.cfg.DomainID, ServerID: g.cfg.ServerID, Start: g.start,
			Open: MergeInput(g.log), Heard: g.heard}
	}
	m, err := merge.New(mcfg, msrcs, MergeOutput(glog, gw))
	if err != nil {
		return err
	}
	sc, err := serveConfig(&t.Serve)
	if err != nil {
		return err
	}
	// Its databases come from several sources and its positions are its
	// own, so no one source's metadata (nor its SHOW MASTER STATUS under a
	// read lock) matches it.
	sc.NoForward = "the global binlog of sources: merges several sources (fix: ask the source that holds the database, or serve one source's binlog with a task of its own)"
	srv, err := newServer(sc, ServeGlobal(glog, m), log)
	if err != nil {
		return err
	}
	// Per source and for the merged stream (merge), per replica (serve):
	// the rates of their _total counters are the BPS, EPS and TPS.
	reg := prometheus.NewRegistry()
	reg.MustRegister(ProcessCollectors()...)
	prometheus.WrapRegistererWith(prometheus.Labels{"task": t.Name}, reg).MustRegister(append(m.Collectors(), srv.Collectors()...)...)
	metAddr := ""
	if rc.MetricsAddr != "" {
		ms, err := metricshttp.Serve(reg, rc.MetricsAddr, "serve metrics", "set incremental.metrics-addr to a free loopback address such as 127.0.0.1:9358, or 127.0.0.1:0 for any port")
		if err != nil {
			return err
		}
		defer ms.Close()
		metAddr = ms.Addr
		logf("metrics on http://%s/metrics", metAddr)
	}
	ln, err := net.Listen("tcp", t.Serve.Listen)
	if err != nil {
		return &sluice.Error{Op: "serve: listen on " + t.Serve.Listen, Err: err, Hint: "pick a free address for serve.listen"}
	}
	logf("global binlog of %d sources in %s; serving it on %s", len(srcs), gdir, ln.Addr())
	if ready != nil {
		ready(ln.Addr().String())
	}
	stop := startServe(srv, ln)
	g := newGroup(ctx)
	for _, src := range srcs {
		g.Go(func(ctx context.Context) error {
			// The reader reconnects by itself: a source that is down holds
			// the merge back until it returns; what reaches here is fatal.
			if err := fetch(ctx, src.log, src.bcfg, src.pos, nil, src.fetching); err != nil {
				return fmt.Errorf("source %s: %w", src.cfg.Name, err)
			}
			return nil
		})
	}
	g.Go(func(ctx context.Context) error {
		// The merge reads each relay from its start: wait until the
		// writer has made it (a new relay has no file before).
		for _, src := range srcs {
			if err := src.log.WaitFor(ctx, src.pos); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
		return m.Run(ctx)
	})
	purgeEvery, _ := time.ParseDuration(t.Serve.PurgeInterval) // checked by the task file
	g.Go(func(ctx context.Context) error { retainServed(ctx, glog, purgeEvery, logf); return nil })
	sv := func() *ServeStatus { return &ServeStatus{Addr: ln.Addr().String(), Replicas: srv.Stats()} }
	g.Go(func(ctx context.Context) error { globalStatusLoop(ctx, t.Dir, metAddr, sv, m, srcs, logf); return nil })
	ferr := g.Wait()
	if err := stop(); ferr == nil {
		ferr = err
	}
	return ferr
}

// openGlobalSource checks a source and opens its relay.
func openGlobalSource(ctx context.Context, t *task.Config, rc Config, s task.Source, logf func(string, ...any)) (*globalSource, error) {
	g := &globalSource{cfg: s}
	g.bcfg = binlog.DefaultConfig(s.Endpoint)
	g.bcfg.ServerID = binlog.ServerIDFor(t.Name + "/" + s.Name)
	if t.Incremental.ServerID != 0 {
		g.bcfg.ServerID = t.Incremental.ServerID
	}
	// Heartbeats feed the merge's watermark: an idle source holds the
	// other sources' transactions back for up to one period.
	g.bcfg.Heartbeat = 500 * time.Millisecond
	g.bcfg.Notify = func(format string, a ...any) { logf("source %s: %s", s.Name, fmt.Sprintf(format, a...)) }
	info, err := binlog.Check(ctx, g.bcfg)
	if err != nil {
		return nil, err
	}
	if info.Flavor != "mariadb" {
		return nil, &sluice.Error{Op: "global binlog: source " + s.Name, Err: fmt.Errorf("%w: %s is %s", sluice.ErrConfig, s.Addr(), info.Version),
			Hint: "the global binlog merges MariaDB sources (their GTID domains keep the sources apart); serve a MySQL source alone with source:"}
	}
	g.bcfg.Flavor, g.bcfg.ServerTLS = info.Flavor, info.TLS
	lc := rc.Relay
	lc.Dir, lc.Flavor = filepath.Join(t.Dir, "relay", s.Name), info.Flavor
	if g.log, err = relay.Open(lc); err != nil {
		return nil, err
	}
	g.pos = g.log.End()
	if g.pos.File == "" {
		if g.pos, err = globalStart(ctx, s, info, g.bcfg); err != nil {
			g.log.Close()
			return nil, err
		}
		g.start = g.pos.GTIDSet
	} else if g.start, err = relayHeadGTID(ctx, g.log); err != nil {
		g.log.Close()
		return nil, err
	}
	logf("source %s (%s, domain %d): relay in %s from %s", s.Name, s.Addr(), *s.DomainID, lc.Dir, g.pos)
	return g, nil
}

// globalStart is where a new source relay begins: the source's own
// start, or its current position.
func globalStart(ctx context.Context, s task.Source, info *binlog.Info, bcfg binlog.Config) (sluice.Position, error) {
	want := sluice.Position{File: s.BinlogFile, Pos: s.BinlogPos, GTIDSet: s.GTIDSet, Flavor: info.Flavor}
	switch {
	case want.GTIDSet != "":
		p, err := binlog.ResolveGTID(ctx, bcfg, want.GTIDSet)
		if err != nil {
			return want, err
		}
		want.File, want.Pos = p.File, p.Pos
	case want.File == "":
		db, err := dbconn.Open(ctx, "source", s.Endpoint, dbconn.Options{MaxOpen: 1})
		if err != nil {
			return want, err
		}
		defer db.Close()
		var a, b any
		if err := db.QueryRowContext(ctx, "SHOW MASTER STATUS").Scan(&want.File, &want.Pos, &a, &b); err != nil {
			return want, dbconn.Classify(err, "source", s.Endpoint)
		}
		fallthrough
	default:
		g, err := gtidAt(ctx, s.Endpoint, want)
		if err != nil {
			return want, err
		}
		want.GTIDSet = g
	}
	if want.Pos < 4 {
		want.Pos = 4
	}
	return want, binlog.CheckPosition(info, want, s.Endpoint)
}

// relayHeadGTID is the GTID position at the start of a relay: the
// Gtid_list at the head of its first file.
func relayHeadGTID(ctx context.Context, l *relay.Log) (string, error) {
	r, err := l.NewReader(sluice.Position{}, nil)
	if err != nil {
		return "", err
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	set := ""
	for i := 0; i < 3; i++ {
		ev, err := r.NextRaw(ctx)
		if err != nil {
			break // a relay of its head only: nothing more to read
		}
		set = ev.Pos.GTIDSet
	}
	return set, nil
}

// fetching records the relay writer of the source's fetch, for heard.
func (g *globalSource) fetching(w *relay.Writer, _ *binlog.Reader) {
	g.mu.Lock()
	g.w = w
	g.mu.Unlock()
}

// globalStatusLoop refreshes the status file every second, lets each
// source's relay purge what the merged binlog durably holds, and logs
// when the merge has been waiting for a source for a while (it is down,
// or its relay lags) and when that ends.
func globalStatusLoop(ctx context.Context, dir, metAddr string, sv func() *ServeStatus, m *merge.Merger, srcs []*globalSource, logf func(string, ...any)) {
	tk := time.NewTicker(time.Second)
	defer tk.Stop()
	logged := ""
	prev, prevAt := m.Status(), time.Now()
	rates := func(txns, evs, bytes, txns0, evs0, bytes0 uint64, secs float64) Rates {
		return Rates{Transactions: float64(txns-txns0) / secs, Events: float64(evs-evs0) / secs, Bytes: float64(bytes-bytes0) / secs}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		ms := m.Status()
		now := time.Now()
		secs := max(now.Sub(prevAt).Seconds(), 1e-3)
		ck := m.Checkpointed()
		st := GlobalStatus{Updated: now, Merge: ms, MetricsAddr: metAddr, Serve: sv(),
			Rates: rates(ms.Transactions, ms.Events, ms.Bytes, prev.Transactions, prev.Events, prev.Bytes, secs)}
		for i, g := range srcs {
			pos, at := g.heard()
			done := ck[g.cfg.Name]
			if done.File != "" {
				g.log.SetApplied(done)
			}
			gs := GlobalSourceStat{Name: g.cfg.Name, DomainID: *g.cfg.DomainID, Relay: g.log.End(), Heard: at, Merged: done}
			if i < len(ms.Sources) && i < len(prev.Sources) {
				a, b := ms.Sources[i], prev.Sources[i]
				gs.Rates = rates(a.Transactions, a.Events, a.Bytes, b.Transactions, b.Events, b.Bytes, secs)
			}
			st.Sources = append(st.Sources, gs)
			if ms.Waiting == g.cfg.Name && logged != g.cfg.Name && time.Since(ms.WaitingSince) > 3*time.Second {
				heard := "nothing heard from it since sluice started"
				if !at.IsZero() {
					heard = fmt.Sprintf("last heard from it at %s, at %s", at.UTC().Format(time.RFC3339), pos)
				}
				if ms.WaitingXID != "" {
					logf("global binlog: waiting for source %s to complete XA transaction %s: another source's next transaction uses the same XID, and a replica holds one prepared transaction per XID (docs/manual/global-binlog.md)", g.cfg.Name, ms.WaitingXID)
				} else {
					logf("global binlog: waiting for source %s (%s; is it down?): the other sources' newer transactions wait until it is heard from again, so that the order by commit time holds", g.cfg.Name, heard)
				}
				logged = g.cfg.Name
			}
		}
		if logged != "" && ms.Waiting != logged {
			logf("global binlog: source %s heard from again; merging", logged)
			logged = ""
		}
		if b, err := json.Marshal(st); err == nil {
			_ = dumpfmt.WriteFileAtomic(dir, GlobalStatusFile, b)
		}
		prev, prevAt = ms, now
	}
}
