package preflight

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/apply"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/schema"
	"github.com/sluice-db/sluice/task"
)

// targetTriggers (issue 29, N12): triggers on the target tables the task
// writes would fire for every copied and replicated row, and the rows the
// source's own triggers wrote arrive as rows already, so the target would
// hold them twice. A MariaDB replica never fires triggers for row events.
// The applier refuses such a table at its first row too (apply.ErrTargetTriggers);
// this check refuses before anything is copied.
func targetTriggers(ctx context.Context, src, dst *sql.DB, cfg *task.Config) Result {
	r := Result{Name: "target triggers", Status: "pass"}
	refs, err := schema.ListTables(ctx, src, cfg.Selected)
	if err != nil {
		return errResult(r.Name, dbconn.Classify(err, "source", cfg.Source))
	}
	targets := map[sluice.TableRef]bool{}
	for _, ref := range refs {
		tgt := cfg.Route(ref)
		targets[sluice.TableRef{Schema: strings.ToLower(tgt.Schema), Name: strings.ToLower(tgt.Name)}] = true
	}
	all, err := schema.AllTriggers(ctx, dst)
	if err != nil {
		return errResult(r.Name, dbconn.Classify(err, "target", cfg.Target))
	}
	var hit []schema.Trigger
	tables := map[string]bool{}
	var names []string
	for _, tr := range all {
		k := sluice.TableRef{Schema: strings.ToLower(tr.Table.Schema), Name: strings.ToLower(tr.Table.Name)}
		if targets[k] {
			hit = append(hit, tr)
			if !tables[tr.Table.String()] {
				tables[tr.Table.String()] = true
				names = append(names, tr.Table.String())
			}
		}
	}
	if len(hit) == 0 {
		r.Detail = "no trigger on the target tables"
		return r
	}
	r.Status = "fail"
	r.Detail = fmt.Sprintf("triggers %s on target tables %s would fire for every copied and replicated row and write their rows a second time", apply.TriggerNames(hit), strings.Join(names, ", "))
	r.Err = fmt.Errorf("%w: %s", apply.ErrTargetTriggers, r.Detail)
	r.Fix = "drop these triggers on the target (a MariaDB replica does not fire triggers for replicated rows; the source's trigger writes arrive as rows)"
	return r
}
