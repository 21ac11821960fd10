package migrate

import (
	"context"
	"fmt"
	"strings"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/load"
	"github.com/sluice-db/sluice/schema"
	"github.com/sluice-db/sluice/task"
)

// linkForeignKeys sets each spec's Links from the source's foreign keys
// between the copied tables, so that a resumed --mode all copy loads every
// group of tables joined by foreign keys from one snapshot (see
// load/fkgroups.go). A key to or from a table the task does not copy links
// nothing.
func linkForeignKeys(ctx context.Context, cfg *task.Config, specs []load.TableSpec) error {
	idx := make(map[sluice.TableRef]int, len(specs))
	var schemas []string
	seen := map[string]bool{}
	for i, s := range specs {
		idx[s.Table.Ref] = i
		if !seen[s.Table.Ref.Schema] {
			seen[s.Table.Ref.Schema] = true
			schemas = append(schemas, s.Table.Ref.Schema)
		}
	}
	if len(schemas) == 0 {
		return nil
	}
	db, err := dbconn.Open(ctx, "source", cfg.Source, dbconn.Options{MaxOpen: 1})
	if err != nil {
		return err
	}
	defer db.Close()
	fks, err := schema.ForeignKeysIn(ctx, db, schemas)
	if err != nil {
		return fmt.Errorf("migrate: read the source's foreign keys: %w", dbconn.Classify(err, "source", cfg.Source))
	}
	for _, fk := range fks {
		ci, ok := idx[fk.Child]
		pi, ok2 := idx[fk.Parent]
		if !ok || !ok2 {
			continue
		}
		specs[ci].Links = append(specs[ci].Links, fk.Parent)
		if pi != ci {
			specs[pi].Links = append(specs[pi].Links, fk.Child)
		}
	}
	return nil
}

// groupReloadNote is the log line's part for the tables reloaded with
// their foreign-key group.
func groupReloadNote(rs []load.GroupReload) string {
	names := func(ts []sluice.TableRef) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = t.String()
		}
		return strings.Join(s, ", ")
	}
	var b strings.Builder
	for _, r := range rs {
		if len(r.Group) == 1 {
			fmt.Fprintf(&b, "; %s is reloaded whole (a foreign key references its own rows, so all of it must be of one snapshot, and chunks of it are still to copy)", r.Group[0])
			continue
		}
		are, have := "are", "have"
		if len(r.Reloaded) == 1 {
			are = "is"
		}
		if len(r.Pending) == 1 {
			have = "has"
		}
		fmt.Fprintf(&b, "; foreign keys join %s: %s %s chunks to copy from this run's snapshot, so %s %s reloaded whole (a parent and its child must be of one snapshot)",
			names(r.Group), names(r.Pending), have, names(r.Reloaded), are)
	}
	return b.String()
}
