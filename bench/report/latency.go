package report

import (
	"math"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Latency records durations in an HdrHistogram with microsecond resolution,
// three significant digits, from 1 µs to one hour. It is not safe for
// concurrent use: give each worker its own and Merge them.
type Latency struct {
	h *hdrhistogram.Histogram
}

const (
	latencyLowest  = 1                  // µs
	latencyHighest = 3600 * 1000 * 1000 // µs: one hour
	latencyDigits  = 3
)

// NewLatency returns an empty recorder.
func NewLatency() *Latency {
	return &Latency{h: hdrhistogram.New(latencyLowest, latencyHighest, latencyDigits)}
}

// Record adds one observation. Values beyond an hour are clamped to an hour,
// values under a microsecond count as one microsecond.
func (l *Latency) Record(d time.Duration) {
	us := d.Microseconds()
	if us < latencyLowest {
		us = latencyLowest
	}
	if us > latencyHighest {
		us = latencyHighest
	}
	_ = l.h.RecordValue(us)
}

// Merge adds every observation of other.
func (l *Latency) Merge(other *Latency) { l.h.Merge(other.h) }

// Reset forgets every observation.
func (l *Latency) Reset() { l.h.Reset() }

// Count is the number of observations.
func (l *Latency) Count() int64 { return l.h.TotalCount() }

// Percentile returns the latency at p (0 < p <= 100) in milliseconds: the
// smallest recorded value (to the histogram's precision) that at least p% of
// observations do not exceed. Zero when empty.
func (l *Latency) Percentile(p float64) float64 {
	if l.h.TotalCount() == 0 {
		return 0
	}
	return usToMs(l.h.ValueAtQuantile(p))
}

// Summary returns count, min, mean, p50, p95, p99 and max in milliseconds.
func (l *Latency) Summary() LatencySummary {
	if l.h.TotalCount() == 0 {
		return LatencySummary{}
	}
	return LatencySummary{
		Count: l.h.TotalCount(),
		MinMs: usToMs(l.h.Min()),
		AvgMs: round3(l.h.Mean() / 1000),
		P50Ms: l.Percentile(50),
		P95Ms: l.Percentile(95),
		P99Ms: l.Percentile(99),
		MaxMs: usToMs(l.h.Max()),
	}
}

func usToMs(us int64) float64 { return round3(float64(us) / 1000) }

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
