package apply

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/stagetime"
)

// worker applies the units handed to it, one target transaction each, in
// the order received, committing each in its turn.
type worker struct {
	a    *Applier
	id   int
	conn *sql.Conn
	ch   chan *unit
	// load counts the groups handed to this worker and not yet done
	// (queued in ch or executing), for the scheduler's least busy worker:
	// counted from the hand-over, so a group the worker has just taken
	// from ch is not missed (len(ch) and a busy flag set after the receive
	// left a window in which a busy worker looked idle).
	load atomic.Int32
	bw   batchWriter
	cp   compactor
	// own are the ranges of this worker's groups committed out of order
	// and possibly still past the low-water mark (RelaxedOrder).
	own  []txnRange
	done []byte
	// For the lock monitor (lockwait.go): the server's id of conn, the
	// group being executed, the group waiting for its commit turn (0:
	// none), and the monitor's request to roll back (guarded by a.mu).
	connID   uint64
	execSeq  atomic.Uint64
	waitSeq  atomic.Uint64
	yieldReq bool
}

func (w *worker) run() {
	defer w.a.clocks.Worker.End(w.a.clocks.Worker.Begin())
	w.bw = batchWriter{a: w.a, conn: w.conn, clock: w.a.clocks.Worker}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-w.a.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		u, ok := w.next()
		if !ok {
			return
		}
		if w.a.Err() != nil {
			w.load.Add(-1)
			continue // drain, so the scheduler never blocks on a dead worker
		}
		err := w.apply(ctx, u)
		if err == nil && w.a.cfg.RelaxedOrder && len(w.ch) == 0 {
			// Idle: make the stored low-water mark catch up, so that a
			// caught-up task's checkpoint is one position again.
			err = w.persistMark(ctx)
		}
		if err != nil {
			w.bw.rollback()
			w.a.fail(err)
		}
		w.load.Add(-1)
	}
}

// next receives the next unit; false once the channel is closed. Only a
// receive that has to wait is timed.
func (w *worker) next() (*unit, bool) {
	select {
	case u, ok := <-w.ch:
		w.a.nudge() // room in ch
		return u, ok
	default:
	}
	c := w.a.clocks.Worker
	t0 := c.Enter(stagetime.WaitInput)
	u, ok := <-w.ch
	c.Leave(stagetime.WaitInput, t0)
	w.a.nudge()
	return u, ok
}

func (w *worker) apply(ctx context.Context, u *unit) error {
	a, b := w.a, &w.bw
	w.execSeq.Store(u.seq)
	replay := a.nontxReplay(u)
	if u.nontx {
		if err := w.nontxMark(ctx, u); err != nil {
			return err
		}
	}
	b.start()
	write := w.statements
	if replay {
		write = w.replayStatements
	}
	if err := write(ctx, u); err != nil {
		return w.wrap(u, err)
	}
	last := u.txns[len(u.txns)-1]
	b.fkFor(false)
	b.sep()
	a.mu.Lock()
	turn := a.nextCommit == u.seq
	markSeq, mark := a.nextCommit-1, a.stats.Applied
	a.mu.Unlock()
	if turn || !a.cfg.RelaxedOrder {
		// Committed in order, this group becomes the low-water mark, and
		// the worker's earlier groups lie below it.
		w.own = w.own[:0]
		markSeq = u.seq
		w.done = appendRanges(w.done[:0], last.end, a.inherited)
		b.buf = a.appendCheckpoint(b.buf, w.id, a.baseSeq+u.seq, last.end, w.done)
	} else {
		// Out of order: the row keeps the low-water mark this worker saw
		// (every group up to it committed before this transaction began)
		// and lists this group among those committed past it.
		w.own = append(ownPast(w.own, mark), unitRange(u))
		w.done = appendRanges(w.done[:0], mark, w.own, a.inherited)
		b.buf = a.appendCheckpoint(b.buf, w.id, a.baseSeq+markSeq, mark, w.done)
	}
	if turn || a.cfg.RelaxedOrder {
		b.buf = append(b.buf, ";COMMIT"...)
		b.final = true
		err := b.exec(ctx)
		b.final = false
		if err != nil {
			return w.wrap(u, err)
		}
	} else {
		if err := b.exec(ctx); err != nil {
			return w.wrap(u, err)
		}
		tw := a.clocks.Worker.Enter(stagetime.WaitTurn)
		yielded, err := w.awaitTurn(u.seq)
		a.clocks.Worker.Leave(stagetime.WaitTurn, tw)
		if err != nil {
			return err
		}
		if yielded {
			// Rolled back to free a lock an earlier group needed; now it
			// is this group's turn, so it runs again and commits at once.
			return w.apply(ctx, u)
		}
		t0 := time.Now()
		tc := a.clocks.Worker.Enter(stagetime.Commit)
		_, err = w.conn.ExecContext(ctx, "COMMIT")
		a.clocks.Worker.Leave(stagetime.Commit, tc)
		if err != nil {
			return w.wrap(u, err)
		}
		a.observeCommit(time.Since(t0))
	}
	// Counted before the commit is published: whoever sees the position
	// applied must see its missing rows too.
	a.addMissing(b.missing)
	a.committed(u.seq, u, last.end, len(u.txns), u.rows, last.ts)
	a.markPersisted(markSeq)
	if replay {
		a.nontxReplayed(last)
	}
	return nil
}

// persistMark writes the current low-water mark into the worker's row when
// no checkpoint row holds it yet (its own commit-time view lagged).
func (w *worker) persistMark(ctx context.Context) error {
	a := w.a
	markSeq, mark, lag := a.unpersistedMark()
	if !lag {
		return nil
	}
	w.own = ownPast(w.own, mark)
	w.done = appendRanges(w.done[:0], mark, w.own, a.inherited)
	q := a.appendCheckpoint(nil, w.id, a.baseSeq+markSeq, mark, w.done)
	if _, err := w.conn.ExecContext(ctx, string(q)); err != nil {
		return fmt.Errorf("write the low-water mark on worker %d: %w", w.id, err)
	}
	a.markPersisted(markSeq)
	return nil
}

// persistMark is worker.persistMark for the scheduler, after a barrier:
// every group has committed, so the mark covers everything and the
// checkpoint is a single position again.
func (a *Applier) persistMark(ctx context.Context) error {
	if !a.cfg.RelaxedOrder {
		return nil // in order, each commit wrote its own end as the mark
	}
	markSeq, mark, lag := a.unpersistedMark()
	if !lag {
		return nil
	}
	q := a.appendCheckpoint(nil, serialWorker, a.baseSeq+markSeq, mark, appendRanges(nil, mark, a.inherited))
	if _, err := a.serial.ExecContext(ctx, string(q)); err != nil {
		return fmt.Errorf("write the low-water mark: %w", err)
	}
	a.markPersisted(markSeq)
	return nil
}

// unpersistedMark returns the current low-water mark (its group sequence
// and position) and whether no checkpoint row holds it yet.
func (a *Applier) unpersistedMark() (seq uint64, mark sluice.Position, lag bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	seq = a.nextCommit - 1
	return seq, a.stats.Applied, seq > a.persisted
}

func (a *Applier) markPersisted(seq uint64) {
	a.mu.Lock()
	if seq > a.persisted {
		a.persisted = seq
	}
	a.mu.Unlock()
}

// commitTarget is the COMMIT round trip at which groups have their base
// size (Batch); slower commits grow them in proportion, up to MaxBatch.
const commitTarget = 2 * time.Millisecond

// observeCommit feeds one COMMIT round trip of a group that waited for its
// turn into the moving average and sets the group size limit from it. With
// source-order commit the COMMITs run one after another, so throughput is
// bounded by about group size / commit round trip; growing the groups with
// the round trip keeps that bound where it is at a near target.
func (a *Applier) observeCommit(d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	avg := int64(d)
	if old := a.commitRTT.Load(); old != 0 {
		avg = (7*old + int64(d)) / 8
	}
	a.commitRTT.Store(avg)
	a.setGroupLimit()
}

// observeRTT records the network round trip to the target (measured at
// Start). It matters with RelaxedOrder too: groups that conflict run one
// after another on one worker, a round trip each, so a chain of
// conflicting groups is bounded by group size / round trip as well.
func (a *Applier) observeRTT(d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rtt = d
	a.setGroupLimit()
}

// setGroupLimit: Batch at a 2 ms commit round trip or below, in proportion
// above, up to MaxBatch. Called with a.mu held.
func (a *Applier) setGroupLimit() {
	if a.cfg.MaxBatch <= a.cfg.Batch {
		return
	}
	slow := max(a.commitRTT.Load(), int64(a.rtt))
	lim := int64(a.cfg.Batch) * slow / int64(commitTarget)
	a.groupLimit.Store(max(int64(a.cfg.Batch), min(lim, int64(a.cfg.MaxBatch))))
}

// probeRTT measures the round trip of an empty statement (the fastest of
// three) on conn.
func (a *Applier) probeRTT(ctx context.Context, conn *sql.Conn) error {
	best := time.Duration(-1)
	for i := 0; i < 3; i++ {
		t0 := time.Now()
		if _, err := conn.ExecContext(ctx, "DO 1"); err != nil {
			return fmt.Errorf("measure the target round trip: %w", err)
		}
		if d := time.Since(t0); best < 0 || d < best {
			best = d
		}
	}
	a.observeRTT(best)
	return nil
}

func (a *Applier) info(t *sluice.Table) *tableInfo {
	v, _ := a.tables.Load(t) // resolved by the scheduler before dispatch
	return v.(*tableInfo)
}

// statements writes the group's changes: compacted to one statement per
// row when the group allows it, else one statement per change in order.
func (w *worker) statements(ctx context.Context, u *unit) error {
	a, b := w.a, &w.bw
	if u.rows < 2 || !w.cp.build(u, a.info) {
		for _, t := range u.txns {
			b.src = t
			for i := range t.changes {
				c := &t.changes[i]
				if err := b.change(ctx, c, a.info(c.Table)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	cp := &w.cp
	u.compacted = true
	for i, c := range cp.other {
		b.src = cp.otherSrc[i]
		if err := b.change(ctx, c, cp.infos[i]); err != nil {
			return err
		}
	}
	// DELETEs, batched per table when the key is one column.
	var dels []*netRow
	for _, r := range cp.order {
		if r.existed && r.after == nil {
			dels = append(dels, r)
		}
	}
	for len(dels) > 0 {
		info := dels[0].info
		var rows []*netRow
		rest := dels[:0]
		for _, r := range dels {
			if r.info == info {
				rows = append(rows, r)
			} else {
				rest = append(rest, r)
			}
		}
		dels = rest
		for len(rows) > 0 {
			// At most eq_range_index_dive_limit (200) keys: the optimizer then
			// counts them in the index instead of trusting stale statistics,
			// and picks the key range over a scan.
			n := min(len(rows), 200)
			if len(info.spec.Key) == 1 {
				st := rowStmt{info: info, kind: sluice.Delete, want: n}
				for _, r := range rows[:n] {
					st.rows = append(st.rows, r.before)
					st.srcs = append(st.srcs, r.src)
				}
				b.begin(st)
				b.buf = info.spec.AppendDeleteIn(b.buf, st.rows...)
				b.check()
			} else {
				for _, r := range rows[:n] {
					b.begin(rowStmt{info: info, kind: sluice.Delete, want: 1, rows: [][]any{r.before}, srcs: []*txn{r.src}})
					b.buf = info.spec.AppendDelete(b.buf, r.before)
					b.check()
				}
			}
			rows = rows[n:]
			if err := b.flushIfFull(ctx); err != nil {
				return err
			}
		}
	}
	// UPDATEs: several rows of one table with an integer key go in one
	// UPDATE ... JOIN of their new values; the rest one by one.
	var ups []*netRow
	for _, r := range cp.order {
		if r.existed && r.after != nil {
			ups = append(ups, r)
		}
	}
	for len(ups) > 0 {
		info := ups[0].info
		var group []*netRow
		rest := ups[:0]
		for _, r := range ups {
			if r.info == info {
				group = append(group, r)
			} else {
				rest = append(rest, r)
			}
		}
		ups = rest
		if err := w.updates(ctx, info, group); err != nil {
			return err
		}
	}
	// INSERTs, grouped per table so they merge into multi-row statements.
	var ins []*netRow
	for _, r := range cp.order {
		if !r.existed && r.after != nil {
			ins = append(ins, r)
		}
	}
	for len(ins) > 0 {
		info := ins[0].info
		rest := ins[:0]
		for _, r := range ins {
			if r.info == info {
				ch := sluice.RowChange{Kind: sluice.Insert, After: r.after}
				b.src = r.src
				if err := b.change(ctx, &ch, info); err != nil {
					return err
				}
			} else {
				rest = append(rest, r)
			}
		}
		ins = rest
	}
	return nil
}

// updates writes the net updates of one table.
func (w *worker) updates(ctx context.Context, info *tableInfo, rows []*netRow) error {
	b := &w.bw
	if len(rows) < 2 || !joinable(info, rows) {
		for _, r := range rows {
			ch := sluice.RowChange{Kind: sluice.Update, Before: r.before, After: r.after}
			b.src = r.src
			if err := b.change(ctx, &ch, info); err != nil {
				return err
			}
		}
		return nil
	}
	afters := make([][]any, 0, len(rows))
	for len(rows) > 0 {
		n := min(len(rows), 200)
		// The statement keeps the before images for its check's message.
		st := rowStmt{info: info, kind: sluice.Update, want: n, rows: make([][]any, 0, n), srcs: make([]*txn, 0, n)}
		afters = afters[:0]
		for _, r := range rows[:n] {
			st.rows = append(st.rows, r.before)
			st.srcs = append(st.srcs, r.src)
			afters = append(afters, r.after)
		}
		rows = rows[n:]
		b.begin(st)
		b.buf = w.a.appendUpdateJoin(b.buf, info, st.rows, afters)
		b.check()
		if err := b.flushIfFull(ctx); err != nil {
			return err
		}
	}
	return nil
}

// joinable: integer key values only, and something besides the key to set;
// not for a table with generated columns, whose rows are written one by one
// with their own check (batch.go, genCheck).
func joinable(info *tableInfo, rows []*netRow) bool {
	if len(info.spec.Write) <= len(info.spec.Key) || info.spec.HasGenerated() {
		return false
	}
	for _, r := range rows {
		for _, k := range info.spec.Key {
			switch r.before[k].(type) {
			case int8, int16, int32, int64, int, uint8, uint16, uint32, uint64:
			default:
				return false
			}
		}
	}
	return true
}

func (w *worker) wrap(u *unit, err error) error {
	if errors.Is(err, ErrMissingRow) || errors.Is(err, ErrTargetWarning) || errors.Is(err, ErrTargetRowDiffers) || errors.Is(err, ErrTargetRefused) {
		return err // names its source transaction already
	}
	var ns nontxStop
	if errors.As(err, &ns) {
		return ns.e // names its source transaction already
	}
	first, last := u.txns[0], u.txns[len(u.txns)-1]
	return fmt.Errorf("apply source transactions %s..%s (up to %s) on worker %d: %w", first.gtid, last.gtid, last.end, w.id, err)
}
