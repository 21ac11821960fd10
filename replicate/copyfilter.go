package replicate

import (
	"context"
	"database/sql"

	"github.com/sluice-db/sluice/internal/snapfilter"
	"github.com/sluice-db/sluice/load"
)

// copyFilter returns the filter that keeps replication from applying again
// what the task's full copy already holds (nil: the task made no copy on
// this target). The copy's chunks and their snapshot positions are read from
// the target each time the applier starts, so the decisions are the same
// after any restart.
func copyFilter(ctx context.Context, db *sql.DB, metaSchema, task string) (*snapfilter.Filter, error) {
	tables, err := load.CopySnapshots(ctx, db, metaSchema, task)
	if err != nil || len(tables) == 0 {
		return nil, err
	}
	return snapfilter.New(tables)
}
