package load

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/chunk"
	"github.com/sluice-db/sluice/internal/dumpfmt"
	"github.com/sluice-db/sluice/schema"
)

// A chunk is loaded with its checkpoint row in one target transaction, so
// the rows and the "done" mark commit together. Into a non-transactional
// target table (Aria, MyISAM, MEMORY, ...) the rows are written as each
// statement runs and are not rolled back: a kill -9, a failed statement or
// a chunk that is retried leaves rows that no committed checkpoint accounts
// for. So a chunk of such a table is made idempotent: its key range on the
// target is emptied before it is loaded, in Prepare for every chunk not
// done (a restart after a crash at any point) and again before each
// attempt (a retry). A table without a usable key is one chunk whose range
// is the whole table. Rows of chunks marked done are never touched, and a
// chunk's mark commits only after all its rows are in: after any crash
// point, the rows of the done chunks are exactly what they were loaded as,
// and the rest is emptied and loaded again.
//
// The engine that matters is the target's: a source InnoDB table copied
// into an Aria table the user made is handled so, and an Aria source table
// into an InnoDB target needs nothing (the dump reads such a source table
// under a read lock, see dump/nontx.go).

// nonTransactional reports whether target table tgt exists with an engine
// without transactions.
func (l *Loader) nonTransactional(ctx context.Context, tgt sluice.TableRef) (bool, error) {
	nt, err := schema.NonTransactional(ctx, l.db, []sluice.TableRef{tgt})
	return nt[tgt], err
}

// execer is *sql.DB, *sql.Conn or *sql.Tx.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// clearChunk deletes the rows of chunk r from non-transactional target
// table tgt, whose columns and key are src's.
func clearChunk(ctx context.Context, db execer, src *sluice.Table, tgt sluice.TableRef, r chunk.Range) error {
	where, args := r.Where(src)
	if _, err := db.ExecContext(ctx, "DELETE FROM "+tgt.Quoted()+" WHERE "+where, args...); err != nil {
		return fmt.Errorf("load: empty chunk %d of %s before loading it: %w", r.Index, tgt, err)
	}
	return nil
}

// clearPending runs before a non-transactional target table tgt is
// prepared: it deletes the rows of every chunk of plan that is not done,
// which only a killed or failed run of this task can have left. A table
// none of whose chunks is done is emptied only when this task made it or
// found it empty before (claimed): rows in any other table are the user's,
// and prepareTable refuses them.
func (l *Loader) clearPending(ctx context.Context, src *sluice.Table, tgt sluice.TableRef, plan dumpfmt.Plan, started bool) error {
	nontx, err := l.nonTransactional(ctx, tgt)
	if err != nil || !nontx {
		return err
	}
	if !started {
		// Every chunk is to load: the whole table is emptied, whatever
		// its definition now (a DDL since the killed run makes it again).
		claimed, err := l.meta.claimed(ctx, tgt)
		if err != nil || !claimed {
			return err
		}
		if _, err := l.db.ExecContext(ctx, "DELETE FROM "+tgt.Quoted()); err != nil {
			return fmt.Errorf("load: empty %s before loading it: %w", tgt, err)
		}
		return nil
	}
	key := tblKey(tgt)
	for _, r := range plan.Ranges() {
		if l.done[chunkKey{key, r.Index}] {
			continue
		}
		if err := clearChunk(ctx, l.db, src, tgt, r); err != nil {
			return err
		}
	}
	return nil
}

// nontxTarget is what loading a chunk into a non-transactional target
// table needs to empty the chunk's range first.
type nontxTarget struct {
	src    *sluice.Table
	ranges []chunk.Range
}

// clear deletes chunk index's rows from tgt before an attempt to load it:
// an earlier attempt of this run may have left some. Nothing for a
// transactional table (n is nil).
func (n *nontxTarget) clear(ctx context.Context, db execer, tgt sluice.TableRef, index int) error {
	if n == nil {
		return nil
	}
	for _, r := range n.ranges {
		if r.Index == index {
			return clearChunk(ctx, db, n.src, tgt, r)
		}
	}
	return fmt.Errorf("load: chunk %d of %s is not in its plan", index, tgt)
}
