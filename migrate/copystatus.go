package migrate

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/dump"
	"github.com/sluice-db/sluice/load"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/task"
)

// copyReporter makes the full copy visible as replication is: status.json
// in the task directory every second (sluice status shows rows, MB,
// per-table chunks and an ETA), and the Prometheus endpoint on
// incremental.metrics-addr with the copy's counters, until the copy ends
// and replication serves its own.
type copyReporter struct {
	cfg     *task.Config
	ds      *dump.Stats
	l       *load.Loader
	started time.Time
	addr    string
	srv     *http.Server
	stop    chan struct{}
	done    chan struct{}
}

func startCopyReporter(cfg *task.Config, ds *dump.Stats, l *load.Loader) *copyReporter {
	r := &copyReporter{cfg: cfg, ds: ds, l: l, started: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	if addr := cfg.Incremental.MetricsAddr; addr != "" {
		if ln, err := net.Listen("tcp", addr); err == nil {
			reg := prometheus.NewRegistry()
			ls := l.Stats()
			labels := prometheus.Labels{"task": cfg.Name}
			c := func(name, help string, v func() int64) prometheus.Collector {
				return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "sluice", Subsystem: "copy", Name: name, Help: help, ConstLabels: labels},
					func() float64 { return float64(v()) })
			}
			build := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "sluice", Name: "build_info", Help: "1; its labels say which sluice runs",
				ConstLabels: prometheus.Labels{"version": sluice.Version, "commit": sluice.Commit, "goversion": runtime.Version()}})
			build.Set(1)
			planned := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "copy", Name: "chunks_planned", Help: "chunks this run of the copy loads", ConstLabels: labels},
				func() float64 { return float64(ls.TotalChunks.Load()) })
			reg.MustRegister(build, planned,
				c("rows_total", "rows the copy committed on the target", ls.Rows.Load),
				c("bytes_total", "bytes the copy loaded", ls.Bytes.Load),
				c("chunks_total", "chunks the copy committed on the target", ls.Chunks.Load),
				c("read_rows_total", "rows the dump read from the source", ds.Rows.Load),
				collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			mux := http.NewServeMux()
			mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
			r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
			r.addr = ln.Addr().String()
			if _, port, err := net.SplitHostPort(addr); err == nil && port == "0" {
				// Any port (the default): replication, which serves the
				// endpoint once the copy ends, takes the same one, so a
				// scrape target set during the copy keeps working.
				cfg.Incremental.MetricsAddr = r.addr
			}
			go func() { _ = r.srv.Serve(ln) }()
		}
	}
	go func() {
		defer close(r.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			r.write()
			select {
			case <-r.stop:
				return
			case <-t.C:
			}
		}
	}()
	return r
}

func (r *copyReporter) write() { r.writeStage(replicate.StageCopying, nil) }

func (r *copyReporter) writeStage(stage string, cerr error) {
	ls := r.l.Stats()
	cs := &replicate.CopyStatus{Rows: ls.Rows.Load(), Bytes: ls.Bytes.Load(), ChunksDone: ls.Chunks.Load(), ChunksTotal: ls.TotalChunks.Load()}
	if cs.ChunksDone > 0 && cs.ChunksTotal > cs.ChunksDone {
		el := time.Since(r.started).Seconds()
		cs.ETASeconds = el * float64(cs.ChunksTotal-cs.ChunksDone) / float64(cs.ChunksDone)
	}
	for _, p := range r.l.Progress() {
		cs.Tables = append(cs.Tables, replicate.TableCopy{Table: p.Table.String(), Done: p.Done, Total: p.Total})
	}
	st := replicate.Status{Task: r.cfg.Name, Stage: stage, PID: os.Getpid(), Started: r.started, Updated: time.Now(), Copy: cs, MetricsAddr: r.addr}
	if cerr != nil {
		st.Error = oneLine(cerr)
	}
	_ = replicate.WriteStatus(r.cfg.Dir, st)
}

// Stop ends the reporting and the endpoint, and records how the copy
// ended: stopped (complete, or interrupted with every chunk kept) or
// failed with err.
func (r *copyReporter) Stop(err error) {
	close(r.stop)
	<-r.done
	if err != nil && !errors.Is(err, context.Canceled) {
		r.writeStage(replicate.StageFailed, err)
	} else {
		r.writeStage(replicate.StageStopped, nil)
	}
	if r.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = r.srv.Shutdown(ctx)
	}
}
