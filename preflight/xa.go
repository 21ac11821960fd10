package preflight

import (
	"context"
	"database/sql"

	"github.com/sluice-db/sluice/dump"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/task"
)

// preparedXAName names the check; Before leaves it to the copy.
const preparedXAName = "prepared XA"

// preparedXA: a full copy that replication follows cannot start while the
// source holds a prepared XA transaction. The snapshot does not see its
// rows, replication starts after its prepare, and so its XA COMMIT could
// not be applied exactly (docs/manual/apply.md, "Two-phase XA
// transactions"). sluice check --mode all fails on it; migrate leaves the
// refusal to the copy's snapshot (dump.Config.RefusePreparedXA), which
// reads XA RECOVER under the global read lock, where no transaction can
// be prepared in between, and takes no snapshot at all when the copy is
// complete.
func preparedXA(ctx context.Context, src *sql.DB, cfg *task.Config) Result {
	r := Result{Name: preparedXAName, Status: "pass", Detail: "no prepared XA transaction on the source"}
	xids, err := dump.PreparedXA(ctx, src)
	if err != nil {
		return errResult(r.Name, dbconn.Classify(err, "source", cfg.Source))
	}
	if len(xids) == 0 {
		return r
	}
	return errResult(r.Name, dump.PreparedXAError("source "+cfg.Source.Addr(), xids))
}
