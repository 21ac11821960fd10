package merge

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// counters are what the merge has written, for rates (BPS, EPS, TPS) and
// lag: the Run loop adds, Status and the Prometheus collector read.
type counters struct {
	events, bytes, txns atomic.Uint64
}

// feedStats is one source's part of the merged stream.
type feedStats struct {
	counters
	// mark is the newest commit time (unix seconds) up to which the
	// merged stream holds everything of the source: the later of its last
	// merged transaction's commit time and its watermark.
	mark atomic.Uint32
}

func (s *feedStats) advance(ts uint32) {
	for {
		old := s.mark.Load()
		if ts <= old || s.mark.CompareAndSwap(old, ts) {
			return
		}
	}
}

// lag is how far behind now the merged stream is on the source: 0 until
// anything is known of it (the merge waits for it then, which Waiting
// says).
func (s *feedStats) lag(now time.Time) float64 {
	mk := s.mark.Load()
	if mk == 0 {
		return 0
	}
	if d := now.Sub(time.Unix(int64(mk), 0)).Seconds(); d > 0 {
		return d
	}
	return 0
}

// SourceStatus is one source's part of the merged stream, since this
// process started.
type SourceStatus struct {
	Name         string `json:"name"`
	Transactions uint64 `json:"transactions"`
	Events       uint64 `json:"events"`
	// Bytes of its events in the merged binlog (re-encoded, with CRC32).
	Bytes uint64 `json:"bytes"`
	// LagSeconds: how long ago the source committed the newest
	// transaction up to which the merged binlog holds all of it (its last
	// merged transaction, or its watermark when it is idle and heard from).
	LagSeconds float64 `json:"lag_seconds"`
}

var (
	descSrcEvents = prometheus.NewDesc("sluice_merge_source_events_total",
		"binlog events of this source written to the merged binlog by this process", []string{"source"}, nil)
	descSrcBytes = prometheus.NewDesc("sluice_merge_source_bytes_total",
		"bytes of this source's events written to the merged binlog (re-encoded, with CRC32) by this process", []string{"source"}, nil)
	descSrcTxns = prometheus.NewDesc("sluice_merge_source_transactions_total",
		"transactions of this source written to the merged binlog by this process", []string{"source"}, nil)
	descSrcLag = prometheus.NewDesc("sluice_merge_source_lag_seconds",
		"seconds since the source committed the newest transaction up to which the merged binlog holds all of it (0 before anything is heard from it)", []string{"source"}, nil)
	descSrcWatermark = prometheus.NewDesc("sluice_merge_source_watermark_timestamp_seconds",
		"unix time up to which the merged binlog holds all of this source (0 before anything is heard from it)", []string{"source"}, nil)
	descSrcWaiting = prometheus.NewDesc("sluice_merge_source_holding_back",
		"1 while the merge waits for this source: it has nothing to merge and has not been heard from since the oldest transaction waiting elsewhere was committed", []string{"source"}, nil)
	descSrcWaitingFor = prometheus.NewDesc("sluice_merge_source_holding_back_seconds",
		"how long the merge has been waiting for this source (0 when it does not)", []string{"source"}, nil)
	descEvents  = prometheus.NewDesc("sluice_merge_events_total", "binlog events written to the merged binlog by this process, the merge's own (format description, Gtid_list, Binlog_checkpoint, Rotate) included", nil, nil)
	descBytes   = prometheus.NewDesc("sluice_merge_bytes_total", "bytes written to the merged binlog by this process", nil, nil)
	descTxns    = prometheus.NewDesc("sluice_merge_transactions_total", "transactions written to the merged binlog by this process", nil, nil)
	descSpilled = prometheus.NewDesc("sluice_merge_spilled_transactions_total", "transactions that waited in a spill file instead of memory", nil, nil)
)

// delayBuckets: commit times have a one-second resolution.
var delayBuckets = []float64{.5, 1, 2, 3, 5, 10, 30, 60, 300, 900}

func newDelay() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sluice_merge_delay_seconds",
		Help:    "DT: from a transaction's commit time on its source (1 s resolution) to its write into the merged binlog",
		Buckets: delayBuckets})
}

// Collectors are the merge's Prometheus metrics: per source, and for the
// merged stream.
func (m *Merger) Collectors() []prometheus.Collector {
	return []prometheus.Collector{mergeCollector{m}, m.delay}
}

type mergeCollector struct{ m *Merger }

func (c mergeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSrcEvents, descSrcBytes, descSrcTxns, descSrcLag, descSrcWatermark, descSrcWaiting, descSrcWaitingFor,
		descEvents, descBytes, descTxns, descSpilled} {
		ch <- d
	}
}

func (c mergeCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	now := time.Now()
	m.mu.Lock()
	waiting, since := m.waiting, m.since
	m.mu.Unlock()
	for _, f := range m.feeds {
		n := f.src.Name
		ch <- prometheus.MustNewConstMetric(descSrcEvents, prometheus.CounterValue, float64(f.stats.events.Load()), n)
		ch <- prometheus.MustNewConstMetric(descSrcBytes, prometheus.CounterValue, float64(f.stats.bytes.Load()), n)
		ch <- prometheus.MustNewConstMetric(descSrcTxns, prometheus.CounterValue, float64(f.stats.txns.Load()), n)
		ch <- prometheus.MustNewConstMetric(descSrcLag, prometheus.GaugeValue, f.stats.lag(now), n)
		ch <- prometheus.MustNewConstMetric(descSrcWatermark, prometheus.GaugeValue, float64(f.stats.mark.Load()), n)
		w, d := 0.0, 0.0
		if waiting == n {
			w, d = 1, now.Sub(since).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(descSrcWaiting, prometheus.GaugeValue, w, n)
		ch <- prometheus.MustNewConstMetric(descSrcWaitingFor, prometheus.GaugeValue, d, n)
	}
	ch <- prometheus.MustNewConstMetric(descEvents, prometheus.CounterValue, float64(m.total.events.Load()))
	ch <- prometheus.MustNewConstMetric(descBytes, prometheus.CounterValue, float64(m.total.bytes.Load()))
	ch <- prometheus.MustNewConstMetric(descTxns, prometheus.CounterValue, float64(m.total.txns.Load()))
	ch <- prometheus.MustNewConstMetric(descSpilled, prometheus.CounterValue, float64(m.spills.Load()))
}
