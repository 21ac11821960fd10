package apply

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"

	"github.com/sluice-db/sluice"
)

// maxInsertStmt bounds one merged multi-row INSERT.
const maxInsertStmt = 1 << 20

// batchWriter turns row changes into SQL text and sends it in
// multi-statement round trips of at most BatchBytes.
type batchWriter struct {
	a    *Applier
	conn *sql.Conn
	buf  []byte
	// ins is the table of the INSERT at the end of buf, which the next
	// insert into the same table extends instead of starting a statement.
	ins      *tableInfo
	insStart int
}

func (b *batchWriter) sep() {
	if len(b.buf) > 0 {
		b.buf = append(b.buf, ';')
	}
}

func (b *batchWriter) change(ctx context.Context, c *sluice.RowChange, info *tableInfo) error {
	switch c.Kind {
	case sluice.Insert:
		if b.ins == info && len(b.buf)-b.insStart < maxInsertStmt {
			b.buf = append(b.buf, ',')
			b.buf = info.spec.AppendInsertRow(b.buf, c.After)
		} else {
			b.sep()
			b.insStart = len(b.buf)
			b.buf = info.spec.AppendInsert(b.buf, c.After)
			b.ins = info
		}
	case sluice.Update:
		b.ins = nil
		n := len(b.buf)
		b.sep()
		var ok bool
		if b.buf, ok = info.spec.AppendUpdate(b.buf, c.Before, c.After); !ok {
			b.buf = b.buf[:n]
		}
	case sluice.Delete:
		b.ins = nil
		b.sep()
		b.buf = info.spec.AppendDelete(b.buf, c.Before)
	}
	if len(b.buf) >= b.a.cfg.BatchBytes {
		return b.exec(ctx)
	}
	return nil
}

// exec sends what is buffered.
func (b *batchWriter) exec(ctx context.Context) error {
	b.ins = nil
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.conn.ExecContext(ctx, string(b.buf))
	if cap(b.buf) > 4*b.a.cfg.BatchBytes {
		b.buf = nil // do not keep a huge buffer after an outsized row
	} else {
		b.buf = b.buf[:0]
	}
	return err
}

func (b *batchWriter) rollback() {
	b.buf = b.buf[:0]
	b.ins = nil
	_, _ = b.conn.ExecContext(context.Background(), "ROLLBACK")
}

// worker applies the units handed to it, one target transaction each, in
// the order received, committing each in its turn.
type worker struct {
	a    *Applier
	id   int
	conn *sql.Conn
	ch   chan *unit
	busy atomic.Int32
	bw   batchWriter
}

func (w *worker) run() {
	w.bw = batchWriter{a: w.a, conn: w.conn}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-w.a.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for u := range w.ch {
		if w.a.Err() != nil {
			continue // drain, so the scheduler never blocks on a dead worker
		}
		w.busy.Store(1)
		if err := w.apply(ctx, u); err != nil {
			w.bw.rollback()
			w.a.fail(err)
		}
		w.busy.Store(0)
	}
}

func (w *worker) apply(ctx context.Context, u *unit) error {
	a, b := w.a, &w.bw
	b.buf = append(b.buf[:0], "START TRANSACTION"...)
	for _, t := range u.txns {
		for i := range t.changes {
			c := &t.changes[i]
			v, ok := a.tables.Load(c.Table)
			if !ok {
				return fmt.Errorf("apply: table %s was not resolved", c.Table.Ref)
			}
			if err := b.change(ctx, c, v.(*tableInfo)); err != nil {
				return w.wrap(u, err)
			}
		}
	}
	last := u.txns[len(u.txns)-1]
	b.sep()
	b.ins = nil
	b.buf = a.appendCheckpoint(b.buf, w.id, a.baseSeq+u.seq, last.end)
	if a.isTurn(u.seq) {
		b.buf = append(b.buf, ";COMMIT"...)
		if err := b.exec(ctx); err != nil {
			return w.wrap(u, err)
		}
	} else {
		if err := b.exec(ctx); err != nil {
			return w.wrap(u, err)
		}
		if err := a.waitTurn(u.seq); err != nil {
			return err
		}
		if _, err := w.conn.ExecContext(ctx, "COMMIT"); err != nil {
			return w.wrap(u, err)
		}
	}
	a.committed(u, last.end, len(u.txns), u.rows, last.ts)
	return nil
}

func (w *worker) wrap(u *unit, err error) error {
	first, last := u.txns[0], u.txns[len(u.txns)-1]
	return fmt.Errorf("apply source transactions %s..%s (up to %s) on worker %d: %w", first.gtid, last.gtid, last.end, w.id, err)
}

func (a *Applier) isTurn(seq uint64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.nextCommit == seq
}
