package dump

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
)

// ErrPreparedXA: the source holds prepared XA transactions while a copy
// that replication follows takes its snapshot. The snapshot cannot see
// their rows (they are not committed), and their prepare groups are in
// the binlog before the snapshot's position, where replication does not
// read: an XA COMMIT after the snapshot could not be applied exactly
// (docs/manual/apply.md, "Two-phase XA transactions").
var ErrPreparedXA = errors.New("prepared XA transactions on the source")

// preparedXAHint is the fix for ErrPreparedXA. Committing or rolling back
// on the source, or waiting for the application to do so, loses nothing:
// the copy has not started.
const preparedXAHint = "finish them on the source (XA COMMIT <xid> or XA ROLLBACK <xid>, as the application that prepared them decides) or wait until XA RECOVER shows none, then run again; nothing was copied"

// PreparedXA lists the source's prepared XA transactions (XA RECOVER),
// each as the XID literal XA COMMIT and XA ROLLBACK take on MariaDB
// (X'gtrid',X'bqual',formatID) or, where FORMAT='SQL' is unknown (MySQL),
// as XA RECOVER's data column. q is a *sql.DB or *sql.Conn.
func PreparedXA(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}) ([]string, error) {
	rows, err := q.QueryContext(ctx, "XA RECOVER FORMAT='SQL'")
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1064 {
		rows, err = q.QueryContext(ctx, "XA RECOVER")
	}
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var xids []string
	for rows.Next() {
		var format, gl, bl int64
		var data []byte
		if err := rows.Scan(&format, &gl, &bl, &data); err != nil {
			return nil, err
		}
		xids = append(xids, string(data))
	}
	return xids, rows.Err()
}

// PreparedXAError is the one-line refusal for xids on the source at addr.
func PreparedXAError(op string, xids []string) error {
	const most = 10
	list := strings.Join(xids[:min(len(xids), most)], ", ")
	if len(xids) > most {
		list += fmt.Sprintf(" and %d more", len(xids)-most)
	}
	return &sluice.Error{Op: op, Err: fmt.Errorf("%w (XA RECOVER): %s: a full copy followed by replication cannot start while a transaction is prepared, since its XA COMMIT could not be applied exactly", ErrPreparedXA, list), Hint: preparedXAHint}
}

// refusePreparedXA wraps the check that runs under the snapshot's global
// read lock: there no XA PREPARE can complete (it waits for the lock), so
// an empty XA RECOVER is exact for the snapshot's position. The refusal is
// kept in *refused as well, so that the caller returns it as it is (one
// line), not wrapped in the snapshot's own error.
func refusePreparedXA(ctx context.Context, cfg Config, unchanged func(*sql.Conn) (bool, error), refused *error) func(*sql.Conn) (bool, error) {
	return func(ctl *sql.Conn) (bool, error) {
		xids, err := PreparedXA(ctx, ctl)
		if err != nil {
			return false, fmt.Errorf("XA RECOVER: %w", err)
		}
		if len(xids) > 0 {
			*refused = PreparedXAError("dump: snapshot of source "+cfg.Source.Addr(), xids)
			return false, *refused
		}
		return unchanged(ctl)
	}
}

// xaLockHint names the prepared XA transactions after FLUSH TABLES WITH
// READ LOCK timed out: a statement that waits for a row lock of a
// prepared transaction holds the global read lock off until the
// transaction completes, which only its application can do. "" when there
// are none or XA RECOVER cannot be read.
func xaLockHint(ctx context.Context, ctl *sql.Conn) string {
	xids, err := PreparedXA(context.WithoutCancel(ctx), ctl)
	if err != nil || len(xids) == 0 {
		return ""
	}
	return fmt.Sprintf("; it may wait for row locks of prepared XA transactions, which only XA COMMIT or XA ROLLBACK releases (XA RECOVER: %s)", strings.Join(xids[:min(len(xids), 10)], ", "))
}
