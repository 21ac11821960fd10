package serve

import (
	"encoding/binary"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-db/sluice"
)

// DumpStats describes one dump in progress: a replica or tool reading the
// served binlog.
type DumpStats struct {
	ConnID   uint32    `json:"conn_id"`
	ServerID uint32    `json:"server_id"` // the one the dump command gave (0 for mariadb-binlog)
	Addr     string    `json:"addr"`      // the client's address
	Started  time.Time `json:"started"`
	// File and Pos: the position after the last event sent.
	File string `json:"file"`
	Pos  uint32 `json:"pos"`
	// Events, Bytes and Txns count what was sent since the dump began
	// (heartbeats and artificial events not included).
	Events uint64 `json:"events"`
	Bytes  uint64 `json:"bytes"`
	Txns   uint64 `json:"txns"`
	// LagSeconds is how long ago the source wrote the last event sent,
	// while the served binlog holds more; 0 when the dump has sent
	// everything.
	LagSeconds float64 `json:"lag_seconds"`
	// DelayP50Ms and DelayP99Ms (DT) are percentiles of the delay from the
	// source's timestamp of a transaction's last event to the moment it
	// was sent, over this dump's transactions. Binlog timestamps have a
	// resolution of one second.
	DelayP50Ms float64 `json:"delay_p50_ms"`
	DelayP99Ms float64 `json:"delay_p99_ms"`
}

// dumpStat is a dump's counters: the dump's goroutine updates them, Stats
// and the Prometheus collector read them.
type dumpStat struct {
	connID, serverID uint32
	addr             string
	started          time.Time
	events, bytes    atomic.Uint64
	txns             atomic.Uint64

	mu     sync.Mutex
	pos    sluice.Position
	lastTS uint32
	delay  *hdrhistogram.Histogram // ms
}

// serveMetrics are the service's own Prometheus metrics (totals over all
// dumps, so that rate() survives reconnects), besides the per-dump ones
// the collector reads from the dumps in progress.
type serveMetrics struct {
	events, bytes, txns prometheus.Counter
	delay               prometheus.Histogram
}

func newServeMetrics() *serveMetrics {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "sluice", Subsystem: "serve", Name: name, Help: help})
	}
	return &serveMetrics{
		events: c("events_sent_total", "binlog events sent to replicas and tools, over all dumps"),
		bytes:  c("bytes_sent_total", "bytes of binlog events sent to replicas and tools, over all dumps"),
		txns:   c("transactions_sent_total", "transactions sent to replicas and tools, over all dumps"),
		delay: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "sluice", Subsystem: "serve", Name: "delay_seconds",
			Help:    "DT: from the source's timestamp of a transaction's last event (1 s resolution) to the moment it is sent",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2, 5, 10, 30, 60, 300}}),
	}
}

// newDumpStat registers a dump in progress; the dump calls done when it ends.
func (s *Server) newDumpStat(h *session, serverID uint32, pos sluice.Position) (st *dumpStat, done func()) {
	st = &dumpStat{serverID: serverID, started: time.Now(), pos: pos, delay: hdrhistogram.New(1, 3_600_000, 2)}
	if h.conn != nil {
		st.connID, st.addr = h.conn.ConnectionID(), h.conn.RemoteAddr().String()
	}
	s.mu.Lock()
	s.dumps[st] = struct{}{}
	s.mu.Unlock()
	return st, func() {
		s.mu.Lock()
		delete(s.dumps, st)
		s.mu.Unlock()
	}
}

// sent records an event the dump sent: raw as sent, at the position after
// it; boundary ends a transaction. The counts gather in the dumper and
// reach the dump's stats and the metrics in batches (publishStats): per
// event, two atomics, two Prometheus counters, a lock and a clock read
// were a sixth of a dump's CPU while a consumer caught up (bench-cdc).
func (d *dumper) sent(raw []byte, pos sluice.Position, boundary bool) {
	p := &d.pend
	p.events++
	p.bytes += uint64(len(raw))
	p.pos = pos
	if ts := binary.LittleEndian.Uint32(raw[0:]); ts != 0 {
		p.lastTS = ts
		if boundary {
			p.txnTS = append(p.txnTS, ts)
		}
	}
	if p.events >= statBatch {
		d.publishStats()
	}
}

// statBatch bounds how many events a dump's stats may trail by (a dump
// also publishes them each time it has sent all there is).
const statBatch = 1024

// pendingStats are what a dump sent since it last published its stats.
type pendingStats struct {
	events, bytes uint64
	pos           sluice.Position
	lastTS        uint32
	// txnTS: the source timestamps of the transactions ended, for DT.
	txnTS []uint32
}

// publishStats moves the pending counts into the dump's stats and the
// metrics. DT is taken now, the moment the batch is sent or about to be:
// the dump publishes before it waits, right after flushing its buffer.
func (d *dumper) publishStats() {
	p := &d.pend
	if p.events == 0 {
		return
	}
	st, m := d.stat, d.h.s.met
	st.events.Add(p.events)
	st.bytes.Add(p.bytes)
	m.events.Add(float64(p.events))
	m.bytes.Add(float64(p.bytes))
	now := time.Now()
	st.mu.Lock()
	st.pos = p.pos
	if p.lastTS != 0 {
		st.lastTS = p.lastTS
	}
	for _, ts := range p.txnTS {
		ms := max(now.Sub(time.Unix(int64(ts), 0)).Milliseconds(), 0)
		_ = st.delay.RecordValue(max(ms, 1))
		m.delay.Observe(float64(ms) / 1000)
	}
	st.mu.Unlock()
	if n := len(p.txnTS); n > 0 {
		st.txns.Add(uint64(n))
		m.txns.Add(float64(n))
	}
	p.events, p.bytes, p.lastTS, p.txnTS = 0, 0, 0, p.txnTS[:0]
}

// Stats lists the dumps in progress, oldest first.
func (s *Server) Stats() []DumpStats {
	end := s.log.End()
	now := time.Now()
	s.mu.Lock()
	dumps := make([]*dumpStat, 0, len(s.dumps))
	for d := range s.dumps {
		dumps = append(dumps, d)
	}
	s.mu.Unlock()
	out := make([]DumpStats, 0, len(dumps))
	for _, d := range dumps {
		v := DumpStats{ConnID: d.connID, ServerID: d.serverID, Addr: d.addr, Started: d.started.UTC(),
			Events: d.events.Load(), Bytes: d.bytes.Load(), Txns: d.txns.Load()}
		d.mu.Lock()
		v.File, v.Pos = d.pos.File, d.pos.Pos
		if d.pos.Compare(end) < 0 && d.lastTS != 0 {
			v.LagSeconds = max(now.Sub(time.Unix(int64(d.lastTS), 0)).Seconds(), 0)
		}
		if d.delay.TotalCount() > 0 {
			v.DelayP50Ms, v.DelayP99Ms = float64(d.delay.ValueAtQuantile(50)), float64(d.delay.ValueAtQuantile(99))
		}
		d.mu.Unlock()
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Started.Before(out[j].Started) || out[i].Started.Equal(out[j].Started) && out[i].ConnID < out[j].ConnID
	})
	return out
}

// Collectors are the service's Prometheus metrics: totals, DT, and one
// series per dump in progress (labelled by the replica's server id and
// the connection id, which a reconnect changes).
func (s *Server) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.met.events, s.met.bytes, s.met.txns, s.met.delay, dumpCollector{s}}
}

type dumpCollector struct{ s *Server }

var (
	dumpLabels   = []string{"server_id", "connection"}
	descReplicas = prometheus.NewDesc("sluice_serve_replicas", "dumps in progress (replicas and tools reading the served binlog)", nil, nil)
	descEvents   = prometheus.NewDesc("sluice_serve_replica_events_sent_total", "binlog events sent to this dump", dumpLabels, nil)
	descBytes    = prometheus.NewDesc("sluice_serve_replica_bytes_sent_total", "bytes of binlog events sent to this dump", dumpLabels, nil)
	descTxns     = prometheus.NewDesc("sluice_serve_replica_transactions_sent_total", "transactions sent to this dump", dumpLabels, nil)
	descLag      = prometheus.NewDesc("sluice_serve_replica_lag_seconds", "how long ago the source wrote the last event sent to this dump, while more is there to send (0 when it has everything)", dumpLabels, nil)
	descFile     = prometheus.NewDesc("sluice_serve_replica_binlog_file_seq", "binlog file sequence number of the position after the last event sent", dumpLabels, nil)
	descOffset   = prometheus.NewDesc("sluice_serve_replica_binlog_offset", "byte offset of the position after the last event sent", dumpLabels, nil)
)

func (c dumpCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descReplicas, descEvents, descBytes, descTxns, descLag, descFile, descOffset} {
		ch <- d
	}
}

func (c dumpCollector) Collect(ch chan<- prometheus.Metric) {
	stats := c.s.Stats()
	ch <- prometheus.MustNewConstMetric(descReplicas, prometheus.GaugeValue, float64(len(stats)))
	for _, d := range stats {
		l := []string{strconv.FormatUint(uint64(d.ServerID), 10), strconv.FormatUint(uint64(d.ConnID), 10)}
		ch <- prometheus.MustNewConstMetric(descEvents, prometheus.CounterValue, float64(d.Events), l...)
		ch <- prometheus.MustNewConstMetric(descBytes, prometheus.CounterValue, float64(d.Bytes), l...)
		ch <- prometheus.MustNewConstMetric(descTxns, prometheus.CounterValue, float64(d.Txns), l...)
		ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, d.LagSeconds, l...)
		ch <- prometheus.MustNewConstMetric(descFile, prometheus.GaugeValue, fileSeq(d.File), l...)
		ch <- prometheus.MustNewConstMetric(descOffset, prometheus.GaugeValue, float64(d.Pos), l...)
	}
}

// fileSeq is the number after a binlog file name's last dot.
func fileSeq(name string) float64 {
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return 0
	}
	n, _ := strconv.ParseFloat(name[i+1:], 64)
	return n
}

// isTxnEnd: whether an event sent ends a transaction for the counters.
func isTxnEnd(ev Event) bool {
	return ev.Boundary && ev.Type != replication.FORMAT_DESCRIPTION_EVENT && ev.Type != replication.ROTATE_EVENT &&
		ev.Type != replication.MARIADB_GTID_LIST_EVENT && ev.Type != replication.MARIADB_BINLOG_CHECKPOINT_EVENT &&
		ev.Type != replication.STOP_EVENT
}
