package kafka

import (
	"testing"
	"time"
)

// TestBatchLimits: a backlog (source transactions older than catchUpAge)
// gets the longer Kafka transactions, a caught-up source the short ones.
func TestBatchLimits(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s := &Sink{cfg: DefaultConfig("t")}
	for _, c := range []struct {
		ts       uint32
		behind   bool
		interval time.Duration
		txns     uint64
	}{
		{uint32(now.Unix()), false, 100 * time.Millisecond, 2000},
		{uint32(now.Unix() - 1), false, 100 * time.Millisecond, 2000},
		{uint32(now.Unix() - 2), false, 100 * time.Millisecond, 2000},
		{uint32(now.Unix() - 3), true, 500 * time.Millisecond, 10000},
		{uint32(now.Unix() - 3600), true, 500 * time.Millisecond, 10000},
		{uint32(now.Unix() + 5), false, 100 * time.Millisecond, 2000}, // the source's clock ahead
		{0, false, 100 * time.Millisecond, 2000},                      // no timestamp
	} {
		s.behind = catchingUp(c.ts, now)
		interval, txns := s.batchLimits()
		if s.behind != c.behind || interval != c.interval || txns != c.txns {
			t.Errorf("ts now%+d: behind %v, limits %s / %d; want %v, %s / %d", int64(c.ts)-now.Unix(), s.behind, interval, txns, c.behind, c.interval, c.txns)
		}
	}
}
