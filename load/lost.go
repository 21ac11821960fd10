package load

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/dbconn"
)

// Complete reports whether this task's full copy on the target is complete:
// it has run, finished, and every chunk of every stored plan is done. A
// rerun of --mode all then has nothing to copy and resumes replication.
func (l *Loader) Complete(ctx context.Context) (bool, error) {
	if l.pos == nil {
		return false, nil
	}
	finished, err := l.meta.finished(ctx)
	if err != nil || !finished {
		return false, err
	}
	for key, plan := range l.plans {
		for _, c := range plan {
			if !l.done[chunkKey{key, c.Index}] {
				return false, nil
			}
		}
	}
	return true, nil
}

// Pending reports whether source table src has a stored plan with chunks
// not yet done.
func (l *Loader) Pending(src sluice.TableRef) bool {
	key := tblKey(l.cfg.Route(src))
	plan, ok := l.plans[key]
	if !ok {
		return false
	}
	for _, c := range plan {
		if !l.done[chunkKey{key, c.Index}] {
			return true
		}
	}
	return false
}

// SourceProbe says whether a source table exists and whether it holds rows.
type SourceProbe func(ctx context.Context, src sluice.TableRef) (exists, hasRows bool, err error)

// Lost is a copied table that the target no longer holds as copied.
type Lost struct {
	Target, Source sluice.TableRef
	Why            string
}

// ReloadLost finds tables whose chunks this task's checkpoints say are
// loaded but which the target lacks (dropped by hand, for example following
// a hint to drop a table), or, before replication has started, holds empty
// although the chunks had rows and the source table has rows. It forgets their chunks so that this run loads
// them whole again from its own snapshot; an empty one is dropped first so
// that it is made again from the source's current definition. Without this
// a dropped table would be re-created empty under checkpoints that say
// done, and replication would run on with its rows lost.
//
// A table that the source no longer has is left alone: replication dropped
// or renamed it, or will. Once replication has run, so is a table that
// replication's own schema at its checkpoint does not hold (tracked is nil
// or false for it): a replicated DROP TABLE, or a RENAME swap half applied
// before a crash, also leaves a copied name missing, and reloading it from
// a new snapshot would mix snapshots under replication (difftest seed 628)
// or bring back a table the source dropped.
func (l *Loader) ReloadLost(ctx context.Context, probe SourceProbe, tracked func(src sluice.TableRef) bool) ([]Lost, error) {
	copied, err := l.meta.copied(ctx)
	if err != nil {
		return nil, fmt.Errorf("load: read checkpoints: %w", l.classify(err))
	}
	// Once replication has applied anything for this task, an empty table
	// is not evidence of a loss: a replicated TRUNCATE or DELETE empties it
	// too, and reloading it from a new snapshot would bring back rows the
	// source deleted, or load rows twice (the difftest's bug N). Only a
	// missing table is then reloaded.
	replicating, err := l.meta.replicating(ctx)
	if err != nil {
		return nil, fmt.Errorf("load: read the replication checkpoint: %w", l.classify(err))
	}
	var out []Lost
	for _, c := range copied {
		tgt, err1 := parseKey(c.key)
		src, err2 := parseKey(c.source)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("load: checkpoint of %s: %w", c.key, err)
		}
		why := ""
		var one int
		err = l.db.QueryRowContext(ctx, "SELECT 1 FROM "+c.key+" LIMIT 1").Scan(&one)
		var me *mysql.MySQLError
		switch {
		case errors.As(err, &me) && me.Number == 1146:
			why = "missing on the target"
		case errors.Is(err, sql.ErrNoRows) && c.rows > 0 && !replicating:
			why = "empty on the target"
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return nil, fmt.Errorf("load: check %s: %w", tgt, dbconn.Classify(err, "target", l.cfg.Target))
		default:
			continue
		}
		if replicating && (tracked == nil || !tracked(src)) {
			continue
		}
		exists, hasRows, err := probe(ctx, src)
		if err != nil {
			return nil, err
		}
		if !exists || why == "empty on the target" && !hasRows {
			continue
		}
		if err := l.resetTable(ctx, c.key); err != nil {
			return nil, fmt.Errorf("load: reload %s: %w", tgt, l.classify(err))
		}
		if why == "empty on the target" {
			if _, err := l.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+c.key); err != nil {
				return nil, fmt.Errorf("load: drop the empty %s to make it again: %w", tgt, l.classify(err))
			}
		}
		out = append(out, Lost{Target: tgt, Source: src, Why: why})
	}
	return out, nil
}

// replicating reports whether replication has written a checkpoint for
// this task on the target.
func (m meta) replicating(ctx context.Context) (bool, error) {
	var one int
	err := m.db.QueryRowContext(ctx, "SELECT 1 FROM "+m.table("apply_checkpoint")+" WHERE task = ? LIMIT 1", m.task).Scan(&one)
	var me *mysql.MySQLError
	switch {
	case errors.Is(err, sql.ErrNoRows), errors.As(err, &me) && me.Number == 1146:
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

type copiedTable struct {
	key, source string
	rows        int64
}

// copied lists the target tables with loaded chunks and their row counts.
func (m meta) copied(ctx context.Context) ([]copiedTable, error) {
	rows, err := m.db.QueryContext(ctx, "SELECT c.tbl, p.source_tbl, SUM(c.`rows`) FROM "+m.table("load_checkpoint")+" c JOIN "+
		m.table("load_plan")+" p ON p.task = c.task AND p.tbl = c.tbl WHERE c.task = ? GROUP BY c.tbl, p.source_tbl ORDER BY c.tbl", m.task)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []copiedTable
	for rows.Next() {
		var c copiedTable
		if err := rows.Scan(&c.key, &c.source, &c.rows); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// finished reports whether a run of the task loaded every chunk it planned.
func (m meta) finished(ctx context.Context) (bool, error) {
	var f sql.NullString
	err := m.db.QueryRowContext(ctx, "SELECT finished FROM "+m.table("load_task")+" WHERE task = ?", m.task).Scan(&f)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return f.Valid, err
}

// parseKey reverses tblKey: "`s`.`t`" (backticks doubled inside) to a ref.
func parseKey(k string) (sluice.TableRef, error) {
	var parts []string
	for len(k) > 0 {
		if k[0] != '`' {
			return sluice.TableRef{}, fmt.Errorf("bad table key %q", k)
		}
		var b strings.Builder
		i := 1
		for ; i < len(k); i++ {
			if k[i] == '`' {
				if i+1 < len(k) && k[i+1] == '`' {
					b.WriteByte('`')
					i++
					continue
				}
				break
			}
			b.WriteByte(k[i])
		}
		if i >= len(k) {
			return sluice.TableRef{}, fmt.Errorf("bad table key %q", k)
		}
		parts = append(parts, b.String())
		k = strings.TrimPrefix(k[i+1:], ".")
	}
	if len(parts) != 2 {
		return sluice.TableRef{}, fmt.Errorf("bad table key %q", k)
	}
	return sluice.TableRef{Schema: parts[0], Name: parts[1]}, nil
}

// CopiedBefore reports whether an earlier run finished the copy (every
// chunk it planned was loaded), whatever ReloadLost has reset since.
func (l *Loader) CopiedBefore(ctx context.Context) (bool, error) {
	return l.meta.finished(ctx)
}
