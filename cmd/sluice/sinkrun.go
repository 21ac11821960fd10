package main

import (
	"context"
	"fmt"
	"io"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/task"
)

// runSinkMigrate runs a task whose task file has sink: instead of target:
// (docs/manual/kafka.md). Only the incremental mode exists so far: the
// snapshot as op "r" events (--mode all) is not built yet.
func runSinkMigrate(ctx context.Context, cfg *task.Config, mode string, out io.Writer) error {
	if mode != "incremental" {
		return &sluice.Error{Op: "migrate " + cfg.Name, Err: fmt.Errorf("%w: --mode %s with a Kafka sink is not supported yet", sluice.ErrConfig, mode),
			Hint: "use --mode incremental with incremental.gtid-set or binlog-file/binlog-pos in the task file"}
	}
	rc, kc, err := replicate.SinkFromTask(cfg)
	if err != nil {
		return err
	}
	t, err := replicate.NewSinkTask(rc, kc, out)
	if err != nil {
		return err
	}
	return t.Run(ctx, nil)
}
