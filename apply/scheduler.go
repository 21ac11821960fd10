package apply

// The scheduler goroutine: it reads the submitted stream, assembles source
// transactions, groups them into units by their writesets and hands the
// units to workers (the grouping rules are in chain.go, the conflicts in
// writeset.go and fkeys.go).

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/stagetime"
)

// schedule is the scheduler goroutine: it assembles transactions, groups
// them into units and hands units to workers.
func (a *Applier) schedule() {
	clock := a.clocks.Schedule
	defer clock.End(clock.Begin())
	s := &scheduler{a: a}
	s.h.SetSeed(hashSeed)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-a.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	defer func() {
		for _, w := range a.workers {
			close(w.ch)
		}
	}()
	for {
		var it sluice.StreamItem
		select {
		case it = <-a.in:
		default:
			// The input ran dry: send what is grouped so far rather than
			// wait, unless sending it would only wait (chain.go).
			got, ch, stopped, err := s.idle(ctx)
			if err != nil {
				a.fail(err)
				return
			}
			if got != nil {
				it = *got
			}
			switch {
			case stopped:
				return
			case ch != nil:
				// Items submitted before Flush may still be queued: select
				// picks among ready cases at random, so the flush can be
				// seen first. They are handled before the flush answers.
				if err := s.drain(ctx); err != nil {
					ch <- err
					a.fail(err)
					return
				}
				ch <- s.flush(ctx)
				continue
			}
		}
		if err := s.handle(ctx, it); err != nil {
			a.fail(err)
			return
		}
	}
}

// scheduler is the state of the scheduler goroutine.
type scheduler struct {
	a    *Applier
	h    maphash.Hash
	cur  *txn  // transaction being assembled
	open *unit // group being filled
	big  *bigTxn
	// skipped counts the inherited ranges the stream has passed.
	skipped int
	// recheck and grown: the open group grew past the group limit while
	// dispatching it would have waited (chain.go).
	recheck int
	grown   bool
	xaHold  // an XA prepare group being written to apply_xa (xa.go)
}

// drain handles every item queued now.
func (s *scheduler) drain(ctx context.Context) error {
	for {
		select {
		case it := <-s.a.in:
			if err := s.handle(ctx, it); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

func (s *scheduler) flush(ctx context.Context) error {
	if err := s.dispatchOpen(ctx); err != nil {
		return err
	}
	// Waiting for the commits is waiting for the workers: output.
	t0 := s.a.clocks.Schedule.Enter(stagetime.WaitOutput)
	defer s.a.clocks.Schedule.Leave(stagetime.WaitOutput, t0)
	if s.big != nil {
		// The streamed transaction commits when its Commit item arrives;
		// everything before it is what can be waited for now.
		return s.a.waitTurn(s.big.seq)
	}
	if s.holding {
		// Everything before the XA prepare group being held committed
		// when the hold began; its own transaction commits at the prepare.
		return nil
	}
	if err := s.a.barrier(); err != nil {
		return err
	}
	return s.a.persistMark(ctx)
}

func (s *scheduler) handle(ctx context.Context, it sluice.StreamItem) error {
	switch it.Kind {
	case sluice.ItemBegin:
		if s.big != nil {
			return errors.New("apply: a transaction began inside a streamed transaction")
		}
		s.cur = &txn{gtid: it.GTID, ts: it.Timestamp, xid: it.XID}
	case sluice.ItemRows:
		if s.cur == nil {
			return errors.New("apply: rows outside a transaction")
		}
		if s.big != nil {
			return s.big.rows(ctx, it.Changes)
		}
		s.cur.changes = append(s.cur.changes, it.Changes...)
		for i := range it.Changes {
			s.cur.bytes += changeBytes(&it.Changes[i])
		}
		// While ranges an earlier run committed out of order lie ahead,
		// the transaction is held whole until its end shows whether it is
		// one of them. They are groups, each smaller than LargeTxnBytes
		// unless the setting was lowered between the runs.
		if s.cur.xid != "" {
			return s.xaRows(ctx)
		}
		if s.cur.bytes > s.a.cfg.LargeTxnBytes && !s.skipPending() {
			return s.startBig(ctx)
		}
	case sluice.ItemCommit:
		if s.cur == nil {
			return nil // the stream started inside a transaction we already applied
		}
		s.cur.end = it.End
		if s.big != nil {
			err := s.big.commit(ctx, it.End)
			s.big, s.cur = nil, nil
			return err
		}
		t := s.cur
		s.cur = nil
		if before(t.end, s.a.startPos) {
			return nil // read from before the checkpoint: committed already
		}
		if s.committedBefore(t.end) {
			s.a.mu.Lock()
			s.a.stats.Skipped++
			s.a.mu.Unlock()
			return nil // committed past the checkpoint, out of order
		}
		return s.add(ctx, t)
	case sluice.ItemSavepoint:
		return s.savepoint(ctx, it)
	case sluice.ItemDDL:
		s.cur = nil
		if before(it.End, s.a.startPos) {
			return nil
		}
		if err := s.flush(ctx); err != nil {
			return err
		}
		return s.a.applyDDL(ctx, it)
	case sluice.ItemXAPrepare, sluice.ItemXACommit, sluice.ItemXARollback:
		return s.xa(ctx, it)
	case sluice.ItemRollback:
		return s.rollbackGroup(ctx, it)
	default:
		return fmt.Errorf("apply: stream item of unknown kind %s (%d)", it.Kind, it.Kind)
	}
	return nil
}

// changeBytes estimates the memory and SQL size of one change.
func changeBytes(c *sluice.RowChange) int {
	n := 64
	for _, row := range [2][]any{c.Before, c.After} {
		for _, v := range row {
			switch x := v.(type) {
			case string:
				n += len(x) + 16
			case []byte:
				n += len(x) + 24
			default:
				n += 16
			}
		}
	}
	return n
}

// add puts a finished transaction into the open unit, first sending the
// unit off when it is full.
func (s *scheduler) add(ctx context.Context, t *txn) error {
	alone, err := s.alone(ctx, t)
	if err != nil {
		return err
	}
	if s.open != nil && (alone || s.full(t)) {
		if err := s.dispatchOpen(ctx); err != nil {
			return err
		}
	}
	if s.open == nil {
		s.open = &unit{}
		s.recheck, s.grown = 0, false
	}
	u := s.open
	for i := range t.changes {
		c := &t.changes[i]
		info, err := s.a.resolve(ctx, c.Table)
		if err != nil {
			return err
		}
		u.keys = addWriteset(u.keys, info, c, &s.h)
		if info.fk.barrier(c) {
			u.barrier = true
		}
	}
	u.txns = append(u.txns, t)
	u.bytes += t.bytes
	u.rows += len(t.changes)
	if alone {
		u.barrier, u.nontx = true, true
		return s.dispatchOpen(ctx)
	}
	return nil
}

// dispatchOpen hands the open unit to a worker. A unit that conflicts with
// uncommitted units of one worker goes to that worker, behind them; one
// that conflicts with several waits until all but one have committed; one
// without conflicts goes to the least busy worker.
func (s *scheduler) dispatchOpen(ctx context.Context) error {
	u := s.open
	if u == nil {
		return nil
	}
	s.open = nil
	a := s.a
	a.mu.Lock()
	waited := false
	var tc int64
	for {
		if a.err != nil {
			a.mu.Unlock()
			if waited {
				a.clocks.Schedule.Leave(stagetime.WaitConflict, tc)
			}
			return a.err
		}
		w1, w2 := a.conflicts(u)
		if w2 < 0 && !a.windowFull() {
			u.worker = w1
			break
		}
		if !waited {
			if !u.conflicted {
				u.conflicted = true
				a.stats.Conflicts++
			}
			waited = true
			tc = a.clocks.Schedule.Enter(stagetime.WaitConflict)
		}
		a.cond.Wait()
	}
	if waited {
		a.clocks.Schedule.Leave(stagetime.WaitConflict, tc)
	}
	if u.worker >= 0 {
		a.stats.Chained++
	} else {
		best := 0
		for i, w := range a.workers {
			if w.load.Load() < a.workers[best].load.Load() {
				best = i
			}
		}
		u.worker = best
	}
	a.lastSeq++
	u.seq = a.lastSeq
	if a.uncommitted == nil {
		a.uncommitted = make([]int, len(a.workers))
	}
	a.uncommitted[u.worker]++
	if u.barrier {
		a.barrierU = u
	}
	if n := int(a.lastSeq + 1 - a.nextCommit); n > a.stats.MaxInFlight {
		a.stats.MaxInFlight = n
	}
	for _, k := range u.keys {
		a.owner[k] = u
	}
	w := a.workers[u.worker]
	w.load.Add(1)
	a.mu.Unlock()
	select {
	case w.ch <- u:
		return nil
	default:
	}
	t0 := a.clocks.Schedule.Enter(stagetime.WaitOutput)
	defer a.clocks.Schedule.Leave(stagetime.WaitOutput, t0)
	select {
	case w.ch <- u:
		return nil
	case <-ctx.Done():
		w.load.Add(-1)
		return errClosed
	}
}
