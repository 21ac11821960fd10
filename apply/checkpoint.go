package apply

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/sqlgen"
)

// serialWorker is the checkpoint row of work done outside the workers:
// DDL, streamed large transactions and the seeded start position.
const serialWorker = -1

// The checkpoint lives in the target. Each worker owns one row per task, so
// parallel commits never wait on each other's checkpoint row lock; a row is
// updated in the same transaction as the data it covers. Every row holds a
// position below which everything is committed (with source-order commit,
// the end of the worker's last group), so the row with the highest seq is
// the resume point. Its done column lists the source transactions past that
// position that are committed as well: groups committed out of order under
// RelaxedOrder (see relaxed.go), skipped on restart.
func (a *Applier) metaDDL() []string {
	s := sluice.QuoteIdent(a.cfg.MetaSchema)
	return []string{
		"CREATE DATABASE IF NOT EXISTS " + s,
		"CREATE TABLE IF NOT EXISTS " + s + `.apply_checkpoint (
			task VARCHAR(128) NOT NULL,
			worker INT NOT NULL,
			seq BIGINT UNSIGNED NOT NULL,
			binlog_file VARCHAR(512) NOT NULL,
			binlog_pos BIGINT UNSIGNED NOT NULL,
			gtid_set TEXT NOT NULL,
			flavor VARCHAR(16) NOT NULL,
			ddl_pending TEXT NULL,
			done MEDIUMTEXT NULL,
			nontx_pending TEXT NULL,
			updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
			PRIMARY KEY (task, worker)) ENGINE=InnoDB`,
		"CREATE TABLE IF NOT EXISTS " + s + `.apply_schema (
			task VARCHAR(128) NOT NULL PRIMARY KEY,
			seq BIGINT UNSIGNED NOT NULL,
			state LONGBLOB NOT NULL) ENGINE=InnoDB`,
	}
}

// metaState reports whether the checkpoint table exists and whether both
// checkpoint tables are as this version writes them, in one round trip:
// a task reads its checkpoint twice as it starts, and at a distant target
// the CREATE ... IF NOT EXISTS statements cost one round trip each.
func (a *Applier) metaState(ctx context.Context) (exists, ready bool, err error) {
	var ckpt, done, nontx, state int
	err = a.db.QueryRowContext(ctx, `SELECT IFNULL(SUM(TABLE_NAME='apply_checkpoint'),0), IFNULL(SUM(TABLE_NAME='apply_checkpoint' AND COLUMN_NAME='done'),0),
		IFNULL(SUM(TABLE_NAME='apply_checkpoint' AND COLUMN_NAME='nontx_pending'),0), IFNULL(SUM(TABLE_NAME='apply_schema' AND COLUMN_NAME='state'),0)
		FROM information_schema.COLUMNS WHERE TABLE_SCHEMA=? AND TABLE_NAME IN ('apply_checkpoint','apply_schema')`, a.cfg.MetaSchema).Scan(&ckpt, &done, &nontx, &state)
	if err != nil {
		return false, false, fmt.Errorf("look for the checkpoint tables in %s: %w", a.cfg.MetaSchema, err)
	}
	return ckpt > 0, done > 0 && nontx > 0 && state > 0, nil
}

func (a *Applier) ensureMeta(ctx context.Context) error {
	if a.metaReady.Load() {
		return nil
	}
	if _, ready, err := a.metaState(ctx); err != nil || ready {
		a.metaReady.Store(ready)
		return err
	}
	for _, q := range a.metaDDL() {
		if _, err := a.db.ExecContext(ctx, q); err != nil {
			if dbconn.ReadOnly(err) {
				return &sluice.Error{Op: "create checkpoint tables in " + a.cfg.MetaSchema + " on the target", Err: fmt.Errorf("%w: the target is read-only (read_only=ON): %v", sluice.ErrConfig, err),
					Hint: "point target: at a writable server (the primary), or run SET GLOBAL read_only=OFF there if it is meant to take writes"}
			}
			return fmt.Errorf("create checkpoint tables in %s: %w", a.cfg.MetaSchema, err)
		}
	}
	// Checkpoint tables created by an earlier version lack the done column,
	// and those of versions before the non-transactional mark (nontxreplay.go)
	// lack nontx_pending.
	for _, col := range [][2]string{{"done", "MEDIUMTEXT"}, {"nontx_pending", "TEXT"}} {
		var n int
		err := a.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA=? AND TABLE_NAME='apply_checkpoint' AND COLUMN_NAME=?", a.cfg.MetaSchema, col[0]).Scan(&n)
		if err != nil {
			return fmt.Errorf("inspect checkpoint table in %s: %w", a.cfg.MetaSchema, err)
		}
		if n == 0 {
			if _, err := a.db.ExecContext(ctx, "ALTER TABLE "+a.ckptTable+" ADD COLUMN "+col[0]+" "+col[1]+" NULL"); err != nil && !isMySQLErr(err, 1060) {
				return fmt.Errorf("add the %s column to %s: %w", col[0], a.ckptTable, err)
			}
		}
	}
	a.metaReady.Store(true)
	return nil
}

// appendCheckpoint appends the upsert of worker's checkpoint row: seq and
// p are the position below which everything is committed, done the
// encoded ranges committed past it (empty for none).
func (a *Applier) appendCheckpoint(b []byte, worker int, seq uint64, p sluice.Position, done []byte) []byte {
	return a.appendCheckpointPending(b, worker, seq, p, done, "")
}

// appendCheckpointPending is appendCheckpoint that also records a DDL
// about to run (pending, may be empty).
func (a *Applier) appendCheckpointPending(b []byte, worker int, seq uint64, p sluice.Position, done []byte, pending string) []byte {
	return a.appendCheckpointMarks(b, worker, seq, p, done, pending, "")
}

// appendCheckpointMarks is appendCheckpointPending that also records a
// non-transactional group about to run (nontx, may be empty; see
// nontxreplay.go). Every other checkpoint write clears the row's mark.
func (a *Applier) appendCheckpointMarks(b []byte, worker int, seq uint64, p sluice.Position, done []byte, pending, nontx string) []byte {
	b = append(b, "INSERT INTO "...)
	b = append(b, a.ckptTable...)
	b = append(b, " (task,worker,seq,binlog_file,binlog_pos,gtid_set,flavor,ddl_pending,done,nontx_pending) VALUES ("...)
	b = sqlgen.AppendQuoted(b, a.cfg.Task)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(worker), 10)
	b = append(b, ',')
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, ',')
	b = sqlgen.AppendQuoted(b, p.File)
	b = append(b, ',')
	b = strconv.AppendUint(b, uint64(p.Pos), 10)
	b = append(b, ',')
	b = sqlgen.AppendQuoted(b, p.GTIDSet)
	b = append(b, ',')
	b = sqlgen.AppendQuoted(b, p.Flavor)
	b = append(b, ',')
	if pending == "" {
		b = append(b, "NULL"...)
	} else {
		b = sqlgen.AppendQuoted(b, pending)
	}
	b = append(b, ',')
	if len(done) == 0 {
		b = append(b, "NULL"...)
	} else {
		b = sqlgen.AppendQuoted(b, string(done))
	}
	b = append(b, ',')
	if nontx == "" {
		b = append(b, "NULL"...)
	} else {
		b = sqlgen.AppendQuoted(b, nontx)
	}
	b = append(b, ") ON DUPLICATE KEY UPDATE seq=VALUES(seq),binlog_file=VALUES(binlog_file),binlog_pos=VALUES(binlog_pos),gtid_set=VALUES(gtid_set),flavor=VALUES(flavor),ddl_pending=VALUES(ddl_pending),done=VALUES(done),nontx_pending=VALUES(nontx_pending)"...)
	return b
}

type checkpointRow struct {
	seq     uint64
	pos     sluice.Position
	pending string
	// nontx are the end positions of non-transactional groups that may
	// have run in part before a crash (nontxreplay.go), from every row (a
	// mark left by a group skipped since never matches again).
	nontx []string
	found bool
	// done are the ranges committed past pos (from every worker's row).
	done []txnRange
}

// readCheckpoint reads every row of the task: the one with the highest seq
// is the resume point (ties go to the lowest worker id, as before), and the
// done lists of all rows, cut to what lies past it, are what a restart skips.
func (a *Applier) readCheckpoint(ctx context.Context) (checkpointRow, error) {
	var r checkpointRow
	rows, err := a.db.QueryContext(ctx, "SELECT worker, seq, binlog_file, binlog_pos, gtid_set, flavor, ddl_pending, done, nontx_pending FROM "+a.ckptTable+
		" WHERE task=? ORDER BY seq DESC, worker", a.cfg.Task)
	if err != nil {
		return r, fmt.Errorf("read checkpoint of task %s: %w", a.cfg.Task, err)
	}
	defer rows.Close()
	var done []txnRange
	for rows.Next() {
		var (
			worker        int
			seq, pos      uint64
			p             sluice.Position
			pending, list sql.NullString
			nontx         sql.NullString
		)
		if err := rows.Scan(&worker, &seq, &p.File, &pos, &p.GTIDSet, &p.Flavor, &pending, &list, &nontx); err != nil {
			return r, fmt.Errorf("read checkpoint of task %s: %w", a.cfg.Task, err)
		}
		p.Pos = uint32(pos)
		if !r.found {
			r.seq, r.pos, r.found = seq, p, true
		}
		if worker == serialWorker {
			r.pending = pending.String
		}
		if nontx.String != "" {
			r.nontx = append(r.nontx, nontx.String)
		}
		d, err := parseRanges(list.String)
		if err != nil {
			return r, fmt.Errorf("read checkpoint of task %s, worker %d: %w", a.cfg.Task, worker, err)
		}
		done = append(done, d...)
	}
	if err := rows.Err(); err != nil {
		return r, fmt.Errorf("read checkpoint of task %s: %w", a.cfg.Task, err)
	}
	r.done = normalizeRanges(done, r.pos)
	return r, nil
}

// Checkpoint returns the position to resume reading the source from: just
// after the last source transaction committed on the target. ok is false
// when the task has no checkpoint yet (see Seed). Call it after Start: Start
// waits until the sessions of a killed predecessor have ended, so the value
// is final. (Transactions submitted from before the checkpoint Start saw
// are skipped, so a caller that read it earlier is safe too.)
//
// A target without the checkpoint table has no checkpoint, and Checkpoint
// leaves it so: a run refused before Seed creates nothing on the target.
func (a *Applier) Checkpoint(ctx context.Context) (pos sluice.Position, ok bool, err error) {
	if !a.metaReady.Load() {
		exists, ready, err := a.metaState(ctx)
		if err != nil || !exists {
			return pos, false, err
		}
		a.metaReady.Store(ready)
	}
	if err := a.ensureMeta(ctx); err != nil {
		return pos, false, err
	}
	r, err := a.readCheckpoint(ctx)
	return r.pos, r.found, err
}

// PendingDDL returns the end position of a DDL that was marked pending and
// may have run on the target without its checkpoint (a crash between the
// two), or "" when there is none. Until a restart has applied it again, the
// target's tables may be in the state before or after it.
func (a *Applier) PendingDDL(ctx context.Context) (string, error) {
	if err := a.ensureMeta(ctx); err != nil {
		return "", err
	}
	r, err := a.readCheckpoint(ctx)
	return parseMark(r.pending).end, err
}

// SchemaState returns the schema tracker state saved with the last DDL
// applied (nil if none), to restore the decoder's tracker on restart.
func (a *Applier) SchemaState(ctx context.Context) ([]byte, error) {
	if err := a.ensureMeta(ctx); err != nil {
		return nil, err
	}
	var b []byte
	err := a.db.QueryRowContext(ctx, "SELECT state FROM "+sluice.QuoteIdent(a.cfg.MetaSchema)+".apply_schema WHERE task=?", a.cfg.Task).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return b, err
}

// Seed records the start position of a task that has no checkpoint yet:
// the binlog position and GTID set of the full copy's snapshot, or the
// position given for --mode incremental. schemaState (may be nil) is the
// tracker state at that position. It does nothing when a checkpoint exists,
// so a restarted task never goes back to its start.
func (a *Applier) Seed(ctx context.Context, pos sluice.Position, schemaState []byte) error {
	if err := a.ensureMeta(ctx); err != nil {
		return err
	}
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit this is a no-op
	var n int
	if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+a.ckptTable+" WHERE task=? FOR UPDATE", a.cfg.Task).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, string(a.appendCheckpoint(nil, serialWorker, 0, pos, nil))); err != nil {
		return fmt.Errorf("seed checkpoint: %w", err)
	}
	if schemaState != nil {
		if _, err := tx.ExecContext(ctx, "REPLACE INTO "+sluice.QuoteIdent(a.cfg.MetaSchema)+".apply_schema (task, seq, state) VALUES (?,0,?)", a.cfg.Task, schemaState); err != nil {
			return err
		}
	}
	return tx.Commit()
}
