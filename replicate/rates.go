package replicate

import (
	"sync"
	"time"
)

// rateClock gives a task's status its events/s and txns/s: the change of
// its counters over the last status interval of at least minRateSpan. The
// status loop marks the end of each interval (Task.statusLoop), and every
// Status between two marks reports the last complete interval.
type rateClock struct {
	mu         sync.Mutex
	at         time.Time
	evts, txns uint64
	evRate     float64
	txRate     float64
}

// minRateSpan: shorter intervals (a fast status loop) add up until they
// reach it, so that a rate is never the noise of a few milliseconds.
const minRateSpan = 200 * time.Millisecond

// fill sets s's rates from the last complete interval.
func (r *rateClock) fill(s *Status) {
	r.mu.Lock()
	s.EventsPerSec, s.TxnsPerSec = r.evRate, r.txRate
	r.mu.Unlock()
}

// mark ends the current interval at s once it is long enough.
func (r *rateClock) mark(now time.Time, s Status) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.at.IsZero() {
		d := now.Sub(r.at)
		if d < minRateSpan {
			return
		}
		r.evRate, r.txRate = 0, 0
		if s.Events >= r.evts {
			r.evRate = float64(s.Events-r.evts) / d.Seconds()
		}
		if s.Txns >= r.txns {
			r.txRate = float64(s.Txns-r.txns) / d.Seconds()
		}
	}
	r.at, r.evts, r.txns = now, s.Events, s.Txns
}
