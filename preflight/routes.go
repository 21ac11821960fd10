package preflight

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/schema"
	"github.com/sluice-db/sluice/task"
)

// routeCheck refuses routes that would fail half-way, after tables and
// load_task rows exist on the target: two source tables routed to one
// target table (a merge: the second copy's rows collide with the first's,
// and replication would interleave two tables' changes in one), and a
// routed name longer than the server's 64 characters. Literal names in
// routes: are checked when the file is read (task.Validate); this checks
// the names the routes make of the source's tables.
func routeCheck(ctx context.Context, src *sql.DB, cfg *task.Config) Result {
	r := Result{Name: "routes"}
	refs, err := schema.ListTables(ctx, src, cfg.Selected)
	if err != nil {
		return errResult(r.Name, dbconn.Classify(err, "source", cfg.Source))
	}
	seen := map[string]sluice.TableRef{}
	for _, ref := range refs {
		tgt := cfg.Route(ref)
		if err := task.CheckName("routed schema name", tgt.Schema); err != nil {
			return errResult(r.Name, err)
		}
		if err := task.CheckName("routed table name", tgt.Name); err != nil {
			return errResult(r.Name, err)
		}
		k := strings.ToLower(tgt.Schema) + "\x00" + strings.ToLower(tgt.Name)
		if prev, ok := seen[k]; ok {
			r.Status = "fail"
			r.Detail = fmt.Sprintf("the routes send both %s and %s to %s: sluice does not merge tables", prev, ref, tgt)
			r.Err = fmt.Errorf("%w: %s", sluice.ErrConfig, r.Detail)
			r.Fix = "give each source table its own target table (a route with target-table: names one table; use table: to match only it), or exclude one in tables.exclude"
			return r
		}
		seen[k] = ref
	}
	r.Status, r.Detail = "pass", fmt.Sprintf("%d tables, each to its own target table", len(refs))
	return r
}
