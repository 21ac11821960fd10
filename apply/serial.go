package apply

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/sqlgen"
)

// bigTxn streams one source transaction that is too large to hold: every
// earlier transaction is committed first, then its rows go to the target
// as they arrive, in one target transaction on the serial connection, and
// the commit carries the checkpoint like any other.
type bigTxn struct {
	a        *Applier
	bw       batchWriter
	seq      uint64
	rowsSeen int
	// run gathers consecutive changes into one statement (bigbatch.go).
	run runBatch
	// For non-transactional tables (nontxreplay.go): the transaction's
	// GTID, whether its mark was committed, and whether a mark named it.
	gtid              string
	marked, replaying bool
}

func (s *scheduler) startBig(ctx context.Context) error {
	if err := s.flush(ctx); err != nil {
		return err
	}
	a := s.a
	a.mu.Lock()
	a.lastSeq++
	seq := a.lastSeq
	a.mu.Unlock()
	s.big = &bigTxn{a: a, seq: seq, bw: batchWriter{a: a, conn: a.serial}, gtid: s.cur.gtid, replaying: a.bigReplay(s.cur.gtid)}
	s.big.bw.start()
	s.big.bw.src = s.cur // its end is set when its Commit item arrives
	held := s.cur.changes
	s.cur.changes = nil // from here on rows are not held
	return s.big.replay(ctx, held, s.cur.savepoints)
}

func (b *bigTxn) rows(ctx context.Context, changes []sluice.RowChange) error {
	for i := range changes {
		c := &changes[i]
		info, err := b.a.resolve(ctx, c.Table)
		if err != nil {
			b.bw.rollback()
			return err
		}
		if info.nontx && b.gtid != "" {
			if err = b.endRun(ctx); err == nil {
				err = b.bigNontx(ctx, c, info)
			}
		} else {
			err = b.bigChange(ctx, c, info)
		}
		if err != nil {
			b.bw.rollback()
			var ns nontxStop
			if errors.As(err, &ns) {
				return ns.e
			}
			if errors.Is(err, ErrMissingRow) || errors.Is(err, ErrTargetWarning) || errors.Is(err, ErrTargetRowDiffers) {
				return err
			}
			return fmt.Errorf("apply large transaction: %w", err)
		}
	}
	b.rowsSeen += len(changes)
	return nil
}

func (b *bigTxn) commit(ctx context.Context, end sluice.Position) error {
	a := b.a
	if err := b.endRun(ctx); err != nil {
		b.bw.rollback()
		return b.commitErr(err, end)
	}
	b.bw.fkFor(false)
	b.bw.sep()
	if b.replaying {
		b.bw.buf = a.appendClearNontx(b.bw.buf)
		b.bw.buf = append(b.bw.buf, ';')
	}
	b.bw.buf = a.appendCheckpoint(b.bw.buf, serialWorker, a.baseSeq+b.seq, end, appendRanges(nil, end, a.inherited))
	b.bw.buf = append(b.bw.buf, ";COMMIT"...)
	if err := b.bw.exec(ctx); err != nil {
		b.bw.rollback()
		return b.commitErr(err, end)
	}
	a.addMissing(b.bw.missing) // before the commit is published, as in worker.apply
	a.committed(b.seq, nil, end, 1, b.rowsSeen, 0)
	a.markPersisted(b.seq)
	if b.replaying {
		a.nontxReplayed(b.bw.src) // its end was set as its Commit arrived
	}
	return nil
}

func (b *bigTxn) commitErr(err error, end sluice.Position) error {
	if errors.Is(err, ErrMissingRow) || errors.Is(err, ErrTargetWarning) || errors.Is(err, ErrTargetRowDiffers) {
		return err
	}
	return fmt.Errorf("commit large transaction (up to %s): %w", end, err)
}

// afterDDLHook and afterDDLItemHook, when set by a test, run between a
// DDL and its checkpoint.
var (
	afterDDLHook     func() error
	afterDDLItemHook func(end sluice.Position)
)

// alreadyDone are the errors a DDL statement gives when it ran before a
// crash that came before its checkpoint.
var alreadyDone = map[uint16]bool{1007: true, 1008: true, 1050: true, 1051: true, 1054: true, 1060: true, 1061: true, 1068: true, 1091: true, 1146: true, 1826: true}

// applyDDL runs a DDL item after every earlier transaction has committed.
// DDL cannot share a transaction with the checkpoint: the checkpoint row
// marks each statement pending before it runs, with what a restart needs
// to tell whether it ran (ddlrun.go).
func (a *Applier) applyDDL(ctx context.Context, it sluice.StreamItem) error {
	a.mu.Lock()
	a.lastSeq++
	seq := a.lastSeq
	applied := a.stats.Applied
	a.mu.Unlock()
	if len(it.DDL) > 0 {
		if it.Schema != "" {
			// Unqualified names inside the statement resolve in the
			// statement's own schema; it may not exist yet.
			if _, err := a.serial.ExecContext(ctx, "USE "+sluice.QuoteIdent(it.Schema)); err != nil && !isMySQLErr(err, 1049) {
				return fmt.Errorf("apply DDL: %w", err)
			}
		}
		// Each statement runs in the source session's sql_mode, character
		// sets and time zone, at the source statement's time, as on a
		// replica (ddlSessionSQL): an ALTER that fills a TIMESTAMP column
		// from the clock stores the source's values (difftest seed 2111).
		if err := a.runDDL(ctx, it, seq, applied); err != nil {
			return err
		}
		if afterDDLHook != nil {
			if err := afterDDLHook(); err != nil {
				return err
			}
		}
		if afterDDLItemHook != nil {
			afterDDLItemHook(it.End)
		}
	}
	b := append([]byte(nil), "START TRANSACTION;"...)
	b = a.appendCheckpoint(b, serialWorker, a.baseSeq+seq, it.End, appendRanges(nil, it.End, a.inherited))
	if it.SchemaState != nil {
		b = append(b, ";REPLACE INTO "...)
		b = append(b, sluice.QuoteIdent(a.cfg.MetaSchema)...)
		b = append(b, ".apply_schema (task, seq, state) VALUES ("...)
		b = sqlgen.AppendQuoted(b, a.cfg.Task)
		b = append(b, ',')
		b = sqlgen.AppendValue(b, a.baseSeq+seq)
		b = append(b, ',')
		b = sqlgen.AppendValue(b, it.SchemaState)
		b = append(b, ')')
	}
	b = append(b, ";COMMIT"...)
	if _, err := a.serial.ExecContext(ctx, string(b)); err != nil {
		return fmt.Errorf("checkpoint DDL at %s: %w", it.End, err)
	}
	a.pending = ""
	a.dropRenameMarkers(ctx, it)
	// Table shapes changed: resolve every table again.
	a.tables.Range(func(k, _ any) bool { a.tables.Delete(k); return true })
	a.mu.Lock()
	a.stats.DDL++
	a.mu.Unlock()
	a.committed(seq, nil, it.End, 1, 0, it.Timestamp)
	a.markPersisted(seq)
	return nil
}

func isMySQLErr(err error, n uint16) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == n
}

func shortSQL(q string) string {
	if len(q) > 200 {
		return q[:200] + "..."
	}
	return q
}

// ddlTimestamp is the value of the session's timestamp for DDL item it:
// the source statement's start, seconds and microseconds.
func ddlTimestamp(it sluice.StreamItem) string {
	if it.Timestamp == 0 {
		return "DEFAULT"
	}
	return fmt.Sprintf("%d.%06d", it.Timestamp, it.Micros)
}
