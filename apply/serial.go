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
	s.big = &bigTxn{a: a, seq: seq, bw: batchWriter{a: a, conn: a.serial}}
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
		if err := b.bw.change(ctx, c, info); err != nil {
			b.bw.rollback()
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
	b.bw.sep()
	b.bw.buf = a.appendCheckpoint(b.bw.buf, serialWorker, a.baseSeq+b.seq, end, appendRanges(nil, end, a.inherited))
	b.bw.buf = append(b.bw.buf, ";COMMIT"...)
	if err := b.bw.exec(ctx); err != nil {
		b.bw.rollback()
		if errors.Is(err, ErrMissingRow) || errors.Is(err, ErrTargetWarning) || errors.Is(err, ErrTargetRowDiffers) {
			return err
		}
		return fmt.Errorf("commit large transaction (up to %s): %w", end, err)
	}
	a.addMissing(b.bw.missing) // before the commit is published, as in worker.apply
	a.committed(b.seq, nil, end, 1, b.rowsSeen, 0)
	a.markPersisted(b.seq)
	return nil
}

// afterDDLHook, when set by a test, runs between a DDL and its checkpoint.
var afterDDLHook func() error

// alreadyDone are the errors a DDL statement gives when it ran before a
// crash that came before its checkpoint.
var alreadyDone = map[uint16]bool{1007: true, 1008: true, 1050: true, 1051: true, 1054: true, 1060: true, 1061: true, 1068: true, 1091: true, 1146: true, 1826: true}

// applyDDL runs a DDL item after every earlier transaction has committed.
// DDL cannot share a transaction with the checkpoint, so it is made
// idempotent instead: the decoder rewrites it with IF [NOT] EXISTS, and the
// checkpoint row records the DDL as pending before it runs; if sluice dies
// before the checkpoint moves past it, the restart runs it again and
// accepts "already exists / does not exist" errors for that one statement.
func (a *Applier) applyDDL(ctx context.Context, it sluice.StreamItem) error {
	a.mu.Lock()
	a.lastSeq++
	seq := a.lastSeq
	applied := a.stats.Applied
	a.mu.Unlock()
	tolerant := a.pending != "" && a.pending == it.End.String()
	if len(it.DDL) > 0 {
		mark := a.appendCheckpointPending(nil, serialWorker, a.baseSeq+seq-1, applied, appendRanges(nil, applied, a.inherited), it.End.String())
		if _, err := a.serial.ExecContext(ctx, string(mark)); err != nil {
			return fmt.Errorf("mark DDL pending: %w", err)
		}
		if it.Schema != "" {
			// Unqualified names inside the statement (foreign key parents)
			// resolve in the statement's own schema; it may not exist yet.
			if _, err := a.serial.ExecContext(ctx, "USE "+sluice.QuoteIdent(it.Schema)); err != nil && !isMySQLErr(err, 1049) {
				return fmt.Errorf("apply DDL: %w", err)
			}
		}
		// DDL runs without strict mode, as the source most likely ran it
		// (a replica runs it in the source's mode): a MODIFY COLUMN that
		// converted values there converts them here the same way instead
		// of stopping the task. Row changes stay strict.
		// It runs at the source statement's time, as on a replica: an ALTER
		// that fills a TIMESTAMP column or a DEFAULT CURRENT_TIMESTAMP
		// column from the clock stores the source's values (difftest seed
		// 2111: an ADD PRIMARY KEY over a NULL TIMESTAMP column stored the
		// apply time, and the next UPDATE of those rows found none).
		if _, err := a.serial.ExecContext(ctx, "SET SESSION sql_mode='"+ddlSQLMode+"', timestamp="+ddlTimestamp(it)); err != nil {
			return fmt.Errorf("apply DDL: %w", err)
		}
		err := a.runDDL(ctx, it, tolerant)
		// A session left lenient must not apply rows: restoring the mode
		// fails only with the connection, and then nothing more runs on it.
		if _, rerr := a.serial.ExecContext(context.Background(), "SET SESSION sql_mode='"+rowSQLMode+"', timestamp=DEFAULT"); rerr != nil && err == nil {
			err = fmt.Errorf("restore the strict sql_mode after DDL: %w", rerr)
		}
		if err != nil {
			return err
		}
		if afterDDLHook != nil {
			if err := afterDDLHook(); err != nil {
				return err
			}
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

func (a *Applier) runDDL(ctx context.Context, it sluice.StreamItem, tolerant bool) error {
	for i, q := range it.DDL {
		var err error
		if isRenameTable(q) {
			err = a.runRename(ctx, a.serial, q, it.End, i)
		} else {
			_, err = a.serial.ExecContext(ctx, q)
		}
		if err != nil {
			var me *mysql.MySQLError
			if tolerant && errors.As(err, &me) && alreadyDone[me.Number] {
				continue
			}
			return &sluice.Error{Op: "apply DDL at " + it.End.String() + " to the target", Err: fmt.Errorf("%w: %s: %v", sluice.ErrUnsupportedDDL, fullSQL(q), err),
				Hint: ddlFailedHint(it)}
		}
	}
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
