package preflight

import (
	"context"
	"log/slog"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/dump"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/task"
)

// RefuseUnmatchedEarly runs CheckSelected for a copy alone (--mode full)
// before anything is written to the target: the same check after the dump
// opened came after load.Open had made sluice_meta and its tables there,
// so a refused copy left them behind (issue 30's bad-input table). It looks
// at every table the source lists, of any type: what the dump then refuses
// (a sequence, say) is still refused by the later checks.
func RefuseUnmatchedEarly(ctx context.Context, cfg *task.Config, log *slog.Logger) error {
	db, err := dbconn.Open(ctx, "source", cfg.Source, dbconn.Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES")
	if err != nil {
		return dbconn.Classify(err, "source", cfg.Source)
	}
	defer rows.Close()
	var tables []*dump.TablePlan
	for rows.Next() {
		var ref sluice.TableRef
		if err := rows.Scan(&ref.Schema, &ref.Name); err != nil {
			return dbconn.Classify(err, "source", cfg.Source)
		}
		if cfg.Selected(ref) {
			tables = append(tables, &dump.TablePlan{Table: &sluice.Table{Ref: ref}})
		}
	}
	if err := rows.Err(); err != nil {
		return dbconn.Classify(err, "source", cfg.Source)
	}
	return CheckSelected(ctx, cfg, tables, false, log)
}
