package verify

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/schema"
)

// SchemaTables lists the base tables of the named schemas on db, sorted,
// for a Run over whole schemas (what an end-to-end test usually wants).
// A schema without tables is an error wrapping sluice.ErrUnknownTable, so a
// typo cannot pass as "nothing to compare, all equal".
func SchemaTables(ctx context.Context, db *sql.DB, schemas ...string) ([]sluice.TableRef, error) {
	want := map[string]bool{}
	for _, s := range schemas {
		want[strings.ToLower(s)] = true
	}
	refs, err := schema.ListTables(ctx, db, func(r sluice.TableRef) bool { return want[strings.ToLower(r.Schema)] })
	if err != nil {
		return nil, fmt.Errorf("verify: list tables: %w", err)
	}
	found := map[string]bool{}
	for _, r := range refs {
		found[strings.ToLower(r.Schema)] = true
	}
	for _, s := range schemas {
		if !found[strings.ToLower(s)] {
			return nil, &sluice.Error{Op: "verify", Err: fmt.Errorf("%w: schema %q has no tables", sluice.ErrUnknownTable, s), Hint: "check the schema name"}
		}
	}
	return refs, nil
}
