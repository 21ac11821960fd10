package replicate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/apply"
	"github.com/sluice-db/sluice/internal/atomicfile"
	"github.com/sluice-db/sluice/internal/metricshttp"
	"github.com/sluice-db/sluice/internal/private"
	"github.com/sluice-db/sluice/serve"
)

// Stages of a task.
const (
	StageStarting = "starting"
	StageRunning  = "running"
	StageRetrying = "retrying" // the applier failed transiently and restarts from its checkpoint
	StageStopped  = "stopped"
	StagePaused   = "paused"  // sluice pause: not reading nor applying until sluice resume
	StageCopying  = "copying" // the full copy of migrate runs (Status.Copy)
	StageFailed   = "failed"
)

// CopyStatus is the progress of migrate's full copy.
type CopyStatus struct {
	Rows        int64       `json:"rows"`
	Bytes       int64       `json:"bytes"`
	ChunksDone  int64       `json:"chunks_done"`
	ChunksTotal int64       `json:"chunks_total"`
	ETASeconds  float64     `json:"eta_seconds,omitempty"`
	Tables      []TableCopy `json:"tables"`
}

// TableCopy is one table's chunks: committed by this run, and to load.
type TableCopy struct {
	Table string `json:"table"`
	Done  int64  `json:"done"`
	Total int64  `json:"total"`
}

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
	// KafkaTxns counts the Kafka transactions a sink task committed in
	// this run (each holds one or more source transactions).
	KafkaTxns uint64 `json:"kafka_txns,omitempty"`
	// Skipped and Replaced count the statements and transactions that
	// sluice skip and sluice replace took out of this run's stream.
	Skipped  uint64 `json:"skipped,omitempty"`
	Replaced uint64 `json:"replaced,omitempty"`
	// Apply is how the current applier groups and schedules: what bounds
	// its parallelism (replication benchmark, docs/manual/apply.md).
	Apply *ApplyStatus `json:"apply,omitempty"`
	// RelayBytes is the size of the relay log's files on disk.
	RelayBytes int64 `json:"relay_bytes"`
	// Copy is the full copy's progress while migrate copies.
	Copy *CopyStatus `json:"copy,omitempty"`
	// DiskFree and DiskSize are the bytes available to sluice and in all
	// on the file system that holds the relay log.
	DiskFree    uint64 `json:"disk_free"`
	DiskSize    uint64 `json:"disk_size"`
	Reconnects  int    `json:"reconnects"`
	Restarts    int    `json:"restarts"`
	RelayFiles  int    `json:"relay_files"`
	MetricsAddr string `json:"metrics_addr,omitempty"`
	Error       string `json:"error,omitempty"`
	// Serve is the binlog service, for a task with serve:.
	Serve *ServeStatus `json:"serve,omitempty"`
}

// ServeStatus is the binlog service of a task that serves its relay log.
type ServeStatus struct {
	Addr string `json:"addr"`
	// Replicas are the dumps in progress (replicas and tools reading).
	Replicas []serve.DumpStats `json:"replicas"`
}

// WriteStatus replaces dir/status.json atomically.
func WriteStatus(dir string, s Status) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, StatusFile), append(b, '\n'), private.FileMode); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	return nil
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

// metrics exports Status to Prometheus, by its conventions: counters are
// counters named _total (rates are the query's business: rate()), times
// are in seconds, and the Go runtime's and the process's own collectors
// come along, with sluice_build_info.
//
// A task of its own process has its own registry, served on its
// metrics-addr. A task that a cluster worker runs registers into the
// worker's registerer instead (Config.Registerer: labelled worker="W",
// served on the worker's --metrics-addr, which has the process
// collectors), and takes its collectors out again when it stops, so that
// the next run of the task, or another task, registers without a clash.
type metrics struct {
	reg       prometheus.Registerer
	own       *prometheus.Registry // nil under a worker
	added     []added
	file, pos *prometheus.GaugeVec
	lag       prometheus.Gauge
	stage     *prometheus.GaugeVec
	relay     *prometheus.GaugeVec
	disk      *prometheus.GaugeVec
	errors    *prometheus.CounterVec
	last      atomic.Pointer[Status]
	http      *metricshttp.Server
}

// ProcessCollectors are the collectors one process registers once: the
// Go runtime's, the process's, and sluice_build_info.
func ProcessCollectors() []prometheus.Collector {
	build := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "sluice", Name: "build_info",
		Help: "1; its labels say which sluice runs", ConstLabels: prometheus.Labels{"version": sluice.Version, "commit": sluice.Commit, "goversion": runtime.Version()}})
	build.Set(1)
	return []prometheus.Collector{build, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})}
}

// newMetrics makes a task's metrics, in a registry of their own when into
// is nil. Under a registerer a clash (the same task registered twice) is
// an error, not a panic: the worker's other tasks go on.
func newMetrics(task string, into prometheus.Registerer) (*metrics, error) {
	return newTaskMetrics(task, into, false)
}

// newTaskMetrics makes the metrics of a task with a target (sink false) or
// of a Kafka sink task (sinkmetrics.go). Both kinds share the names whose
// meaning is the same, with the same help, so that a worker's registry
// takes both and one dashboard shows both.
func newTaskMetrics(task string, into prometheus.Registerer, sink bool) (*metrics, error) {
	labels := prometheus.Labels{"task": task}
	m := &metrics{
		reg: into,
		file: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "replication", Name: "binlog_file_seq",
			Help: "binlog file sequence number (the suffix of mysql-bin.NNNNNN) of a position", ConstLabels: labels}, []string{"position"}),
		pos: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "replication", Name: "binlog_offset",
			Help: "byte offset within the binlog file of a position", ConstLabels: labels}, []string{"position"}),
		lag: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "replication", Name: "lag_seconds",
			Help: "seconds since the source committed the oldest transaction not yet applied (0 when caught up)", ConstLabels: labels}),
		stage: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "replication", Name: "stage",
			Help: "1 for the task's current stage", ConstLabels: labels}, []string{"stage"}),
		relay: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "relay", Name: "size",
			Help: "the relay log on disk: its files (unit=files) and bytes (unit=bytes)", ConstLabels: labels}, []string{"unit"}),
		disk: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "sluice", Subsystem: "relay", Name: "filesystem_bytes",
			Help: "the file system that holds the relay log: bytes available to sluice (kind=avail) and in all (kind=size)", ConstLabels: labels}, []string{"kind"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "sluice", Name: "errors_total",
			Help: "errors the task met, retried or fatal, by class", ConstLabels: labels}, []string{"class"}),
	}
	m.last.Store(&Status{})
	for _, c := range errorClasses {
		m.errors.WithLabelValues(c.class) // every class from 0, so that rate() sees the first error
	}
	if sink {
		for _, c := range kafkaErrorClasses {
			m.errors.WithLabelValues(c.class)
		}
	}
	m.errors.WithLabelValues("other")
	counter := func(subsystem, name, help string, v func(*Status) float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "sluice", Subsystem: subsystem, Name: name, Help: help, ConstLabels: labels},
			func() float64 { return v(m.last.Load()) })
	}
	if into == nil {
		m.own = prometheus.NewRegistry()
		m.reg = m.own
		m.own.MustRegister(ProcessCollectors()...)
	}
	cs := []prometheus.Collector{m.file, m.pos, m.lag, m.stage, m.relay, m.disk, m.errors,
		counter("replication", "events_total", "binlog events decoded since the task started", func(s *Status) float64 { return float64(s.Events) }),
		counter("replication", "transactions_total", "source transactions applied since the task started", func(s *Status) float64 { return float64(s.Txns) }),
		counter("replication", "rows_total", "row changes applied since the task started", func(s *Status) float64 { return float64(s.Rows) }),
		counter("replication", "ddl_total", "DDL statements applied since the task started", func(s *Status) float64 { return float64(s.DDL) }),
		counter("replication", "reconnects_total", "reconnections to the source since the task started", func(s *Status) float64 { return float64(s.Reconnects) }),
		counter("apply", "restarts_total", "applier restarts from its checkpoint after a transient error", func(s *Status) float64 { return float64(s.Restarts) })}
	if sink {
		cs = append(cs, sinkCounters(counter)...)
	} else {
		cs = append(cs,
			counter("replication", "skipped_total", "source statements or transactions skipped by sluice skip since the task started", func(s *Status) float64 { return float64(s.Skipped) }),
			counter("replication", "replaced_total", "source statements replaced by sluice replace since the task started", func(s *Status) float64 { return float64(s.Replaced) }),
			counter("apply", "missing_rows_total", "row changes (UPDATE, DELETE) skipped because their row was not on the target (incremental.on-missing-row: skip)",
				func(s *Status) float64 { return float64(s.MissingRows) }))
	}
	err := m.register(cs...)
	if err != nil {
		return nil, err
	}
	return m, nil
}

type added struct {
	r prometheus.Registerer
	c prometheus.Collector
}

// register adds the task's collectors, to be taken out by close; on a
// clash it takes out what it added.
func (m *metrics) register(cs ...prometheus.Collector) error {
	return m.registerWith(m.reg, cs...)
}

// registerWith registers through r (m.reg wrapped with more labels), so
// that Unregister goes through r too.
func (m *metrics) registerWith(r prometheus.Registerer, cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			m.unregister()
			return fmt.Errorf("register the task's metrics: %v (is the task running twice in this process?)", err)
		}
		m.added = append(m.added, added{r, c})
	}
	return nil
}

func (m *metrics) unregister() {
	for _, a := range m.added {
		a.r.Unregister(a.c)
	}
	m.added = nil
}

func (m *metrics) update(s Status) {
	m.last.Store(&s)
	for name, p := range map[string]sluice.Position{"source": s.Source, "relay": s.Relay, "applied": s.Applied} {
		m.file.WithLabelValues(name).Set(fileSeq(p.File))
		m.pos.WithLabelValues(name).Set(float64(p.Pos))
	}
	m.lag.Set(s.LagSeconds)
	m.relay.WithLabelValues("files").Set(float64(s.RelayFiles))
	m.relay.WithLabelValues("bytes").Set(float64(s.RelayBytes))
	m.disk.WithLabelValues("avail").Set(float64(s.DiskFree))
	m.disk.WithLabelValues("size").Set(float64(s.DiskSize))
	for _, st := range []string{StageStarting, StageRunning, StageRetrying, StagePaused, StageStopped, StageFailed} {
		v := 0.0
		if st == s.Stage {
			v = 1
		}
		m.stage.WithLabelValues(st).Set(v)
	}
}

// countError counts an error the task met, by the class its sentinel
// names.
func (m *metrics) countError(err error) {
	m.errors.WithLabelValues(errorClass(err)).Inc()
}

type errClass struct {
	err   error
	class string
}

var errorClasses = []errClass{
	{sluice.ErrUnreachable, "unreachable"}, {sluice.ErrAccessDenied, "access_denied"}, {sluice.ErrPrivilege, "privilege"},
	{sluice.ErrBinlogPurged, "binlog_purged"}, {sluice.ErrBinlogFormat, "binlog_format"}, {sluice.ErrUnsupportedDDL, "unsupported_ddl"},
	{sluice.ErrDiskFull, "disk_full"}, {sluice.ErrSchemaMismatch, "schema_mismatch"}, {sluice.ErrConfig, "config"},
	{apply.ErrMissingRow, "missing_row"}, {apply.ErrTargetWarning, "target_warning"}, {apply.ErrTargetRowDiffers, "target_row_differs"},
}

func errorClass(err error) string {
	for _, cs := range [][]errClass{errorClasses, kafkaErrorClasses} {
		for _, c := range cs {
			if errors.Is(err, c.err) {
				return c.class
			}
		}
	}
	return "other"
}

// serve starts the HTTP endpoint; it returns the bound address.
func (m *metrics) serve(addr string) (string, error) {
	if m.own == nil {
		return "", nil // the worker serves them
	}
	srv, err := metricshttp.Serve(m.own, addr, "serve metrics", "set incremental.metrics-addr to a free loopback address such as 127.0.0.1:9358, or 127.0.0.1:0 for any port")
	if err != nil {
		return "", err
	}
	m.http = srv
	return srv.Addr, nil
}

// close stops serving and takes the collectors out of a worker's
// registerer.
func (m *metrics) close() {
	m.http.Close()
	if m.own == nil {
		m.unregister()
	}
}

// ApplyStatus is the current applier's grouping and scheduling since it
// started: Commits target transactions for Txns source transactions
// (status), of which Compacted were applied as net row changes; Conflicts
// groups waited because their writeset overlapped the uncommitted groups of
// two workers; Chained groups overlapped one worker's and were queued
// behind them on it; Grown groups grew past the group limit while
// dispatching them would have waited (apply/chain.go); MaxInFlight is the most groups that were executing or waiting
// to commit at once, which is how much parallelism the writesets allowed;
// GroupLimit is the current group size; LockYields counts groups rolled back
// to let an earlier group have a lock. Stages is where the pipeline's
// goroutines spent their time since the task started (stages.go).
type ApplyStatus struct {
	Commits     uint64               `json:"commits"`
	Compacted   uint64               `json:"compacted"`
	Conflicts   uint64               `json:"conflicts"`
	Chained     uint64               `json:"chained"`
	Grown       uint64               `json:"grown"`
	InFlight    int                  `json:"in_flight"`
	MaxInFlight int                  `json:"max_in_flight"`
	GroupLimit  int                  `json:"group_limit"`
	LockYields  uint64               `json:"lock_yields"`
	Stages      map[string]StageTime `json:"stages,omitempty"`
}

// lagSince is how long ago source timestamp ts was (0 for none or future).
func lagSince(now time.Time, ts uint32) float64 {
	if ts == 0 {
		return 0
	}
	if d := now.Sub(time.Unix(int64(ts), 0)).Seconds(); d > 0 {
		return d
	}
	return 0
}
