package replicate

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-mysql-org/go-mysql/replication"
	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/dbconn"
)

// markOwnWrites handles a target that is the source server itself (a task
// that routes tables to another schema of the same server). Every write
// the task makes there lands in the binlog it reads; read back and applied
// again, it would loop for ever. So its target sessions set server_id to
// the task's replication server id, and ownWrites drops the events that
// carry it, as a native replica drops events of its own server_id
// (replicate_same_server_id=0). The id is registered on this very server
// by the task's binlog dump, so no native replica of it may use it: the
// marked events are skipped by nobody else.
func (t *Task) markOwnWrites(ctx context.Context, serverID uint32) (uint32, error) {
	same, id, err := dbconn.SameServer(ctx, t.cfg.Source, t.cfg.Target)
	if err != nil || !same {
		return 0, err
	}
	ep := t.cfg.Target
	ep.SessionServerID = serverID
	db, err := dbconn.Open(ctx, "target", ep, dbconn.Options{MaxOpen: 1})
	if err != nil {
		var me *mysql.MySQLError
		if errors.As(err, &me) && (me.Number == 1227 || me.Number == 1238) || errors.Is(err, sluice.ErrPrivilege) {
			return 0, &sluice.Error{Op: "replicate " + t.cfg.Name,
				Err: fmt.Errorf("%w: the target is the source (%s); sluice marks its own writes there with server_id %d so that it does not replicate them again, and target user %q may not set it",
					sluice.ErrPrivilege, id, serverID, ep.User),
				Hint: "on the server: GRANT BINLOG REPLAY ON *.* TO the target user (MariaDB; SUPER also works), or replicate to another server"}
		}
		return 0, err
	}
	db.Close()
	t.cfg.Target.SessionServerID = serverID
	t.logf("the target is the source (%s): this task's own writes carry server_id %d and are not replicated again", id, serverID)
	return serverID, nil
}

// ownWrites drops the events a task wrote itself (markOwnWrites): every
// event of such a transaction carries the id, so the whole group goes,
// frame included. Keeping an empty frame would move the checkpoint past
// it, but that checkpoint is itself a write of the task, and would loop
// one empty transaction at a time. So the checkpoint stays at the last
// source transaction, and a restart from it skips the same events again.
type ownWrites struct{ id uint32 }

// keep reports whether ev goes to the decoder.
func (f ownWrites) keep(ev *replication.BinlogEvent) bool {
	return f.id == 0 || ev.Header.ServerID != f.id
}
