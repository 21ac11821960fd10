package migrate

import (
	"context"
	"fmt"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/logx"
	"github.com/sluice-db/sluice/preflight"
	"github.com/sluice-db/sluice/replicate"
)

// Run is one run of sluice migrate: --mode full copies, all copies and
// then replicates from the snapshot, incremental only replicates.
// Everything the run needs is checked before it copies a row (package
// preflight), and one process runs the task from the copy on.
func Run(ctx context.Context, c Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	cfg, log := c.Task, logx.OrDiscard(c.Log)
	if err := preflight.CheckMetricsAddr(cfg); err != nil {
		return err
	}
	switch c.Mode {
	case "full", "all":
	case "incremental":
		if c.Replicate == nil {
			return notInBuild()
		}
		if err := preflight.Before(ctx, cfg, c.Mode, log); err != nil {
			return err
		}
		return c.Replicate(ctx, nil)
	default:
		return &sluice.Error{Op: "migrate", Err: fmt.Errorf("%w: --mode %q", sluice.ErrConfig, c.Mode), Hint: "use --mode full, all or incremental"}
	}
	if c.Mode == "all" && c.Replicate == nil {
		return notInBuild()
	}
	// One process per task, from the copy on (replication locks it again).
	unlock, err := replicate.LockTask(cfg.Dir, cfg.Name)
	if err != nil {
		return err
	}
	defer unlock()
	if err := preflight.Before(ctx, cfg, c.Mode, log); err != nil {
		return err
	}
	if c.Mode == "full" {
		if err := preflight.RefuseUnmatchedEarly(ctx, cfg, log); err != nil {
			return err
		}
	}
	if err := preflight.MarkOwnCopy(ctx, cfg, c.Mode, log); err != nil {
		return err
	}
	// MarkOwnCopy may have set the target sessions' server id (the target
	// is the source): the copy's writes must carry it, or replication
	// applies them a second time.
	c.Load.Target = cfg.Target
	c.Replicating = c.Mode == "all"
	res, err := Full(ctx, c)
	if err != nil {
		return err
	}
	if res.Copied && c.Report != nil {
		c.Report(ctx, res)
	}
	if c.Mode == "all" {
		// Replication starts at the first snapshot. Chunks that a resumed
		// run read from a later snapshot already hold the changes up to it;
		// the replication's copy filter (internal/snapfilter) skips those
		// changes chunk by chunk, from the positions stored with each chunk.
		return c.Replicate(ctx, res.Start)
	}
	return nil
}

func notInBuild() error {
	return &sluice.Error{Op: "migrate", Err: fmt.Errorf("%w: incremental replication is not available in this build", sluice.ErrConfig), Hint: "use --mode full"}
}
