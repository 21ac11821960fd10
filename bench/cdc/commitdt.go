package main

import (
	"sync"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// The DT column measures from the moment the heartbeat writer SENT its
// INSERT, so it includes the time the source took to commit it: at 64
// threads oltp_insert the source's commit queue alone is most of the
// p99, and every reader, MariaDB's own dump included, shows it. The seed
// defines DT from the source's commit. MariaDB 10.11 writes no commit
// timestamp finer than a second, so the commit instant is bracketed from
// the client's side:
//
//   - sent:  the writer sent the INSERT (autocommit): commit is later;
//   - acked: the writer got the OK: commit is earlier.
//
// So a reader's delay from the commit lies between arrival-acked (a lower
// bound; an arrival before the OK counts as 0 and is counted apart) and
// arrival-sent (the DT column, an upper bound). The gap between the two is
// the heartbeat's commit round trip, reported per run. "behind first" is
// each reader's arrival minus the earliest arrival of the same heartbeat
// at any reader of the run: what serving through sluice adds over MariaDB
// serving its own binlog, free of the source's commit time.

// hbKey names one heartbeat row: its source (the -heartbeat index) and
// its AUTO_INCREMENT id on that source.
type hbKey struct {
	src int8
	id  int64
}

// hbLog is what the heartbeat writers learned: when each row's commit was
// acknowledged, and the commit round trips.
type hbLog struct {
	mu     sync.Mutex
	acked  map[hbKey]int64         // µs
	commit *hdrhistogram.Histogram // µs, acked - sent
}

func newHBLog() *hbLog {
	return &hbLog{acked: map[hbKey]int64{}, commit: hdrhistogram.New(1, 3_600_000_000, 3)}
}

func (h *hbLog) note(k hbKey, sent, acked int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.acked[k] = acked
	_ = h.commit.RecordValue(max(acked-sent, 1))
}

// commitDT fills every consumer's bounds from the commit and its lag
// behind the first reader, from the arrivals each consumer kept.
func commitDT(rs []result, cs []*consumer, h *hbLog) {
	first := map[hbKey]int64{}
	for _, c := range cs {
		c.mu.Lock()
		for k, at := range c.arrived {
			if f, ok := first[k]; !ok || at < f {
				first[k] = at
			}
		}
		c.mu.Unlock()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	ms := func(us int64) float64 { return float64(us) / 1000 }
	for i, c := range cs {
		ack := hdrhistogram.New(1, 3_600_000_000, 3)
		behind := hdrhistogram.New(1, 3_600_000_000, 3)
		var early int64
		c.mu.Lock()
		for k, at := range c.arrived {
			if t1, ok := h.acked[k]; ok {
				if d := at - t1; d > 0 {
					_ = ack.RecordValue(d)
				} else {
					early++
					_ = ack.RecordValue(1) // 1 µs: counted, and never above the truth
				}
			}
			_ = behind.RecordValue(max(at-first[k], 1))
		}
		c.mu.Unlock()
		r := &rs[i]
		r.AckDTp50, r.AckDTp99, r.AckDTn, r.AckEarly = ms(ack.ValueAtQuantile(50)), ms(ack.ValueAtQuantile(99)), ack.TotalCount(), early
		r.Behindp50, r.Behindp99 = ms(behind.ValueAtQuantile(50)), ms(behind.ValueAtQuantile(99))
	}
}
