package apply

import (
	"context"
	"database/sql"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/sluice-db/sluice"
)

// A RENAME TABLE is the one DDL that a second run can undo instead of
// failing: after `RENAME TABLE a TO t, b TO a, t TO b` the same statement
// succeeds again and swaps the tables back. A kill between the statement and
// its checkpoint would then leave each table's rows under the other's name.
// So every RENAME TABLE also renames a marker table of the task in sluice_meta,
// in the same statement, which MariaDB runs atomically: the marker under its
// "done" name proves the statement ran, whatever the other tables look like.

// renameMarker names the two marker tables of statement i of the DDL that
// ends at end; the names depend only on the task, the position and i, so a
// restart finds them again.
func (a *Applier) renameMarker(end sluice.Position, i int) (pending, done string) {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%s\x00%d", a.cfg.Task, end.String(), i)
	base := fmt.Sprintf("_sluice_rename_%016x", h.Sum64())
	meta := sluice.QuoteIdent(a.cfg.MetaSchema) + "."
	return meta + sluice.QuoteIdent(base+"_p"), meta + sluice.QuoteIdent(base+"_d")
}

// isRenameTable reports whether q is a RENAME TABLE(S) statement.
func isRenameTable(q string) bool {
	f := strings.Fields(strings.ToUpper(q))
	return len(f) >= 2 && f[0] == "RENAME" && (f[1] == "TABLE" || f[1] == "TABLES")
}

// runRename runs a RENAME TABLE statement together with its marker. It
// returns without running it when the marker shows a run before a crash.
func (a *Applier) runRename(ctx context.Context, conn *sql.Conn, q string, end sluice.Position, i int) error {
	pending, done := a.renameMarker(end, i)
	var n int
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
		a.cfg.MetaSchema, unquoteName(done)).Scan(&n); err != nil {
		return fmt.Errorf("look for the rename marker: %w", err)
	}
	if n > 0 {
		return nil // ran before a crash that came before its checkpoint
	}
	if _, err := conn.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+pending+" (x INT) ENGINE=InnoDB"); err != nil {
		return fmt.Errorf("create the rename marker: %w", err)
	}
	_, err := conn.ExecContext(ctx, strings.TrimRight(strings.TrimSpace(q), ";")+", "+pending+" TO "+done)
	if err != nil {
		// The statement failed as a whole: no table moved, the marker
		// neither; it must not outlive the failure.
		_, _ = conn.ExecContext(context.Background(), "DROP TABLE IF EXISTS "+pending)
	}
	return err
}

// dropRenameMarkers removes the markers of a DDL whose checkpoint has
// committed. A failure leaves two empty tables behind and is not an error.
func (a *Applier) dropRenameMarkers(ctx context.Context, it sluice.StreamItem) {
	for i, q := range it.DDL {
		if isRenameTable(q) {
			p, d := a.renameMarker(it.End, i)
			_, _ = a.serial.ExecContext(ctx, "DROP TABLE IF EXISTS "+p+", "+d)
		}
	}
}

// unquoteName is the table name of a quoted `schema`.`name`.
func unquoteName(q string) string {
	i := strings.LastIndex(q, ".`")
	return strings.ReplaceAll(strings.Trim(q[i+1:], "`"), "``", "`")
}
