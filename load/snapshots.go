package load

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/snapfilter"
)

// CopySnapshots returns, for replication, every chunk that the full copy of
// task loaded into the target and the snapshot position it was read at. It
// returns nil when the task made no full copy on this target, and an error
// when the copy is unfinished: replicating onto a partial copy would apply
// changes to rows that are still to be copied.
func CopySnapshots(ctx context.Context, db *sql.DB, metaSchema, task string) ([]snapfilter.Table, error) {
	m := meta{db: db, schema: metaSchema, task: task}
	var posText []byte
	var finished sql.NullString
	err := db.QueryRowContext(ctx, "SELECT position, finished FROM "+m.table("load_task")+" WHERE task = ?", task).Scan(&posText, &finished)
	var me *mysql.MySQLError
	if errors.Is(err, sql.ErrNoRows) || errors.As(err, &me) && (me.Number == 1146 || me.Number == 1049) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !finished.Valid {
		return nil, &sluice.Error{Op: "replicate " + task,
			Err:  fmt.Errorf("%w: the full copy of this task on the target is unfinished", sluice.ErrConfig),
			Hint: "finish it first: sluice migrate --config TASK --mode all copies the rest and then replicates"}
	}
	var first sluice.Position
	if err := json.Unmarshal(posText, &first); err != nil {
		return nil, fmt.Errorf("load_task position of %s: %w", task, err)
	}
	plans, err := m.plans(ctx)
	if err != nil {
		return nil, err
	}
	created := map[string]sluice.Position{}
	prow, err := db.QueryContext(ctx, "SELECT tbl, snapshot FROM "+m.table("load_plan")+" WHERE task = ?", task)
	if err != nil {
		return nil, err
	}
	for prow.Next() {
		var tbl string
		var s sql.NullString
		if err := prow.Scan(&tbl, &s); err != nil {
			prow.Close()
			return nil, err
		}
		p, err := snapshotOr(s, first)
		if err != nil {
			prow.Close()
			return nil, fmt.Errorf("snapshot of the plan of %s: %w", tbl, err)
		}
		created[tbl] = p
	}
	prow.Close()
	if err := prow.Err(); err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, "SELECT tbl, chunk, snapshot FROM "+m.table("load_checkpoint")+" WHERE task = ?", task)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	snaps := map[chunkKey]sluice.Position{}
	for rows.Next() {
		var k chunkKey
		var s sql.NullString
		if err := rows.Scan(&k.tbl, &k.index, &s); err != nil {
			return nil, err
		}
		p, err := snapshotOr(s, first)
		if err != nil {
			return nil, fmt.Errorf("snapshot of %s chunk %d: %w", k.tbl, k.index, err)
		}
		snaps[k] = p
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]snapfilter.Table, 0, len(plans))
	for tbl, plan := range plans {
		t := snapfilter.Table{Name: tbl, Created: created[tbl]}
		for _, c := range plan {
			p, ok := snaps[chunkKey{tbl, c.Index}]
			if !ok {
				// A table the copy planned but a later run no longer
				// found on the source (dropped meanwhile) has no chunks.
				continue
			}
			t.Chunks = append(t.Chunks, snapfilter.Chunk{Index: c.Index, Lo: c.Lo, Hi: c.Hi, Pos: p})
		}
		if len(t.Chunks) > 0 && len(t.Chunks) != len(plan) {
			return nil, &sluice.Error{Op: "replicate " + task,
				Err:  fmt.Errorf("%w: %d of the %d chunks of %s are copied", sluice.ErrConfig, len(t.Chunks), len(plan), tbl),
				Hint: "finish the copy with sluice migrate --config TASK --mode all"}
		}
		out = append(out, t)
	}
	return out, nil
}

// snapshotOr decodes a stored snapshot position; rows written before
// positions were stored per chunk and plan (NULL) have the task's first.
func snapshotOr(s sql.NullString, first sluice.Position) (sluice.Position, error) {
	if !s.Valid || s.String == "" {
		return first, nil
	}
	var p sluice.Position
	err := json.Unmarshal([]byte(s.String), &p)
	return p, err
}
