package apply

// Growing a chained group.
//
// A group whose writeset overlaps the uncommitted groups of one worker goes
// behind them on that worker (dispatchOpen). Under a write hot spot, such
// as sysbench's default "special" distribution (three quarters of the rows
// written are 1 % of the table), every group of Batch transactions overlaps
// the one before it, so all of them run on one worker, one after another,
// and the scheduler blocks handing each one over (the worker sweep,
// docs/benchmarks/replication.md). While that worker's channel is full, a
// group dispatched behind it would only wait there; so the scheduler keeps
// adding transactions to it instead, up to MaxBatch, and looks again every
// Batch transactions. It starts no later than it would have, and one target
// transaction commits all of them, with their row changes compacted.
//
// Only where the group is cut changes: it is still consecutive source
// transactions, committed in their turn with the checkpoint in the same
// target transaction.

// full reports whether the open group must be dispatched before t joins
// it: t would take it over BatchBytes, or it has reached the group limit
// and is not behind a worker whose channel is full (then it grows, up to
// MaxBatch).
func (s *scheduler) full(t *txn) bool {
	u, cfg := s.open, &s.a.cfg
	if u.bytes+t.bytes > cfg.BatchBytes {
		return true
	}
	n, lim := len(u.txns), int(s.a.groupLimit.Load())
	switch {
	case n < lim:
		return false
	case n >= cfg.MaxBatch:
		return true
	case n < s.recheck:
		return false // grown: look again after Batch more
	case s.behindFull():
		s.recheck = n + cfg.Batch
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

// behindFull reports whether the open group overlaps the uncommitted groups
// of exactly one worker, whose channel is full.
func (s *scheduler) behindFull() bool {
	a := s.a
	a.mu.Lock()
	defer a.mu.Unlock()
	w := -1
	for _, k := range s.open.keys {
		if o := a.owner[k]; o != nil {
			if w >= 0 && o.worker != w {
				return false
			}
			w = o.worker
		}
	}
	return w >= 0 && len(a.workers[w].ch) == cap(a.workers[w].ch)
}
