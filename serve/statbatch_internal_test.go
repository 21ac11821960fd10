package serve

import (
	"encoding/binary"
	"math/rand"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/sluice-db/sluice"
)

// TestStatsBatchesAddUp: a dump's stats trail what it sent by less than a
// batch, and after the publish a dump makes before it waits (or ends) they
// equal the sum of everything sent, transactions and DT samples included,
// over many batches of random sizes.
func TestStatsBatchesAddUp(t *testing.T) {
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	st := &dumpStat{delay: hdrhistogram.New(1, 3_600_000, 2)}
	d := &dumper{h: &session{s: &Server{met: newServeMetrics()}}, stat: st}
	var events, bytes, txns uint64
	ts := uint32(time.Now().Add(-2 * time.Second).Unix())
	for i := 0; i < 10_000; i++ {
		raw := make([]byte, headerSize+rng.Intn(200))
		binary.LittleEndian.PutUint32(raw, ts)
		end := rng.Intn(4) == 0
		d.sent(raw, sluice.Position{File: "f.000001", Pos: uint32(i)}, end)
		events++
		bytes += uint64(len(raw))
		if end {
			txns++
		}
		if got := st.events.Load(); events-got >= statBatch {
			t.Fatalf("seed %d: after %d events the stats show %d: more than a batch behind", seed, events, got)
		}
		if rng.Intn(500) == 0 {
			d.publishStats() // the dump caught up
		}
	}
	d.publishStats()
	st.mu.Lock()
	n, pos, p50 := st.delay.TotalCount(), st.pos, st.delay.ValueAtQuantile(50)
	st.mu.Unlock()
	if st.events.Load() != events || st.bytes.Load() != bytes || st.txns.Load() != txns || uint64(n) != txns {
		t.Fatalf("seed %d: stats %d events, %d bytes, %d txns, %d DT samples; sent %d, %d, %d", seed,
			st.events.Load(), st.bytes.Load(), st.txns.Load(), n, events, bytes, txns)
	}
	if pos.Pos != 9_999 || p50 < 1000 {
		t.Fatalf("seed %d: position %v, DT p50 %d ms; want the last event's position and about 2 s", seed, pos, p50)
	}
}
