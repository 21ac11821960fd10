package replicate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/apply"
	"github.com/sluice-db/sluice/binlog"
	"github.com/sluice-db/sluice/relay"
)

// target is the pipeline's end of a task with a target database: the
// parallel applier, which commits the checkpoint with the data.
type target struct {
	t  *Task
	db *sql.DB // the target, for the run (begin opens it)
}

func (t *Task) run(ctx context.Context, start *sluice.Position, m *metrics) error {
	return t.pipeline(ctx, &target{t: t}, start, m)
}

func (e *target) begin(ctx context.Context, start *sluice.Position, info *binlog.Info, bcfg binlog.Config) (sluice.Position, func(), error) {
	t := e.t
	own, err := t.markOwnWrites(ctx, bcfg.ServerID) // ownwrites.go
	if err != nil {
		return sluice.Position{}, nil, err
	}
	t.mu.Lock()
	t.own = own
	t.mu.Unlock()
	db, err := apply.OpenTarget(ctx, t.cfg.Target, t.cfg.Apply.Workers)
	if err != nil {
		return sluice.Position{}, nil, err
	}
	e.db = db
	release := func() { db.Close() }
	// Before the binlog dump: a live process that runs this task from
	// another dir holds its fence on the target, and a dump with the same
	// server-id would cut that process's dump off again and again.
	if err := waitFence(ctx, db, t.cfg.Name, 2*time.Minute); err != nil {
		return sluice.Position{}, release, err
	}
	pos, err := t.startPosition(ctx, db, start, info, bcfg)
	return pos, release, err
}

func (e *target) dest() string { return fmt.Sprintf("target %s", e.t.cfg.Target) }

// beside serves the relay log while the task applies it (serve: beside
// target: in the task file).
func (e *target) beside(rlog *relay.Log, m *metrics) (func(), error) {
	t := e.t
	if t.cfg.Serve == nil {
		return nil, nil
	}
	// The applier's checkpoint and the readers of the dumps both hold
	// relay files (relay.Log.Purge), so serving needs no purge of its own.
	srv, ln, err := listenServe(t.cfg.Serve, t.cfg.Source, rlog, t.log)
	if err != nil {
		return nil, err
	}
	t.logf("serving the relay log on %s", ln.Addr())
	if t.cfg.ServeReady != nil {
		t.cfg.ServeReady(ln.Addr().String())
	}
	t.serving(srv, ln.Addr().String(), m)
	stop := startServe(srv, ln)
	return func() {
		t.serving(nil, "", nil)
		if err := stop(); err != nil {
			t.logf("serve: %v", err)
		}
	}, nil
}

// open readies an applier at the checkpoint on the target, behind the
// task's fence.
func (e *target) open(ctx context.Context, rlog *relay.Log) (*session, error) {
	t := e.t
	if err := waitFence(ctx, e.db, t.cfg.Name, 2*time.Minute); err != nil {
		return nil, err
	}
	db, err := openFenced(ctx, t.cfg.Target, t.cfg.Name, t.cfg.Apply.Workers)
	if err != nil {
		return nil, err
	}
	s, err := e.openApplier(ctx, rlog, db)
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func (e *target) openApplier(ctx context.Context, rlog *relay.Log, db *sql.DB) (*session, error) {
	t := e.t
	acfg := t.cfg.Apply
	if acfg.Notify == nil {
		acfg.Notify = t.logf
	}
	a, err := apply.New(acfg, db)
	if err != nil {
		return nil, err
	}
	pos, ok, err := a.Checkpoint(ctx)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errors.New("replicate: the checkpoint disappeared from the target")
	}
	sf, err := copyFilter(ctx, db, t.cfg.Apply.MetaSchema, t.cfg.Name)
	if err != nil {
		return nil, err
	}
	state, err := a.SchemaState(ctx)
	if err != nil {
		return nil, err
	}
	dcfg := t.cfg.Decode
	hs, err := ReadHandles(t.cfg.Dir)
	if err != nil {
		return nil, err
	}
	if len(hs) > 0 && dcfg.Handle == nil {
		h := &handler{dir: t.cfg.Dir, hs: hs, log: t.logf}
		dcfg.Handle = h.handle
		t.mu.Lock()
		t.handles = h
		t.mu.Unlock()
	}
	dec, r, err := openDecoder(ctx, rlog, dcfg, pos, state)
	if err != nil {
		return nil, err
	}
	r.SetClock(&t.clocks.decode)
	a.SetClocks(t.clocks.applier())
	if err := a.Start(ctx); err != nil {
		r.Close()
		return nil, err
	}
	t.setApplier(a, pos)
	t.mu.Lock()
	own := ownWrites{id: t.own}
	t.mu.Unlock()
	return &session{c: a, dec: dec, r: r, own: own, copied: sf, retire: func() {
		t.retireApplier(a)
		db.Close()
	}}, nil
}

// fatal: a restart from the checkpoint fixes only failures of the target
// connection or server (retryable).
func (e *target) fatal(err error) bool { return !retryable(err) }

func (e *target) restarting(err error, wait time.Duration) {
	e.t.setStage(StageRetrying, err)
	e.t.warnf("%s", retryNote(err, wait.String())) // readonly.go
}

func (e *target) report() Status { return e.t.Status() }
