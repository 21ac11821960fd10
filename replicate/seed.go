package replicate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/schema"
)

// seedSchema returns the schema tracker state a new task starts with: every
// replicated source table, with the definition its target table has. At the
// start of replication the target is the source as of the start position
// (the full copy made it so, or the user did for --mode incremental), which
// is the schema the tracker must follow DDL from; the source's current
// schema may already be later. Without it an ALTER TABLE of a copied table
// would stop replication as "not tracked", and writesets would miss the
// secondary unique keys, which only the tracker knows.
func seedSchema(ctx context.Context, cfg Config, target *sql.DB) ([]byte, error) {
	src, err := dbconn.Open(ctx, "source", cfg.Source, dbconn.Options{MaxOpen: 1})
	if err != nil {
		return nil, err
	}
	defer src.Close()
	refs, err := schema.ListTables(ctx, src, cfg.Decode.Selected)
	if err != nil {
		return nil, dbconn.Classify(err, "source", cfg.Source)
	}
	tracker := schema.NewTracker()
	for _, ref := range refs {
		to := ref
		if cfg.Decode.Route != nil {
			to = cfg.Decode.Route(ref)
		}
		tb, err := schema.Inspect(ctx, target, to)
		if errors.Is(err, sluice.ErrUnknownTable) {
			continue // created later in the stream, or not copied
		}
		if err != nil {
			return nil, fmt.Errorf("seed the schema tracker from %s: %w", to, dbconn.Classify(err, "target", cfg.Target))
		}
		tb.Ref = ref
		tracker.Put(tb)
	}
	return tracker.Snapshot()
}
