package replicate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/private"
)

// Stages of a task.
const (
	StageStarting = "starting"
	StageRunning  = "running"
	StageRetrying = "retrying" // the applier failed transiently and restarts from its checkpoint
	StageStopped  = "stopped"
	StageFailed   = "failed"
)

// StatusFile is the status snapshot inside the task directory.
const StatusFile = "status.json"

// Status is a snapshot of a running task, like DM's query-status. It never
// contains a password.
type Status struct {
	Task    string    `json:"task"`
	Stage   string    `json:"stage"`
	PID     int       `json:"pid"`
	Updated time.Time `json:"updated"`
	Started time.Time `json:"started"`

	// Source is the newest position the source reported (events or, while
	// idle, heartbeats); Relay is the end of the relay log; Applied is the
	// checkpoint committed on the target.
	Source  sluice.Position `json:"source"`
	Relay   sluice.Position `json:"relay"`
	Applied sluice.Position `json:"applied"`

	// LagSeconds is how long ago the oldest transaction not yet applied was
	// committed on the source; 0 when everything the source has is applied.
	LagSeconds   float64 `json:"lag_seconds"`
	EventsPerSec float64 `json:"events_per_sec"`
	TxnsPerSec   float64 `json:"txns_per_sec"`
	Events       uint64  `json:"events"`
	Txns         uint64  `json:"txns"`
	Rows         uint64  `json:"rows"`
	DDL          uint64  `json:"ddl"`
	// MissingRows counts the row changes skipped because their row was
	// not on the target (incremental.on-missing-row: skip).
	MissingRows uint64 `json:"missing_rows,omitempty"`
	Reconnects  int    `json:"reconnects"`
	Restarts    int    `json:"restarts"`
	RelayFiles  int    `json:"relay_files"`
	MetricsAddr string `json:"metrics_addr,omitempty"`
	Error       string `json:"error,omitempty"`
}

// WriteStatus replaces dir/status.json atomically.
func WriteStatus(dir string, s Status) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, StatusFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), private.FileMode); err != nil {
		os.Remove(tmp) // a full disk must not leave a 0-byte status.json.tmp
		return fmt.Errorf("write status: %w", err)
	}
	return os.Rename(tmp, filepath.Join(dir, StatusFile))
}

// ReadStatus reads dir/status.json.
func ReadStatus(dir string) (Status, error) {
	var s Status
	b, err := os.ReadFile(filepath.Join(dir, StatusFile))
	if errors.Is(err, os.ErrNotExist) {
		return s, &sluice.Error{Op: "read task status", Err: fmt.Errorf("%w: no %s in %s", sluice.ErrConfig, StatusFile, dir),
			Hint: "the task has not run yet; start it with sluice migrate --mode all or --mode incremental"}
	}
	if err != nil {
		return s, fmt.Errorf("read task status: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("read task status %s: %w", filepath.Join(dir, StatusFile), err)
	}
	return s, nil
}

// fileSeq is the numeric suffix of a binlog file name (mysql-bin.000042 ->
// 42), so positions can be exported as numbers.
func fileSeq(name string) float64 {
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return 0
	}
	n, _ := strconv.ParseFloat(name[i+1:], 64)
	return n
}

// metrics exports Status to Prometheus.
type metrics struct {
	reg        *prometheus.Registry
	file, pos  *prometheus.GaugeVec
	lag        prometheus.Gauge
	eventsRate prometheus.Gauge
	txnsRate   prometheus.Gauge
	events     prometheus.Gauge
	txns       prometheus.Gauge
	rows       prometheus.Gauge
	stage      *prometheus.GaugeVec
	missing    atomic.Uint64
	srv        *http.Server
	ln         net.Listener
	done       chan struct{}
}

func newMetrics(task string) *metrics {
	labels := prometheus.Labels{"task": task}
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "replication", Name: name, Help: help, ConstLabels: labels})
	}
	m := &metrics{
		reg: prometheus.NewRegistry(),
		file: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "replication", Name: "binlog_file_seq",
			Help: "binlog file sequence number (the suffix of mysql-bin.NNNNNN) of a position", ConstLabels: labels}, []string{"position"}),
		pos: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "replication", Name: "binlog_offset",
			Help: "byte offset within the binlog file of a position", ConstLabels: labels}, []string{"position"}),
		lag:        g("lag_seconds", "seconds since the source committed the oldest transaction not yet applied (0 when caught up)"),
		eventsRate: g("events_per_second", "binlog events decoded per second"),
		txnsRate:   g("transactions_per_second", "source transactions applied per second"),
		events:     g("events", "binlog events decoded since the task started"),
		txns:       g("transactions", "source transactions applied since the task started"),
		rows:       g("rows", "row changes applied since the task started"),
		stage: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "replication", Name: "stage",
			Help: "1 for the task's current stage", ConstLabels: labels}, []string{"stage"}),
		done: make(chan struct{}),
	}
	missing := prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "sluice", Subsystem: "apply", Name: "missing_rows_total",
		Help: "row changes (UPDATE, DELETE) skipped because their row was not on the target (incremental.on-missing-row: skip)", ConstLabels: labels},
		func() float64 { return float64(m.missing.Load()) })
	m.reg.MustRegister(m.file, m.pos, m.lag, m.eventsRate, m.txnsRate, m.events, m.txns, m.rows, m.stage, missing)
	return m
}

func (m *metrics) update(s Status) {
	for name, p := range map[string]sluice.Position{"source": s.Source, "relay": s.Relay, "applied": s.Applied} {
		m.file.WithLabelValues(name).Set(fileSeq(p.File))
		m.pos.WithLabelValues(name).Set(float64(p.Pos))
	}
	m.lag.Set(s.LagSeconds)
	m.eventsRate.Set(s.EventsPerSec)
	m.txnsRate.Set(s.TxnsPerSec)
	m.events.Set(float64(s.Events))
	m.txns.Set(float64(s.Txns))
	m.rows.Set(float64(s.Rows))
	m.missing.Store(s.MissingRows)
	for _, st := range []string{StageStarting, StageRunning, StageRetrying, StageStopped, StageFailed} {
		v := 0.0
		if st == s.Stage {
			v = 1
		}
		m.stage.WithLabelValues(st).Set(v)
	}
}

// serve starts the HTTP endpoint; it returns the bound address.
func (m *metrics) serve(addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", &sluice.Error{Op: "serve metrics", Err: fmt.Errorf("%w: listen on %s: %v", sluice.ErrConfig, addr, err),
			Hint: "set incremental.metrics-addr to a free loopback address such as 127.0.0.1:9358, or 127.0.0.1:0 for any port"}
	}
	m.ln = ln
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(m.done)
		_ = m.srv.Serve(ln)
	}()
	return ln.Addr().String(), nil
}

func (m *metrics) close() {
	if m.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = m.srv.Shutdown(ctx)
	<-m.done
}
