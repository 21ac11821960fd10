package apply

import (
	"context"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/stagetime"
)

// Growing a group that would wait.
//
// A group whose writeset overlaps the uncommitted groups of one worker goes
// behind them on that worker; one that overlaps the groups of several
// workers waits until all but one have committed (dispatchOpen). Under a
// write hot spot, such as sysbench's default "special" distribution (three
// quarters of the rows written are 1 % of the table), nearly every group of
// Batch transactions overlaps the one before it, so the groups run one
// after another and the scheduler blocks handing each one over (the worker
// sweep, docs/benchmarks/replication.md). A group dispatched then would only
// wait; so the scheduler keeps adding transactions to it instead, up to
// ChainBatch, and looks again as it grows. It starts no later than it would
// have, and one target transaction commits all of them, with their row
// changes compacted. With a far target this is what keeps the rate: groups
// that run one after another each pay their round trips (at +20 ms about
// 40 ms on top of executing the group), so the size of the group, not the
// round trip, must bound the chain.
//
// Only where the group is cut changes: it is still consecutive source
// transactions, committed in their turn with the checkpoint in the same
// target transaction.

// full reports whether the open group must be dispatched before t joins
// it: t would take it over ChainBytes, or over BatchBytes or the group limit
// while dispatching it would not wait (a group that would only wait grows,
// up to ChainBatch transactions and ChainBytes).
func (s *scheduler) full(t *txn) bool {
	u, cfg := s.open, &s.a.cfg
	bytes := u.bytes + t.bytes
	if bytes > max(cfg.BatchBytes, cfg.ChainBytes) {
		return true
	}
	n, lim := len(u.txns), int(s.a.groupLimit.Load())
	switch {
	case n < lim && bytes <= cfg.BatchBytes:
		return false
	case cfg.MaxBatch <= cfg.Batch || n >= max(cfg.MaxBatch, cfg.ChainBatch):
		return true
	case bytes > cfg.BatchBytes && cfg.ChainBytes <= cfg.BatchBytes:
		return true
	case n < s.recheck:
		return false // grown: look again later
	case s.wouldWait():
		// Look again after a quarter more (at least Batch): the check
		// walks the group's keys, so checking every Batch transactions
		// of a group of thousands would cost more than the rows.
		s.recheck = n + max(cfg.Batch, n/4)
		if !s.grown {
			s.grown = true
			s.a.mu.Lock()
			s.a.stats.Grown++
			s.a.mu.Unlock()
		}
		return false
	}
	return true
}

// wouldWait reports whether dispatching the open group now would wait: it
// overlaps the uncommitted groups of several workers (or RelaxedOrder's
// window is full), or of exactly one worker, whose channel is full.
func (s *scheduler) wouldWait() bool {
	a := s.a
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err != nil {
		return false // dispatchOpen returns it
	}
	w1, w2 := a.conflicts(s.open)
	switch {
	case w2 >= 0 || a.windowFull():
		if !s.open.conflicted {
			s.open.conflicted = true
			a.stats.Conflicts++
		}
		return true
	case w1 >= 0:
		return len(a.workers[w1].ch) == cap(a.workers[w1].ch)
	}
	return false
}

// conflicts returns the worker whose uncommitted groups u overlaps (w1,
// or -1) and, if it overlaps those of another worker too, one such other
// worker (w2, or -1). A barrier group (fkeys.go) overlaps every group:
// every later group overlaps it until it commits, and it overlaps every
// uncommitted group. Called with a.mu held.
func (a *Applier) conflicts(u *unit) (w1, w2 int) {
	w1, w2 = -1, -1
	if b := a.barrierU; b != nil && b != u {
		w1 = b.worker
	}
	if u.barrier {
		for i, n := range a.uncommitted {
			if n > 0 {
				if w1 < 0 || w1 == i {
					w1 = i
				} else {
					return w1, i
				}
			}
		}
	}
	for _, k := range u.keys {
		if o := a.owner[k]; o != nil {
			if w1 < 0 || w1 == o.worker {
				w1 = o.worker
			} else {
				return w1, o.worker
			}
		}
	}
	return w1, -1
}

// windowFull: with RelaxedOrder, the groups past the low-water mark (and so
// the checkpoint's done lists) are kept bounded, whatever one slow group
// holds up. Called with a.mu held.
func (a *Applier) windowFull() bool {
	return a.cfg.RelaxedOrder && a.lastSeq+1-a.nextCommit >= uint64(relaxedWindow*len(a.workers))
}

// idle runs when the input ran dry. A group is sent off at once (a caught
// up stream is applied with low latency) unless sending it would only
// wait: then it stays open, and grows with what arrives, until it would
// not wait (a worker took a group or a group committed: a.progress). It
// returns the next item, or a flush request, or that the applier stops.
func (s *scheduler) idle(ctx context.Context) (*sluice.StreamItem, chan error, bool, error) {
	a, clock := s.a, s.a.clocks.Schedule
	for {
		// Held open, the scheduler waits for its workers (output);
		// otherwise, with the group sent off, for input.
		var progress chan struct{}
		state := stagetime.WaitInput
		if s.open != nil && s.wouldWait() {
			progress, state = a.progress, stagetime.WaitOutput
		} else if err := s.dispatchOpen(ctx); err != nil {
			return nil, nil, false, err
		}
		t0 := clock.Enter(state)
		var next sluice.StreamItem
		select {
		case next = <-a.in:
			clock.Leave(state, t0)
			return &next, nil, false, nil
		case flush := <-a.flushes:
			clock.Leave(state, t0)
			return nil, flush, false, nil
		case <-a.stop:
			clock.Leave(state, t0)
			return nil, nil, true, nil
		case <-progress: // nil, and so never ready, unless held open
			clock.Leave(state, t0)
		}
	}
}
