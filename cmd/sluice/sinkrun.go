package main

import (
	"context"
	"fmt"
	"io"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/logx"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/task"
)

// runSinkMigrate runs a task whose task file has sink: instead of target:
// (docs/manual/kafka.md): --mode all emits the snapshot as op "r" events,
// then the changes; --mode incremental starts from a position.
func runSinkMigrate(ctx context.Context, cfg *task.Config, mode string, out io.Writer) error {
	switch mode {
	case "incremental", "all":
	default:
		return &sluice.Error{Op: "migrate " + cfg.Name, Err: fmt.Errorf("%w: --mode %s with a Kafka sink", sluice.ErrConfig, mode),
			Hint: "use --mode all (snapshot as op r events, then the changes) or --mode incremental"}
	}
	rc, kc, err := replicate.SinkFromTask(cfg)
	if err != nil {
		return err
	}
	rc.Log = logx.New(out, "replicate "+rc.Name)
	t, err := replicate.NewSinkTask(rc, kc)
	if err != nil {
		return err
	}
	// --mode all: a task without a checkpoint in Kafka starts with the
	// snapshot; one that has a checkpoint resumes from it.
	t.Snapshot = mode == "all"
	return t.Run(ctx, nil)
}
