package apply

import (
	"context"
	"fmt"

	"github.com/sluice-db/sluice"
)

// Savepoints (issue 29, N4).
//
// MariaDB writes SAVEPOINT into a transaction's binlog group, and ROLLBACK
// TO SAVEPOINT only when the transaction touched a non-transactional table
// (otherwise it cuts the rolled-back events out of the group). In row
// format the non-transactional table's rows go to the binlog as their own
// group, at once, so the rows between a SAVEPOINT and its ROLLBACK TO in a
// group are all of transactional tables, and the source undid them all.
//
// A transaction held in memory (the usual case) is cut back to the
// savepoint: its rolled-back changes never reach the target, which is what
// a replica's ROLLBACK TO leaves on tables of the source's engines. A
// transaction streamed to the target (larger than LargeTxnBytes) has sent
// its rows already: the target runs SAVEPOINT and ROLLBACK TO in its open
// transaction, as a replica does.

// savepointAt is a live savepoint of a held transaction: its name and the
// transaction's size when it was set.
type savepointAt struct {
	name         string
	changes, siz int
}

func (s *scheduler) savepoint(ctx context.Context, it sluice.StreamItem) error {
	t := s.cur
	if t == nil {
		return nil // the stream started inside a transaction applied already
	}
	sp := it.Savepoint
	if s.big != nil {
		return s.big.statement(ctx, sp)
	}
	find := func() (int, error) {
		for i := len(t.savepoints) - 1; i >= 0; i-- {
			if t.savepoints[i].name == sp.Name {
				return i, nil
			}
		}
		return -1, &sluice.Error{Op: "apply transaction " + it.GTID,
			Err:  fmt.Errorf("%w: %s names no savepoint of the transaction", sluice.ErrUnsupportedEvent, sp.SQL()),
			Hint: "the source's binlog holds a savepoint statement without its SAVEPOINT; apply the transaction by hand and run sluice skip --config TASK --gtid " + it.GTID}
	}
	switch sp.Op {
	case sluice.SavepointSet:
		// A name set again moves the savepoint (the server drops the old).
		if i, err := find(); err == nil {
			t.savepoints = append(t.savepoints[:i], t.savepoints[i+1:]...)
		}
		t.savepoints = append(t.savepoints, savepointAt{name: sp.Name, changes: len(t.changes), siz: t.bytes})
	case sluice.SavepointRollback:
		// (A whole-transaction ROLLBACK is an ItemRollback, xa.go.)
		i, err := find()
		if err != nil {
			return err
		}
		at := t.savepoints[i]
		t.savepoints = t.savepoints[:i+1] // later savepoints go, this one stays
		clear(t.changes[at.changes:])     // let the rolled-back rows be collected
		t.changes, t.bytes = t.changes[:at.changes], at.siz
	case sluice.SavepointRelease:
		i, err := find()
		if err != nil {
			return err
		}
		t.savepoints = t.savepoints[:i]
	}
	return nil
}

// statement runs a savepoint statement in the streamed transaction, in
// order with its rows.
func (b *bigTxn) statement(ctx context.Context, sp sluice.Savepoint) error {
	if err := b.endRun(ctx); err != nil {
		b.bw.rollback()
		return fmt.Errorf("apply large transaction: %w", err)
	}
	b.bw.sep()
	b.bw.buf = append(b.bw.buf, sp.SQL()...)
	if err := b.bw.flushIfFull(ctx); err != nil {
		b.bw.rollback()
		return fmt.Errorf("apply large transaction: %w", err)
	}
	return nil
}

// replay sends the rows a transaction held before it began to stream,
// with the SAVEPOINT statements still live among them, so that a later
// ROLLBACK TO finds its savepoint on the target.
func (b *bigTxn) replay(ctx context.Context, held []sluice.RowChange, sps []savepointAt) error {
	from := 0
	for _, sp := range sps {
		if err := b.rows(ctx, held[from:sp.changes]); err != nil {
			return err
		}
		from = sp.changes
		if err := b.statement(ctx, sluice.Savepoint{Op: sluice.SavepointSet, Name: sp.name}); err != nil {
			return err
		}
	}
	return b.rows(ctx, held[from:])
}
