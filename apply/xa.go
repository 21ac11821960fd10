package apply

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/gob"
	"errors"
	"fmt"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/sqlgen"
)

// Two-phase XA (decode/xa.go has the binlog's shapes).
//
// A prepared XA transaction's rows are held in the target, in the meta
// table apply_xa, written in the same target transaction as the checkpoint
// that moves past the prepare group. XA COMMIT reads them back and applies
// them, deletes them and moves the checkpoint, again in one target
// transaction; XA ROLLBACK deletes them with its checkpoint. So every step
// is atomic with the checkpoint, and a kill -9 of sluice at any moment
// leaves one of three states, each resumed exactly once:
//
//  1. killed before the prepare's target commit: the checkpoint is before
//     the prepare group and nothing is held; the restart reads the prepare
//     group again (the relay or the source's binlog still has it, as it
//     has everything past the checkpoint) and holds its rows.
//  2. killed after the prepare's commit, before the completion's: the
//     checkpoint is past the prepare group and its rows are held; the
//     restart reads on from there, and the XA COMMIT finds the rows.
//     Any number of restarts in this state change nothing: the rows stay
//     held until the completion group arrives.
//  3. killed after the completion's commit: the rows are applied (or
//     discarded) and no longer held, and the checkpoint is past the
//     completion group, which is never read again.
//
// Why not the alternatives. Holding the prepared transaction as a real
// prepared XA transaction on the target, as a native replica does, keeps
// its row locks (and the checkpoint row's, which every later transaction
// updates) for as long as the source keeps it prepared: the applier and
// sluice verify would block behind it. Holding it in the relay log would
// pin the relay and the decoder's restart point to the oldest prepared
// transaction. The held rows are not data: verify and status look at the
// replicated tables only.
//
// Order. Each XA item runs alone on the serial connection after every
// earlier transaction has committed (as DDL does), so the rows become
// visible on the target at the XA COMMIT's place in the source order, as
// on the source and a native replica. Applying them there, and not at the
// prepare, is exact: the source's prepared transaction held its row locks
// until it completed, so no transaction in between touched its rows.
//
// A prepare group larger than LargeTxnBytes is not held in memory: its
// rows go to apply_xa as they are read, in the target transaction that
// commits with the prepare's checkpoint (xaRows).

// xaHold is the scheduler's state while it writes a large XA prepare
// group to apply_xa in a target transaction on the serial connection.
type xaHold struct {
	holding   bool
	holdChunk int // the next chunk number
}

// ErrXANotHeld: an XA COMMIT names a transaction whose prepare sluice
// never read.
var ErrXANotHeld = errors.New("XA transaction not held")

// xaChunk is one row of apply_xa: a run of the held changes, gob-encoded.
// Values keep their Go types (gob sends each interface value's type), so
// the changes applied at XA COMMIT are the decoder's own.
type xaChunk struct {
	Tables  []sluice.Table
	Changes []xaChange
}

type xaChange struct {
	Kind          sluice.ChangeKind
	Table         int
	Before, After []any
}

func (a *Applier) xaTable() string { return sluice.QuoteIdent(a.cfg.MetaSchema) + ".apply_xa" }

// ensureXA creates the table of held XA transactions. It runs outside any
// transaction (DDL commits implicitly), once per applier.
func (a *Applier) ensureXA(ctx context.Context) error {
	if a.xaReady {
		return nil
	}
	_, err := a.serial.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+a.xaTable()+` (
		task VARCHAR(128) NOT NULL,
		xid VARCHAR(300) NOT NULL,
		chunk INT NOT NULL,
		gtid VARCHAR(128) NOT NULL,
		data LONGBLOB NOT NULL,
		PRIMARY KEY (task, xid, chunk)) ENGINE=InnoDB`)
	if err != nil {
		return fmt.Errorf("create %s: %w", a.xaTable(), err)
	}
	a.xaReady = true
	return nil
}

// xa handles the XA items, in the scheduler's goroutine.
func (s *scheduler) xa(ctx context.Context, it sluice.StreamItem) error {
	a := s.a
	switch it.Kind {
	case sluice.ItemXAPrepare:
		t := s.cur
		s.cur = nil
		if t == nil {
			return nil // the stream started inside a group applied already
		}
		if t.xid != "" && t.xid != it.XID {
			return fmt.Errorf("apply: XA PREPARE %s closes a transaction begun as %q", it.XID, t.xid)
		}
		if s.big != nil {
			// MySQL: its XA START does not say the group ends in a
			// prepare, and the group grew past LargeTxnBytes, so its rows
			// went to the target as an ordinary transaction's would.
			s.big.bw.rollback()
			s.big = nil
			return &sluice.Error{Op: "hold XA transaction " + it.XID + " (GTID " + it.GTID + ") at " + it.End.String(),
				Err:  fmt.Errorf("%w: the prepared transaction is larger than large-txn-bytes (%d), and a MySQL source does not mark a prepare group at its start", sluice.ErrConfig, a.cfg.LargeTxnBytes),
				Hint: "raise apply large-txn-bytes above the transaction's size and restart the task (nothing of it was applied)"}
		}
		t.end = it.End
		if before(it.End, a.startPos) {
			if s.holding {
				s.holding = false
				_, _ = a.serial.ExecContext(context.Background(), "ROLLBACK")
			}
			return nil
		}
		if !s.holding {
			if err := s.flush(ctx); err != nil {
				return err
			}
		}
		return s.xaPrepare(ctx, t, it)
	case sluice.ItemXACommit, sluice.ItemXARollback:
		s.cur = nil
		if before(it.End, a.startPos) {
			return nil
		}
		if err := s.flush(ctx); err != nil {
			return err
		}
		return a.xaComplete(ctx, it)
	}
	return nil
}

// xaPrepare holds the prepared transaction t and moves the checkpoint past
// its prepare group, in one target transaction: the one xaRows began when
// the group grew large, or a new one.
func (s *scheduler) xaPrepare(ctx context.Context, t *txn, it sluice.StreamItem) error {
	a := s.a
	if !s.holding {
		if err := a.xaHoldBegin(ctx, it.XID, it.GTID); err != nil {
			return err
		}
		s.holding, s.holdChunk = true, 0
	}
	s.holding = false
	if len(t.changes) > 0 || s.holdChunk == 0 {
		if _, err := a.xaHoldWrite(ctx, it.XID, it.GTID, s.holdChunk, t.changes); err != nil {
			return err
		}
	}
	a.mu.Lock()
	a.lastSeq++
	seq := a.lastSeq
	a.mu.Unlock()
	if err := a.xaCommitCheckpoint(ctx, seq, it); err != nil {
		_, _ = a.serial.ExecContext(context.Background(), "ROLLBACK")
		return fmt.Errorf("hold XA transaction %s (GTID %s) at %s: %w", it.XID, it.GTID, it.End, err)
	}
	a.committed(seq, nil, it.End, 1, 0, it.Timestamp)
	a.markPersisted(seq)
	return nil
}

// xaRows runs after each Rows item of a prepare group. A group that grows
// past LargeTxnBytes is not held in memory: every earlier transaction is
// committed first, then a target transaction on the serial connection
// takes its rows into apply_xa as they arrive, in chunks of BatchBytes,
// and commits with the prepare's checkpoint (xaPrepare). No group is
// dispatched meanwhile: the items until the prepare are this group's.
func (s *scheduler) xaRows(ctx context.Context) error {
	a := s.a
	if !s.holding {
		if s.cur.bytes <= a.cfg.LargeTxnBytes || s.skipPending() {
			return nil
		}
		if err := s.flush(ctx); err != nil {
			return err
		}
		if err := a.xaHoldBegin(ctx, s.cur.xid, s.cur.gtid); err != nil {
			return err
		}
		s.holding, s.holdChunk = true, 0
	} else if s.cur.bytes < a.cfg.BatchBytes {
		return nil
	}
	next, err := a.xaHoldWrite(ctx, s.cur.xid, s.cur.gtid, s.holdChunk, s.cur.changes)
	if err != nil {
		s.holding = false
		return err
	}
	s.holdChunk = next
	s.cur.changes, s.cur.bytes = nil, 0
	return nil
}

// xaHoldBegin opens the target transaction that holds a prepared XA
// transaction, refusing an XID that is held already.
func (a *Applier) xaHoldBegin(ctx context.Context, xid, gtid string) error {
	if err := a.ensureXA(ctx); err != nil {
		return err
	}
	c := a.serial
	if _, err := c.ExecContext(ctx, "START TRANSACTION"); err != nil {
		return fmt.Errorf("hold XA transaction %s (GTID %s): %w", xid, gtid, err)
	}
	var n int
	if err := c.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+a.xaTable()+" WHERE task=? AND xid=?", a.cfg.Task, xid).Scan(&n); err != nil {
		_, _ = c.ExecContext(context.Background(), "ROLLBACK")
		return fmt.Errorf("hold XA transaction %s (GTID %s): %w", xid, gtid, err)
	}
	if n > 0 {
		_, _ = c.ExecContext(context.Background(), "ROLLBACK")
		return &sluice.Error{Op: "hold XA transaction " + xid + " (GTID " + gtid + ")",
			Err:  errors.New("a transaction with this XID is held already: the source prepared it twice without a completion in between"),
			Hint: "check the source's binlog around both prepares (mariadb-binlog -vv); sluice stops rather than guess which one the next XA COMMIT completes"}
	}
	return nil
}

// xaHoldWrite adds changes to the held transaction as chunks first,
// first+1, ... and returns the next chunk number. On error the target
// transaction is rolled back.
func (a *Applier) xaHoldWrite(ctx context.Context, xid, gtid string, first int, changes []sluice.RowChange) (int, error) {
	c := a.serial
	chunks, err := a.encodeXA(changes)
	if err != nil {
		_, _ = c.ExecContext(context.Background(), "ROLLBACK")
		return 0, &sluice.Error{Op: "hold XA transaction " + xid + " (GTID " + gtid + ")", Err: err,
			Hint: "report this to the sluice developers with the table definitions; the transaction is not applied"}
	}
	for i, data := range chunks {
		q := append([]byte("INSERT INTO "), a.xaTable()...)
		q = append(q, " (task, xid, chunk, gtid, data) VALUES ("...)
		q = sqlgen.AppendQuoted(q, a.cfg.Task)
		q = append(q, ',')
		q = sqlgen.AppendQuoted(q, xid)
		q = append(q, ',')
		q = sqlgen.AppendValue(q, int64(first+i))
		q = append(q, ',')
		q = sqlgen.AppendQuoted(q, gtid)
		q = append(q, ',')
		q = sqlgen.AppendValue(q, data)
		q = append(q, ')')
		if _, err := c.ExecContext(ctx, string(q)); err != nil {
			_, _ = c.ExecContext(context.Background(), "ROLLBACK")
			return 0, fmt.Errorf("hold XA transaction %s (GTID %s): %w", xid, gtid, err)
		}
	}
	return first + len(chunks), nil
}

// xaCommitCheckpoint writes the serial checkpoint past item it and commits.
func (a *Applier) xaCommitCheckpoint(ctx context.Context, seq uint64, it sluice.StreamItem) error {
	b := a.appendCheckpoint(nil, serialWorker, a.baseSeq+seq, it.End, appendRanges(nil, it.End, a.inherited))
	b = append(b, ";COMMIT"...)
	_, err := a.serial.ExecContext(ctx, string(b))
	return err
}

// encodeXA splits changes into chunks of about BatchBytes each. A
// prepared transaction with no replicated rows is held as one empty chunk,
// so that its XA COMMIT finds it.
func (a *Applier) encodeXA(changes []sluice.RowChange) ([][]byte, error) {
	var out [][]byte
	var cur xaChunk
	idx := map[*sluice.Table]int{}
	size := 0
	emit := func() error {
		var buf bytes.Buffer
		if err := gob.NewEncoder(&buf).Encode(&cur); err != nil {
			return fmt.Errorf("encode the held rows: %w", err)
		}
		out = append(out, buf.Bytes())
		cur, size = xaChunk{}, 0
		clear(idx)
		return nil
	}
	for i := range changes {
		c := &changes[i]
		ti, ok := idx[c.Table]
		if !ok {
			ti = len(cur.Tables)
			idx[c.Table] = ti
			cur.Tables = append(cur.Tables, *c.Table)
		}
		cur.Changes = append(cur.Changes, xaChange{Kind: c.Kind, Table: ti, Before: c.Before, After: c.After})
		if size += changeBytes(c); size >= a.cfg.BatchBytes {
			if err := emit(); err != nil {
				return nil, err
			}
		}
	}
	if len(cur.Changes) > 0 || len(out) == 0 {
		if err := emit(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func decodeXA(data []byte) ([]sluice.RowChange, error) {
	var ch xaChunk
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(&ch); err != nil {
		return nil, fmt.Errorf("decode the held rows: %w", err)
	}
	tables := make([]*sluice.Table, len(ch.Tables))
	for i := range ch.Tables {
		tables[i] = &ch.Tables[i]
	}
	out := make([]sluice.RowChange, len(ch.Changes))
	for i, c := range ch.Changes {
		if c.Table < 0 || c.Table >= len(tables) {
			return nil, fmt.Errorf("decode the held rows: table %d of %d", c.Table, len(tables))
		}
		out[i] = sluice.RowChange{Kind: c.Kind, Table: tables[c.Table], Before: c.Before, After: c.After}
	}
	return out, nil
}

// xaComplete applies (XA COMMIT) or discards (XA ROLLBACK) a held
// transaction, and moves the checkpoint past the completion group, in one
// target transaction.
func (a *Applier) xaComplete(ctx context.Context, it sluice.StreamItem) error {
	if err := a.ensureXA(ctx); err != nil {
		return err
	}
	a.mu.Lock()
	a.lastSeq++
	seq := a.lastSeq
	a.mu.Unlock()
	c := a.serial
	bw := batchWriter{a: a, conn: c, src: &txn{gtid: it.GTID, ts: it.Timestamp, end: it.End}}
	var resolved []*sluice.Table
	defer func() {
		// Decoded tables are new pointers each time: keep none of them
		// in the resolve cache.
		for _, t := range resolved {
			a.tables.Delete(t)
		}
	}()
	fail := func(err error) error {
		bw.rollback()
		return err
	}
	if _, err := c.ExecContext(ctx, "START TRANSACTION"); err != nil {
		return fmt.Errorf("complete XA transaction %s: %w", it.XID, err)
	}
	rows, chunks := 0, 0
	if it.Kind == sluice.ItemXACommit {
		for ; ; chunks++ {
			var data []byte
			err := c.QueryRowContext(ctx, "SELECT data FROM "+a.xaTable()+" WHERE task=? AND xid=? AND chunk=?", a.cfg.Task, it.XID, chunks).Scan(&data)
			if errors.Is(err, sql.ErrNoRows) {
				break
			}
			if err != nil {
				return fail(fmt.Errorf("read held XA transaction %s: %w", it.XID, err))
			}
			changes, err := decodeXA(data)
			if err != nil {
				return fail(err)
			}
			for i := range changes {
				ch := &changes[i]
				info, err := a.resolve(ctx, ch.Table)
				if err != nil {
					return fail(err)
				}
				if i == 0 || ch.Table != changes[i-1].Table {
					resolved = append(resolved, ch.Table)
				}
				if err := bw.change(ctx, ch, info); err != nil {
					return fail(xaApplyError(it, err))
				}
			}
			rows += len(changes)
		}
		if chunks == 0 {
			bw.rollback()
			return &sluice.Error{Op: "apply XA COMMIT " + it.XID + " (GTID " + it.GTID + ") at " + it.End.String(),
				Err: fmt.Errorf("%w: it was prepared on the source before the task's start position, so its rows are neither in the full copy nor in the stream sluice read",
					ErrXANotHeld),
				Hint: "copy the tables it changed again (for a full copy: run it again while XA RECOVER on the source shows no prepared transaction); if it changed no replicated table, run sluice skip for GTID " + it.GTID}
		}
	}
	bw.sep()
	bw.buf = append(bw.buf, "DELETE FROM "...)
	bw.buf = append(bw.buf, a.xaTable()...)
	bw.buf = append(bw.buf, " WHERE task="...)
	bw.buf = sqlgen.AppendQuoted(bw.buf, a.cfg.Task)
	bw.buf = append(bw.buf, " AND xid="...)
	bw.buf = sqlgen.AppendQuoted(bw.buf, it.XID)
	bw.sep()
	bw.buf = a.appendCheckpoint(bw.buf, serialWorker, a.baseSeq+seq, it.End, appendRanges(nil, it.End, a.inherited))
	bw.buf = append(bw.buf, ";COMMIT"...)
	if err := bw.exec(ctx); err != nil {
		return fail(xaApplyError(it, err))
	}
	a.addMissing(bw.missing)
	a.committed(seq, nil, it.End, 1, rows, it.Timestamp)
	a.markPersisted(seq)
	return nil
}

func xaApplyError(it sluice.StreamItem, err error) error {
	if errors.Is(err, ErrMissingRow) || errors.Is(err, ErrTargetWarning) || errors.Is(err, ErrTargetRowDiffers) {
		return err
	}
	var se *sluice.Error
	if errors.As(err, &se) {
		return err
	}
	return fmt.Errorf("apply XA COMMIT %s (GTID %s, up to %s): %w", it.XID, it.GTID, it.End, err)
}

// rollbackGroup ends a source group that ended in ROLLBACK (ItemRollback).
// A replica runs its rows and rolls them back: the rows of transactional
// tables vanish and those of non-transactional tables stay, as they stay
// on the source. The same holds here, by the target's engines. A large
// transaction already streamed is rolled back on the target, which does
// the same by itself.
func (s *scheduler) rollbackGroup(ctx context.Context, it sluice.StreamItem) error {
	a := s.a
	t := s.cur
	s.cur = nil
	if t == nil {
		return nil
	}
	t.end = it.End
	if s.big != nil {
		b := s.big
		s.big = nil
		b.bw.rollback()
		// Its place in the commit order passes without a commit; the
		// next checkpoint written covers it.
		a.committed(b.seq, nil, it.End, 1, 0, it.Timestamp)
		return nil
	}
	if before(t.end, a.startPos) || s.committedBefore(t.end) {
		return nil
	}
	kept := t.changes[:0]
	engines := map[sluice.TableRef]bool{}
	for _, c := range t.changes {
		nt, ok := engines[c.Table.Ref]
		if !ok {
			var err error
			if nt, err = a.targetNonTransactional(ctx, c.Table.Ref); err != nil {
				return fmt.Errorf("a rolled-back transaction: %w", err)
			}
			engines[c.Table.Ref] = nt
		}
		if nt {
			kept = append(kept, c)
		}
	}
	// Added even when empty, as a transaction whose rows were all
	// filtered out is: the applied position and the checkpoint move past it.
	t.changes, t.bytes = kept, 0
	for i := range kept {
		t.bytes += changeBytes(&kept[i])
	}
	return s.add(ctx, t)
}
