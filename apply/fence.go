package apply

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/sluice-db/sluice"
)

// Fencing. After kill -9 the server may still be running the dead
// process's sessions for a moment: a COMMIT already sent can land after a
// new process has read the checkpoint, and the same transactions would be
// applied twice. So every worker session holds a named lock for its worker
// id as long as it lives; a new applier takes the same locks before it
// reads the checkpoint, which waits until every session of the previous
// incarnation has ended. It also keeps two appliers from running one task.

const fenceWait = 2 * time.Minute

func (a *Applier) lockName(worker int) string {
	h := fnv.New64a()
	h.Write([]byte(a.cfg.MetaSchema + "\x00" + a.cfg.Task))
	return fmt.Sprintf("sluice-apply-%x-%d", h.Sum64(), worker)
}

// fence takes worker's lock on conn (and keeps it for the session).
func (a *Applier) fence(ctx context.Context, conn *sql.Conn, worker int) error {
	var got sql.NullInt64
	err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", a.lockName(worker), int(fenceWait/time.Second)).Scan(&got)
	if err != nil {
		return fmt.Errorf("take the applier lock of task %s: %w", a.cfg.Task, err)
	}
	if got.Int64 != 1 {
		return &sluice.Error{Op: "start applying task " + a.cfg.Task,
			Err:  fmt.Errorf("%w: another applier of this task still holds worker %d's session lock after %s", sluice.ErrConfig, worker, fenceWait),
			Hint: "stop the other sluice process running this task, or give this task another name"}
	}
	return nil
}

// fenceOld waits for sessions of earlier incarnations whose worker ids this
// one does not use (it ran with more workers).
func (a *Applier) fenceOld(ctx context.Context) error {
	rows, err := a.db.QueryContext(ctx, "SELECT worker FROM "+a.ckptTable+" WHERE task=? AND worker >= ?", a.cfg.Task, a.cfg.Workers)
	if err != nil {
		return fmt.Errorf("read checkpoint workers: %w", err)
	}
	var ids []int
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, id := range ids {
		if err := a.fence(ctx, a.serial, id); err != nil {
			return err
		}
		if _, err := a.serial.ExecContext(ctx, "DO RELEASE_LOCK(?)", a.lockName(id)); err != nil {
			return err
		}
	}
	return nil
}

// before reports whether position p is at or before q in the same binlog
// sequence; an unknown position is before nothing.
func before(p, q sluice.Position) bool {
	if q.File == "" || p.File == "" {
		return false
	}
	return p.Compare(q) <= 0
}
