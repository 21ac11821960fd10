package main

import (
	"context"
	"io"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/task"
)

// The incremental replication plugs into `sluice migrate --mode all|incremental`.
func init() {
	incrementalRunner = runIncremental
	trackedTables = func(ctx context.Context, cfg *task.Config) (func(sluice.TableRef) bool, error) {
		rc, err := replicate.FromTask(cfg)
		if err != nil {
			return nil, err
		}
		return replicate.TrackedTables(ctx, rc)
	}
}

// runIncremental replicates until ctx ends (SIGINT/SIGTERM stop it cleanly)
// or a fatal error; a rerun resumes from the checkpoint on the target.
func runIncremental(ctx context.Context, cfg *task.Config, start *sluice.Position, out io.Writer) error {
	rc, err := replicate.FromTask(cfg)
	if err != nil {
		return err
	}
	t, err := replicate.New(rc, out)
	if err != nil {
		return err
	}
	return t.Run(ctx, start)
}
