package apply

import (
	"context"
	"fmt"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/schema"
)

// Non-transactional target tables (Aria, MyISAM, MEMORY, ...).
//
// The rows a target transaction writes to such a table stay when it rolls
// back, and its checkpoint row (InnoDB) does not: a group that ran and is
// then rolled back and run again meets its own rows (a Duplicate entry
// stop). A crash between a group's rows and its commit does the same on a
// native replica too (mysql.gtid_slave_pos cannot cover a MyISAM row), but
// MariaDB's parallel replica never makes it more likely: an event group
// without FL_TRANSACTIONAL starts only after every earlier group committed
// and is not rolled back to be retried. So a source transaction that
// changes a non-transactional target table is a group of its own (never
// batched with others, whose failure would roll it back) and a barrier
// (fkeys.go): it runs after every earlier group committed and before any
// later one runs, so it is next in commit order while it runs, never waits
// for its turn, and the lock monitor never rolls it back.

// targetNonTransactional reports whether target table ref's engine has no
// transactions, by the rule the dump and the load use (schema.NonTransactional).
func (a *Applier) targetNonTransactional(ctx context.Context, ref sluice.TableRef) (bool, error) {
	nt, err := schema.NonTransactional(ctx, a.db, []sluice.TableRef{ref})
	if err != nil {
		return false, fmt.Errorf("read the engine of target table %s: %w", ref, err)
	}
	return nt[ref], nil
}

// alone reports whether transaction t changes a non-transactional target
// table, so that it must be applied as a group of its own, as a barrier.
func (s *scheduler) alone(ctx context.Context, t *txn) (bool, error) {
	for i := range t.changes {
		info, err := s.a.resolve(ctx, t.changes[i].Table)
		if err != nil {
			return false, err
		}
		if info.nontx {
			return true, nil
		}
	}
	return false, nil
}
