// Package migrate is the full copy of a task: a consistent snapshot of the
// source streamed straight into the pooled load of the target, resumable
// chunk by chunk, with the status file and metrics of the copy. sluice
// migrate calls Run: the checks before work (package preflight), the copy
// (Full), then, with --mode all, replication from the snapshot through
// Config.Replicate, which cmd/ wires to package replicate.
package migrate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/dump"
	"github.com/sluice-db/sluice/internal/chunk"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/internal/dumpfmt"
	"github.com/sluice-db/sluice/internal/logx"
	"github.com/sluice-db/sluice/load"
	"github.com/sluice-db/sluice/preflight"
	"github.com/sluice-db/sluice/task"
)

// Config is one full copy.
type Config struct {
	Task *task.Config
	// Dump and Load are the two sides, made from the task and the
	// command's flags; Full sets the fields that join them.
	Dump dump.Config
	Load load.Config
	// Mode is sluice migrate's --mode for Run: full, all or incremental.
	Mode string
	// Replicating: replication follows the copy (--mode all), from the
	// snapshot's position. Run sets it from Mode.
	Replicating bool
	// Replicate runs the replication from start (nil: from the task file
	// or the checkpoint) until ctx ends; nil means this build has none.
	Replicate func(ctx context.Context, start *sluice.Position) error
	// Report, when set, is called after a copy that read the source (the
	// command prints its summary).
	Report func(ctx context.Context, res *Result)
	// Log receives the copy's lines ("migrate <task>: ..."); nil writes none.
	Log *slog.Logger
	// Tracked, when set and Replicating, says which source tables
	// replication's schema holds at the task's checkpoint (nil: no
	// checkpoint), so that only those lost on the target are reloaded.
	Tracked func(ctx context.Context, cfg *task.Config) (func(sluice.TableRef) bool, error)
	// Progress, when set, starts the display of the copy's counters; the
	// func it returns stops it.
	Progress func(ds *dump.Stats, ls *load.Stats) (stop func())
	// AfterPrepare, set by tests, runs once the dump has its snapshot and
	// the loader its plan, before a chunk is read.
	AfterPrepare func()
}

// DefaultConfig is a copy with the dump's and the load's defaults; Task is
// the caller's.
func DefaultConfig() Config {
	return Config{Dump: dump.DefaultConfig(), Load: load.DefaultConfig()}
}

// Validate refuses a copy without a task.
func (c *Config) Validate() error {
	if c.Task == nil {
		return sluice.Errorf(sluice.ErrConfig, "migrate", "give the copy its task", "no task")
	}
	return nil
}

// Result is what a full copy reports.
type Result struct {
	Start   *sluice.Position // earliest snapshot position of the task
	Resumed bool
	// Copied is false when the copy was complete before this run, so
	// nothing was read (replication resumes from its checkpoint).
	Copied bool
	// The figures of the summary table.
	Rows, Bytes, DumpBytes    int64
	Total, DumpTime, LoadTime time.Duration
}

// Interrupted is the error of a run stopped by a signal: committed chunks
// stay, and the same command resumes.
func Interrupted(op string) error {
	return &sluice.Error{Op: op, Err: errors.New("interrupted; every committed chunk is kept"), Hint: "run the same command again to resume"}
}

// Full streams a snapshot of the source into the target.
func Full(ctx context.Context, c Config) (*Result, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	cfg, log := c.Task, logx.OrDiscard(c.Log)
	replicating := c.Replicating
	lc := c.Load
	lc.ReloadMixed = replicating
	l, err := load.Open(ctx, lc)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	// A copied table that the target lost (dropped or emptied by hand) is
	// loaded again, never left empty under checkpoints that say done.
	// Once replication has run, only a table that replication's schema
	// says must exist is reloaded (see load.ReloadLost).
	var tracked func(sluice.TableRef) bool
	if replicating && c.Tracked != nil {
		if tracked, err = c.Tracked(ctx, cfg); err != nil {
			return nil, fmt.Errorf("migrate: read replication's schema: %w", err)
		}
	}
	lost, err := l.ReloadLost(ctx, sourceProbe(cfg), tracked)
	if err != nil {
		return nil, err
	}
	for _, t := range lost {
		log.Info(fmt.Sprintf("%s is %s although this task copied it; it is loaded again whole", t.Target, t.Why))
	}
	complete, err := l.Complete(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: read the copy's checkpoints: %w", err)
	}
	if replicating && complete {
		// Nothing to copy: replication resumes from its checkpoint, as
		// --mode incremental does. The target tables are not compared with
		// the source's definitions (a source DDL that replication has not
		// applied yet makes them differ) and tables that replication made
		// are not copied. No snapshot, so no lock on the source.
		log.Info("the full copy is complete; resuming replication")
		return &Result{Start: l.FirstPosition(), Resumed: true}, nil
	}
	dc := c.Dump
	dc.PlanFor, dc.Done, dc.WholeTable, dc.WholeWave = l.Plan, l.Done, l.WholeTable, cfg.PoolSize
	dc.RefusePreparedXA = replicating
	restricted := false
	if replicating && l.Resumed() {
		if done, err := l.CopiedBefore(ctx); err != nil {
			return nil, err
		} else if done {
			// The copy had finished, and replication may have run since:
			// copy only the planned tables with chunks to load again (lost
			// tables). Any other table is replication's (made on the source
			// after the copy) and keeps its replicated definition and rows.
			sel := dc.Select
			dc.Select = func(t sluice.TableRef) bool { return sel(t) && l.Pending(t) }
			restricted = true
		}
	}
	began := time.Now()
	d, err := dump.Open(ctx, dc)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	if !restricted {
		if err := preflight.CheckSelected(ctx, cfg, d.Tables(), replicating, log); err != nil {
			return nil, err
		}
	}
	specs := make([]load.TableSpec, len(d.Tables()))
	for i, tp := range d.Tables() {
		specs[i] = load.TableSpec{Table: tp.Table, Plan: dumpfmt.PlanOf(tp.Chunks)}
	}
	resumed := l.Resumed()
	if replicating && resumed && !restricted {
		if err := linkForeignKeys(ctx, cfg, specs); err != nil {
			return nil, err
		}
	}
	snap := d.Position()
	if d.NoSnapshot() && l.FirstPosition() != nil {
		snap = *l.FirstPosition()
	}
	if err := l.Prepare(ctx, snap, specs); err != nil {
		return nil, err
	}
	log.Info(planLine(d, l, len(specs), resumed))
	ds, ls := d.Stats(), l.Stats()
	stopProgress := func() {}
	if c.Progress != nil {
		stopProgress = c.Progress(ds, ls)
	}
	rep := startCopyReporter(cfg, ds, l)
	if c.AfterPrepare != nil {
		c.AfterPrepare()
	}
	l.Start(ctx)
	dumpStart := time.Now()
	derr := d.Run(ctx, streamSink{l})
	dumpTime := time.Since(dumpStart)
	if derr != nil {
		l.Abort(derr)
	}
	lerr := l.Wait()
	stopProgress()
	rep.Stop(errors.Join(derr, lerr, ctx.Err()))
	if ctx.Err() != nil {
		return nil, Interrupted("migrate")
	}
	if derr != nil {
		return nil, derr
	}
	if lerr != nil {
		return nil, lerr
	}
	return &Result{Start: l.FirstPosition(), Resumed: resumed, Copied: true,
		Rows: ls.Rows.Load(), Bytes: ls.Bytes.Load(), DumpBytes: ds.Bytes.Load(),
		Total: time.Since(began), DumpTime: dumpTime, LoadTime: ls.Active()}, nil
}

// planLine is the log line that says what this run copies.
func planLine(d *dump.Dumper, l *load.Loader, tables int, resumed bool) string {
	var b strings.Builder
	if d.NoSnapshot() {
		fmt.Fprintf(&b, "%d tables, nothing left to copy (no snapshot taken)", tables)
	} else {
		fmt.Fprintf(&b, "%d tables, snapshot at %s, %d chunks to copy", tables, d.Position(), l.Stats().TotalChunks.Load())
	}
	if resumed {
		fmt.Fprintf(&b, " (resumed: %d chunks done before; the rest is read from a new snapshot)", l.Stats().Skipped.Load())
	}
	for _, t := range l.Remade() {
		fmt.Fprintf(&b, "; %s is loaded again whole (a DDL on the source changed it since its first chunks were loaded)", t)
	}
	for _, t := range l.Reloaded() {
		fmt.Fprintf(&b, "; %s is reloaded whole (its key does not let replication match chunks of two snapshots)", t)
	}
	b.WriteString(groupReloadNote(l.GroupReloaded()))
	return b.String()
}

// sourceProbe checks source tables for the loader's lost-table check with
// one plain connection: no snapshot, no lock.
func sourceProbe(cfg *task.Config) load.SourceProbe {
	return func(ctx context.Context, t sluice.TableRef) (bool, bool, error) {
		db, err := dbconn.Open(ctx, "source", cfg.Source, dbconn.Options{MaxOpen: 1})
		if err != nil {
			return false, false, err
		}
		defer db.Close()
		var one int
		err = db.QueryRowContext(ctx, "SELECT 1 FROM "+t.Quoted()+" LIMIT 1").Scan(&one)
		var me *mysql.MySQLError
		switch {
		case err == nil:
			return true, true, nil
		case errors.Is(err, sql.ErrNoRows):
			return true, false, nil
		case errors.As(err, &me) && me.Number == 1146:
			return false, false, nil
		}
		return false, false, dbconn.Classify(err, "source", cfg.Source)
	}
}

// streamSink adapts the loader to dump.Sink.
type streamSink struct{ l *load.Loader }

func (s streamSink) OpenChunk(ctx context.Context, t *sluice.Table, r chunk.Range) (dump.ChunkWriter, error) {
	return s.l.OpenChunk(ctx, t.Ref, r)
}

// oneLine is err's text on one line.
func oneLine(err error) string {
	if err == nil {
		return ""
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}
