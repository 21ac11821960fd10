package preflight

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/schema"
	"github.com/sluice-db/sluice/task"
)

// sameServerCheck: a target that is the source server itself. A table
// routed onto itself would be copied over its own rows and its changes
// applied to it again for ever, so it is refused, with a fix that never
// points at the table (it is the source's). A table routed to another
// name is a legitimate copy; replication then needs to mark its own
// writes (replicate/ownwrites.go), which takes BINLOG REPLAY.
func sameServerCheck(ctx context.Context, src, dst *sql.DB, cfg *task.Config, mode string) Result {
	r := Result{Name: "target is not the source"}
	sid, err := dbconn.ServerIdentity(ctx, src)
	if err != nil {
		return errResult(r.Name, dbconn.Classify(err, "source", cfg.Source))
	}
	tid, err := dbconn.ServerIdentity(ctx, dst)
	if err != nil {
		return errResult(r.Name, dbconn.Classify(err, "target", cfg.Target))
	}
	if !sid.Same(tid) {
		r.Status, r.Detail = "pass", "the target is another server"
		return r
	}
	fail := func(what string) Result {
		r.Status = "fail"
		r.Detail = fmt.Sprintf("the target is the source server (%s): %s", sid, what)
		r.Err = fmt.Errorf("%w: %s", sluice.ErrConfig, r.Detail)
		r.Fix = "point target: at another server, or route the tables to another schema of this server (routes: [{schema: S, target-schema: S_copy}]); never empty or drop them, they are the source's"
		return r
	}
	refs, err := schema.ListTables(ctx, src, cfg.Selected)
	if err != nil {
		return errResult(r.Name, dbconn.Classify(err, "source", cfg.Source))
	}
	for _, ref := range refs {
		if sameRef(cfg.Route(ref), ref) {
			return fail(fmt.Sprintf("%s would be copied and replicated onto itself", ref))
		}
	}
	if len(cfg.Routes) == 0 {
		// No table yet, but any the patterns select later maps to itself.
		return fail(fmt.Sprintf("tables.include %q has no route, so its tables would be replicated onto themselves", strings.Join(cfg.Tables.Include, ", ")))
	}
	if mode != "full" {
		rc, err := replicate.FromTask(cfg)
		if err != nil {
			return errResult(r.Name, err)
		}
		if err := canMarkOwn(ctx, cfg, rc.Binlog.ServerID); err != nil {
			return errResult(r.Name, err)
		}
		r.Detail = fmt.Sprintf("the target is the source server (%s); every table goes to another name, and the task's own writes carry server_id %d, which its replication skips", sid, rc.Binlog.ServerID)
	} else {
		r.Detail = fmt.Sprintf("the target is the source server (%s); every table goes to another name", sid)
	}
	r.Status = "pass"
	return r
}

func sameRef(a, b sluice.TableRef) bool {
	return strings.EqualFold(a.Schema, b.Schema) && strings.EqualFold(a.Name, b.Name)
}

// canMarkOwn opens a target session with server_id set to id: MariaDB
// lets only SUPER or BINLOG REPLAY set it.
func canMarkOwn(ctx context.Context, cfg *task.Config, id uint32) error {
	ep := cfg.Target
	ep.SessionServerID = id
	db, err := dbconn.Open(ctx, "target", ep, dbconn.Options{MaxOpen: 1})
	if err == nil {
		db.Close()
		return nil
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) && (me.Number == 1227 || me.Number == 1238) || errors.Is(err, sluice.ErrPrivilege) {
		return &sluice.Error{Op: "target " + cfg.Target.Addr(),
			Err: fmt.Errorf("%w: the target is the source; sluice marks its own writes there with server_id %d so that replication does not apply them again, and target user %q may not set it",
				sluice.ErrPrivilege, id, cfg.Target.User),
			Hint: "on the server: GRANT BINLOG REPLAY ON *.* TO the target user (MariaDB; SUPER also works), or replicate to another server"}
	}
	return err
}

// MarkOwnCopy: when the target is the source, the full copy's sessions
// mark their writes with the task's replication server id too, so that
// replication from the snapshot (now, or a later --mode incremental)
// skips the copied rows instead of loading them a second time. A copy
// alone (--mode full) needs no such privilege and goes on unmarked, with
// a warning.
func MarkOwnCopy(ctx context.Context, cfg *task.Config, mode string, log *slog.Logger) error {
	same, _, err := dbconn.SameServer(ctx, cfg.Source, cfg.Target)
	if err != nil || !same {
		return err
	}
	rc, err := replicate.FromTask(cfg)
	if err != nil {
		return err
	}
	if err := canMarkOwn(ctx, cfg, rc.Binlog.ServerID); err != nil {
		if mode != "full" || !errors.Is(err, sluice.ErrPrivilege) {
			return err
		}
		log.Info(fmt.Sprintf("warning: the target is the source and the copy's writes cannot be marked (%v); replicating later from this copy's snapshot would apply them again", err))
		return nil
	}
	cfg.Target.SessionServerID = rc.Binlog.ServerID
	return nil
}
