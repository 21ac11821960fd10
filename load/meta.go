package load

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/dumpfmt"
	"github.com/sluice-db/sluice/sqlgen"
)

// meta is the load state kept in the target (see sqlgen.CheckpointDDL).
type meta struct {
	db     *sql.DB
	schema string
	task   string
}

func (m meta) table(name string) string { return sluice.QuoteIdent(m.schema) + "." + name }

func (m meta) ensure(ctx context.Context) error {
	for _, q := range sqlgen.CheckpointDDL(m.schema) {
		if _, err := m.db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	// Checkpoint tables made by a sluice older than per-chunk snapshots
	// lack these columns; their chunks and plans count as read at the
	// task's first snapshot, which is what that sluice did.
	for _, c := range [][2]string{{"load_checkpoint", "bytes"}, {"load_plan", "plan"}} {
		var n int
		if err := m.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND COLUMN_NAME = 'snapshot'", m.schema, c[0]).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			if _, err := m.db.ExecContext(ctx, "ALTER TABLE "+m.table(c[0])+" ADD COLUMN snapshot LONGTEXT NULL AFTER "+c[1]); err != nil {
				return err
			}
		}
	}
	// made (this task created the target table) is newer still; a plan
	// without it counts as a table the user made, which is never dropped.
	var n int
	if err := m.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'load_plan' AND COLUMN_NAME = 'made'", m.schema).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		if _, err := m.db.ExecContext(ctx, "ALTER TABLE "+m.table("load_plan")+" ADD COLUMN made TINYINT NOT NULL DEFAULT 0 AFTER snapshot"); err != nil {
			return err
		}
	}
	return nil
}

// tblKey names a target table in the checkpoint tables.
func tblKey(t sluice.TableRef) string { return t.Quoted() }

type chunkKey struct {
	tbl   string
	index int
}

// done returns the chunks this task has committed.
func (m meta) done(ctx context.Context) (map[chunkKey]bool, error) {
	rows, err := m.db.QueryContext(ctx, "SELECT tbl, chunk FROM "+m.table("load_checkpoint")+" WHERE task = ?", m.task)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[chunkKey]bool{}
	for rows.Next() {
		var k chunkKey
		if err := rows.Scan(&k.tbl, &k.index); err != nil {
			return nil, err
		}
		out[k] = true
	}
	return out, rows.Err()
}

// plans returns the persisted chunk plans by target table key.
func (m meta) plans(ctx context.Context) (map[string]dumpfmt.Plan, error) {
	rows, err := m.db.QueryContext(ctx, "SELECT tbl, plan FROM "+m.table("load_plan")+" WHERE task = ?", m.task)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]dumpfmt.Plan{}
	for rows.Next() {
		var tbl string
		var b []byte
		if err := rows.Scan(&tbl, &b); err != nil {
			return nil, err
		}
		var p dumpfmt.Plan
		if err := json.Unmarshal(b, &p); err != nil {
			return nil, fmt.Errorf("checkpoint plan of %s: %w", tbl, err)
		}
		out[tbl] = p
	}
	return out, rows.Err()
}

// savePlan stores a table's plan unless one is stored already: the first
// run's plan wins, so every run cuts the same chunks. snap is the run's
// snapshot position: the target table's definition is from it (the plan is
// saved before the table is created), which replication needs to know
// whether a DDL is already in the table.
func (m meta) savePlan(ctx context.Context, tbl sluice.TableRef, src sluice.TableRef, p dumpfmt.Plan, snap string) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	_, err = m.db.ExecContext(ctx, "INSERT IGNORE INTO "+m.table("load_plan")+" (task, tbl, source_tbl, plan, snapshot) VALUES (?, ?, ?, ?, ?)", m.task, tblKey(tbl), tblKey(src), string(b), snap)
	return err
}

// setPlanSnapshot records that this task made target table tbl, at this
// run's snapshot snap (JSON).
func (m meta) setPlanSnapshot(ctx context.Context, tbl sluice.TableRef, snap string) error {
	_, err := m.db.ExecContext(ctx, "UPDATE "+m.table("load_plan")+" SET snapshot = ?, made = 1 WHERE task = ? AND tbl = ?", snap, m.task, tblKey(tbl))
	return err
}

// load_plan.made: 0 the user made the target table, 1 this task made it,
// 2 the user made it and this task found it empty and loads it (claimed:
// see clearPending).
const (
	madeByUser    = 0
	madeByTask    = 1
	claimedByTask = 2
)

// madeState returns load_plan.made for target table tbl.
func (m meta) madeState(ctx context.Context, tbl sluice.TableRef) (int, error) {
	var made int
	err := m.db.QueryRowContext(ctx, "SELECT made FROM "+m.table("load_plan")+" WHERE task = ? AND tbl = ?", m.task, tblKey(tbl)).Scan(&made)
	if errors.Is(err, sql.ErrNoRows) {
		return madeByUser, nil
	}
	return made, err
}

// made reports whether this task created target table tbl.
func (m meta) made(ctx context.Context, tbl sluice.TableRef) (bool, error) {
	made, err := m.madeState(ctx, tbl)
	return made == madeByTask, err
}

// claimed reports whether this task made target table tbl or found it
// empty: rows in it that no checkpoint accounts for are this task's.
func (m meta) claimed(ctx context.Context, tbl sluice.TableRef) (bool, error) {
	made, err := m.madeState(ctx, tbl)
	return made == madeByTask || made == claimedByTask, err
}

// claim records that this task found the user's target table tbl empty
// and loads it.
func (m meta) claim(ctx context.Context, tbl sluice.TableRef) error {
	_, err := m.db.ExecContext(ctx, "UPDATE "+m.table("load_plan")+" SET made = ? WHERE task = ? AND tbl = ? AND made = ?", claimedByTask, m.task, tblKey(tbl), madeByUser)
	return err
}

// position returns the snapshot position of the task's first run.
func (m meta) position(ctx context.Context) (*sluice.Position, error) {
	var b []byte
	err := m.db.QueryRowContext(ctx, "SELECT position FROM "+m.table("load_task")+" WHERE task = ?", m.task).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var p sluice.Position
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

func (m meta) savePosition(ctx context.Context, p sluice.Position) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	_, err = m.db.ExecContext(ctx, "INSERT IGNORE INTO "+m.table("load_task")+" (task, position) VALUES (?, ?)", m.task, string(b))
	return err
}

func (m meta) finish(ctx context.Context) error {
	_, err := m.db.ExecContext(ctx, "UPDATE "+m.table("load_task")+" SET finished = CURRENT_TIMESTAMP(6) WHERE task = ?", m.task)
	return err
}

func (m meta) checkpointSQL() string {
	return "INSERT INTO " + m.table("load_checkpoint") + " (task, tbl, chunk, `rows`, bytes, snapshot) VALUES (?, ?, ?, ?, ?, ?)"
}
