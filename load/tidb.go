package load

import (
	"context"
	"database/sql"

	"github.com/sluice-db/sluice/internal/dbconn"
)

// The few statements of a load whose form differs on a TiDB target. The
// flavour is read once at Open; a MariaDB target gets exactly the
// statements it always got. What TiDB cannot hold at all is refused before
// the copy starts (sluice check, cmd/sluice/checktidb.go).

// targetFlavor reads the target's flavour.
func targetFlavor(ctx context.Context, db *sql.DB) (dbconn.Flavor, error) {
	f, _, err := dbconn.ServerFlavor(ctx, db)
	return f, err
}

// warningsQuery is the query for the last statement's warnings: the first
// three do to name the problem, unless every one must be looked at (a table
// with generated columns). TiDB has no LIMIT on SHOW WARNINGS (a 1064
// syntax error), so it reads them all.
func warningsQuery(f dbconn.Flavor, all bool) string {
	if all || f == dbconn.TiDB {
		return "SHOW WARNINGS"
	}
	return "SHOW WARNINGS LIMIT 3"
}
