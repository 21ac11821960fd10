package apply

import (
	"testing"
	"time"

	"github.com/sluice-db/sluice"
)

func pos(f string, p uint32) sluice.Position { return sluice.Position{File: f, Pos: p} }

func TestRangesRoundTripAndNormalize(t *testing.T) {
	mark := pos("bin.000002", 500)
	rs := []txnRange{
		{pos("bin.000001", 100), pos("bin.000002", 400)}, // below the mark: dropped
		{pos("bin.000002", 900), pos("bin.000003", 50)},
		{pos("bin.000002", 600), pos("bin.000002", 800)},
		{pos("bin.000002", 600), pos("bin.000002", 800)}, // duplicate (inherited by two rows)
		{pos("bin.000002", 650), pos("bin.000002", 700)}, // inside the previous one
	}
	enc := appendRanges(nil, mark, rs)
	got, err := parseRanges(string(enc))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("encoded %q: %d ranges past the mark, want 4", enc, len(got))
	}
	n := normalizeRanges(got, mark)
	want := []txnRange{rs[2], rs[1]}
	if len(n) != len(want) || n[0] != want[0] || n[1] != want[1] {
		t.Fatalf("normalized %v, want %v", n, want)
	}
	if _, err := parseRanges("bin.1\t5\tbin.2\n"); err == nil {
		t.Fatal("a malformed line parsed")
	}

	// The scheduler's skip check walks the ranges as the stream advances.
	s := &scheduler{a: &Applier{inherited: n}}
	for _, c := range []struct {
		end  sluice.Position
		skip bool
	}{
		{pos("bin.000002", 550), false},
		{pos("bin.000002", 600), true},
		{pos("bin.000002", 800), true},
		{pos("bin.000002", 850), false},
		{pos("bin.000002", 900), true},
		{pos("bin.000003", 50), true},
		{pos("bin.000003", 60), false},
	} {
		if got := s.committedBefore(c.end); got != c.skip {
			t.Errorf("committedBefore(%v) = %v, want %v", c.end, got, c.skip)
		}
	}
	if s.skipPending() {
		t.Error("ranges still pending after the stream passed them all")
	}
}

func TestGroupLimitFollowsCommitRoundTrip(t *testing.T) {
	cfg := DefaultConfig()
	a, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := a.Stats().GroupLimit; got != cfg.Batch {
		t.Fatalf("initial limit %d, want Batch %d", got, cfg.Batch)
	}
	for i := 0; i < 50; i++ {
		a.observeCommit(21 * time.Millisecond) // a distant target
	}
	if got := a.Stats().GroupLimit; got != cfg.MaxBatch {
		t.Fatalf("limit at 21 ms commits %d, want MaxBatch %d", got, cfg.MaxBatch)
	}
	for i := 0; i < 50; i++ {
		a.observeCommit(6 * time.Millisecond)
	}
	if got := a.Stats().GroupLimit; got < 2*cfg.Batch || got > 4*cfg.Batch {
		t.Fatalf("limit at 6 ms commits %d, want about 3x Batch", got)
	}
	for i := 0; i < 80; i++ {
		a.observeCommit(300 * time.Microsecond) // a near target
	}
	if got := a.Stats().GroupLimit; got != cfg.Batch {
		t.Fatalf("limit at 0.3 ms commits %d, want Batch %d", got, cfg.Batch)
	}
	// A distant target seen at Start grows the groups without any COMMIT
	// sample (RelaxedOrder sends none).
	a.observeRTT(10 * time.Millisecond)
	if got := a.Stats().GroupLimit; got != 5*cfg.Batch {
		t.Fatalf("limit at a 10 ms round trip %d, want 5x Batch", got)
	}
	cfg.MaxBatch = 0
	b, _ := New(cfg, nil)
	b.observeCommit(time.Second)
	b.observeRTT(time.Second)
	if got := b.Stats().GroupLimit; got != cfg.Batch {
		t.Fatalf("with MaxBatch 0 the limit moved to %d", got)
	}
}
