package apply

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/sqlgen"
)

// A non-transactional group cut in the middle (issue 29, difftest seeds
// 2708 and 2735).
//
// A group that changes a non-transactional target table runs alone, after
// every earlier group committed (nontx.go). If its session dies before the
// commit (the target server restarts, the connection drops, kill -9 of the
// target), the rows it wrote to Aria/MyISAM/MEMORY tables stay, while its
// InnoDB rows and its checkpoint roll back. Run again from the checkpoint,
// it met its own rows: Duplicate entry on an INSERT, a missing row on an
// UPDATE or DELETE. A native replica's SQL thread finishes such a group
// before it stops, but sluice cannot keep the server from killing its
// session, so the rerun itself must be exact.
//
// So, as DDL does (ddlrun.go), the group is marked before it runs: the
// worker's checkpoint row (holding the position everything before the
// group committed to, unchanged) records the group's end position in
// nontx_pending, committed on its own. The group's own checkpoint write,
// in its target transaction, clears the mark. A restart that finds a mark
// applies that group's changes to non-transactional tables in a form that
// gives the group's final rows whatever part of it ran before:
//   - INSERT r: REPLACE r (a row with r's key, or with any of its unique
//     values, can only be one this group wrote or will write);
//   - UPDATE b->a: DELETE the row with b's key, then REPLACE a;
//   - DELETE b: DELETE the row with b's key; none found is fine.
//
// Each step leaves every key it touches as the source had it right after
// that change, and a key the rest of the group touches again is set again
// by a later step, so the group ends with the source's rows. A REPLACE
// that removes a row for another unique value removes one that a later
// step writes again: any other row with that value would have made the
// source's change fail too. Changes to transactional tables in the group
// were rolled back and apply as always (strictly). A non-transactional
// table without a primary key or a NOT NULL unique key cannot be replayed
// so (identical rows cannot be told apart): the task stops, as it did
// before, now saying why.

// nontxMark commits the mark of non-transactional group u on worker w's
// checkpoint row before the group runs. Every earlier group has committed
// (u is a barrier), so the row keeps the current low-water mark as its
// position.
func (w *worker) nontxMark(ctx context.Context, u *unit) error {
	a := w.a
	a.mu.Lock()
	markSeq, mark := a.nextCommit-1, a.stats.Applied
	a.mu.Unlock()
	end := u.txns[len(u.txns)-1].end
	w.own = ownPast(w.own, mark)
	w.done = appendRanges(w.done[:0], mark, w.own, a.inherited)
	q := a.appendCheckpointMarks(nil, w.id, a.baseSeq+markSeq, mark, w.done, "", end.String())
	if _, err := w.conn.ExecContext(ctx, string(q)); err != nil {
		return fmt.Errorf("mark the non-transactional group %s (up to %s) pending on worker %d: %w", u.txns[0].gtid, end, w.id, err)
	}
	a.markPersisted(markSeq)
	return nil
}

// nontxReplay reports whether u is the non-transactional group a crash may
// have cut, to be replayed in the idempotent form.
func (a *Applier) nontxReplay(u *unit) bool {
	if !u.nontx {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	end := u.txns[len(u.txns)-1].end.String()
	for _, m := range a.nontxPending {
		if m == end {
			return true
		}
	}
	return false
}

// nontxReplayed forgets the marks once the marked group committed.
func (a *Applier) nontxReplayed(t *txn) {
	a.mu.Lock()
	a.nontxPending = nil
	a.mu.Unlock()
	if a.cfg.Notify != nil {
		a.cfg.Notify("apply: source transaction %s (up to %s) changes a non-transactional table and was cut by a crash or a lost target session; replayed its changes to non-transactional tables idempotently from their row images", t.gtid, t.end)
	}
}

// replayStatements writes the changes of marked group u: those to
// non-transactional tables in the idempotent form (see above), the others
// as always, in source order and never compacted. It ends with the
// clearing of every row's mark (the crashed run's may be another worker's
// row), which commits with the group.
func (w *worker) replayStatements(ctx context.Context, u *unit) error {
	a, b := w.a, &w.bw
	for _, t := range u.txns {
		b.src = t
		for i := range t.changes {
			c := &t.changes[i]
			info := a.info(c.Table)
			if !info.nontx {
				if err := b.change(ctx, c, info); err != nil {
					return err
				}
				continue
			}
			if err := nontxReplayable(t, c, info); err != nil {
				return err
			}
			if err := b.replayChange(ctx, c, info); err != nil {
				return err
			}
		}
	}
	b.fkFor(false)
	b.sep()
	b.buf = a.appendClearNontx(b.buf)
	return nil
}

// nontxStop is a refusal of nontxReplayable, which names its source
// transaction already (worker.wrap passes it on as it is).
type nontxStop struct{ e *sluice.Error }

func (n nontxStop) Error() string { return n.e.Error() }
func (n nontxStop) Unwrap() error { return n.e }

// nontxReplayable refuses a change that the idempotent form cannot replay
// exactly.
func nontxReplayable(t *txn, c *sluice.RowChange, info *tableInfo) error {
	fix := "compare the table with the source and correct it by hand (or reload it), then run sluice skip for this transaction's GTID; to avoid this, give the table a primary key or make it transactional (ENGINE=InnoDB) on the target"
	if info.spec.Keyless {
		return nontxStop{&sluice.Error{Op: fmt.Sprintf("replay source transaction %s (up to %s) on non-transactional target table %s", t.gtid, t.end, c.Table.Ref),
			Err:  errors.New("the transaction may have run in part before the target session was lost, its rows in this table stayed, and the table has no primary key or NOT NULL unique key, so identical rows cannot be told apart to replay it exactly"),
			Hint: fix}}
	}
	for _, row := range [2][]any{c.Before, c.After} {
		if row == nil {
			continue
		}
		for _, k := range info.spec.Key {
			if k >= len(row) {
				return nontxStop{&sluice.Error{Op: fmt.Sprintf("replay source transaction %s (up to %s) on non-transactional target table %s", t.gtid, t.end, c.Table.Ref),
					Err:  fmt.Errorf("the transaction may have run in part before the target session was lost, and its row image lacks key column %s (binlog_row_image is not FULL)", info.spec.Cols[k]),
					Hint: fix + "; set binlog_row_image=FULL on the source"}}
			}
		}
	}
	if c.After != nil && len(c.After) < len(info.spec.Cols) {
		return nontxStop{&sluice.Error{Op: fmt.Sprintf("replay source transaction %s (up to %s) on non-transactional target table %s", t.gtid, t.end, c.Table.Ref),
			Err:  errors.New("the transaction may have run in part before the target session was lost, and its row image is partial (binlog_row_image is not FULL)"),
			Hint: fix + "; set binlog_row_image=FULL on the source"}}
	}
	return nil
}

// replayChange writes one change to a non-transactional table in its
// idempotent form: no row counts are checked (a row may or may not be
// there), warnings are, and a table with generated columns has the rows it
// stores compared with the source's images as always (genCheck).
func (b *batchWriter) replayChange(ctx context.Context, c *sluice.RowChange, info *tableInfo) error {
	b.fkFor(c.NoFKChecks)
	if c.Before != nil && (c.After == nil || !sameKey(info, c.Before, c.After)) {
		b.begin(rowStmt{info: info, kind: sluice.Delete, rows: [][]any{c.Before}, srcs: []*txn{b.src}})
		b.buf = info.spec.AppendDelete(b.buf, c.Before)
		b.check()
	}
	if c.After != nil {
		st := rowStmt{info: info, kind: sluice.Insert, srcFirst: b.src, srcLast: b.src, n: 1}
		if info.spec.HasGenerated() {
			st.afters = [][]any{c.After}
			b.genBegin(st)
		} else {
			b.begin(st)
		}
		b.buf = append(b.buf, "REPLACE"...)
		ins := info.spec.AppendInsert(nil, c.After)
		b.buf = append(b.buf, ins[len("INSERT"):]...)
		b.check()
	}
	return b.flushIfFull(ctx)
}

// sameKey reports whether rows x and y have the same key values, byte for
// byte.
func sameKey(info *tableInfo, x, y []any) bool {
	for _, k := range info.spec.Key {
		if !sqlgen.EqualValue(x[k], y[k]) {
			return false
		}
	}
	return true
}

// Streamed transactions (larger than LargeTxnBytes, serial.go) send their
// rows before their end position is known, so their mark names the GTID.
// It is committed from another session before the first row of a
// non-transactional table is sent (every earlier group has committed: a
// streamed transaction starts after a flush), on the serial checkpoint
// row, which the transaction's own checkpoint write clears. A transaction
// without a GTID is not marked and is applied strictly as before.

func bigMark(gtid string) string { return "gtid " + gtid }

// bigNontx writes change c of a streamed transaction to non-transactional
// table info: marked first, and in the idempotent form when the
// transaction is the one a mark names.
func (b *bigTxn) bigNontx(ctx context.Context, c *sluice.RowChange, info *tableInfo) error {
	a := b.a
	if !b.marked {
		a.mu.Lock()
		markSeq, mark := a.nextCommit-1, a.stats.Applied
		a.mu.Unlock()
		q := a.appendCheckpointMarks(nil, serialWorker, a.baseSeq+markSeq, mark, appendRanges(nil, mark, a.inherited), "", bigMark(b.gtid))
		if _, err := a.db.ExecContext(ctx, string(q)); err != nil {
			return fmt.Errorf("mark the non-transactional large transaction %s pending: %w", b.gtid, err)
		}
		b.marked = true
	}
	if !b.replaying {
		return b.bw.change(ctx, c, info)
	}
	if err := nontxReplayable(b.bw.src, c, info); err != nil {
		return err
	}
	return b.bw.replayChange(ctx, c, info)
}

// bigReplay reports whether the streamed transaction gtid is one a mark
// names.
func (a *Applier) bigReplay(gtid string) bool {
	if gtid == "" {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, m := range a.nontxPending {
		if m == bigMark(gtid) {
			return true
		}
	}
	return false
}

// appendClearNontx appends the clearing of every row's mark (the crashed
// run's may be another worker's row) to a replayed group's transaction.
func (a *Applier) appendClearNontx(b []byte) []byte {
	b = append(b, "UPDATE "...)
	b = append(b, a.ckptTable...)
	b = append(b, " SET nontx_pending=NULL WHERE task="...)
	b = sqlgen.AppendQuoted(b, a.cfg.Task)
	return append(b, " AND nontx_pending IS NOT NULL"...)
}
