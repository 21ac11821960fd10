package replicate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/apply"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/schema"
)

// seedSchema returns the schema tracker state a new task starts with: every
// replicated source table, with the definition its target table has. At the
// start of replication the target is the source as of the start position
// (the full copy made it so, or the user did for --mode incremental), which
// is the schema the tracker must follow DDL from; the source's current
// schema may already be later. Without it an ALTER TABLE of a copied table
// would stop replication as "not tracked", and writesets would miss the
// secondary unique keys, which only the tracker knows.
//
// Which source tables existed at the start position cannot be read from
// the source: a table renamed or dropped there since (while the full copy
// ran, or before an incremental task was started) is gone from its list,
// and a table of the same name may have taken its place. So the names
// come from three places, each checked against the target: the source's
// tables now, the source tables the full copy loaded (load_plan), and the
// target's own tables that routing leaves unchanged. The definition is
// always the target's.
func seedSchema(ctx context.Context, cfg Config, target *sql.DB) ([]byte, error) {
	src, err := dbconn.Open(ctx, "source", cfg.Source, dbconn.Options{MaxOpen: 1})
	if err != nil {
		return nil, err
	}
	defer src.Close()
	refs, err := schema.ListTables(ctx, src, cfg.Decode.Selected)
	if err != nil {
		return nil, dbconn.Classify(err, "source", cfg.Source)
	}
	more, err := targetCandidates(ctx, cfg, target)
	if err != nil {
		return nil, fmt.Errorf("seed the schema tracker: %w", dbconn.Classify(err, "target", cfg.Target))
	}
	tracker := schema.NewTracker()
	seen := map[sluice.TableRef]bool{}
	for _, ref := range append(refs, more...) {
		if seen[ref] || cfg.Decode.Selected != nil && !cfg.Decode.Selected(ref) {
			continue
		}
		seen[ref] = true
		to := ref
		if cfg.Decode.Route != nil {
			to = cfg.Decode.Route(ref)
		}
		tb, err := schema.Inspect(ctx, target, to)
		if errors.Is(err, sluice.ErrUnknownTable) {
			continue // created later in the stream, or not copied
		}
		if err != nil {
			return nil, fmt.Errorf("seed the schema tracker from %s: %w", to, dbconn.Classify(err, "target", cfg.Target))
		}
		tb.Ref = ref
		tracker.Put(tb)
	}
	return tracker.Snapshot()
}

// targetCandidates lists the source names the target's tables may stand
// for: the source tables this task's full copy loaded, and every target
// table outside the meta schema whose name routing maps to itself.
func targetCandidates(ctx context.Context, cfg Config, target *sql.DB) ([]sluice.TableRef, error) {
	meta := cfg.Apply.MetaSchema
	own, err := schema.ListTables(ctx, target, func(r sluice.TableRef) bool {
		if strings.EqualFold(r.Schema, meta) {
			return false
		}
		return cfg.Decode.Route == nil || cfg.Decode.Route(r) == r
	})
	if err != nil {
		return nil, err
	}
	rows, err := target.QueryContext(ctx, "SELECT source_tbl FROM "+sluice.QuoteIdent(meta)+".load_plan WHERE task = ?", cfg.Name)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1146 {
		return own, nil // no full copy ever ran against this target
	}
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var q string
		if err := rows.Scan(&q); err != nil {
			return nil, err
		}
		if ref, ok := parseQuoted(q); ok {
			own = append(own, ref)
		}
	}
	return own, rows.Err()
}

// parseQuoted reads a name written by TableRef.Quoted: `schema`.`table`,
// with backquotes inside doubled.
func parseQuoted(q string) (sluice.TableRef, bool) {
	var parts []string
	for len(parts) < 2 {
		if len(q) == 0 || q[0] != '`' {
			return sluice.TableRef{}, false
		}
		var b strings.Builder
		i := 1
		for ; i < len(q); i++ {
			if q[i] != '`' {
				b.WriteByte(q[i])
				continue
			}
			if i+1 < len(q) && q[i+1] == '`' {
				b.WriteByte('`')
				i++
				continue
			}
			break
		}
		if i >= len(q) {
			return sluice.TableRef{}, false
		}
		parts = append(parts, b.String())
		q = q[i+1:]
		if len(parts) == 1 {
			if len(q) == 0 || q[0] != '.' {
				return sluice.TableRef{}, false
			}
			q = q[1:]
		}
	}
	if q != "" {
		return sluice.TableRef{}, false
	}
	return sluice.TableRef{Schema: parts[0], Name: parts[1]}, true
}

// TrackedTables reports which source tables replication's schema holds at
// the task's checkpoint: the tables that must exist on the target. It
// returns nil when the task has no checkpoint yet. While a DDL is pending
// (it may have run on the target without its checkpoint), the target can
// be in the state before or after it, so no table is vouched for.
func TrackedTables(ctx context.Context, cfg Config) (func(sluice.TableRef) bool, error) {
	db, err := apply.OpenTarget(ctx, cfg.Target, 1)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	a, err := apply.New(cfg.Apply, db)
	if err != nil {
		return nil, err
	}
	if _, ok, err := a.Checkpoint(ctx); err != nil || !ok {
		return nil, err
	}
	pending, err := a.PendingDDL(ctx)
	if err != nil {
		return nil, err
	}
	if pending != "" {
		return func(sluice.TableRef) bool { return false }, nil
	}
	state, err := a.SchemaState(ctx)
	if err != nil {
		return nil, err
	}
	tracker := schema.NewTracker()
	if state != nil {
		if err := tracker.Restore(state); err != nil {
			return nil, fmt.Errorf("read replication's schema state: %w", err)
		}
	}
	return func(r sluice.TableRef) bool { return tracker.Table(r) != nil }, nil
}
