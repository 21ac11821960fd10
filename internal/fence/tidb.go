package fence

import (
	"context"
	"database/sql"
	"strings"
)

// namesHolder reports whether IS_USED_LOCK names the session holding a lock
// on this server, which liveHolder needs. MariaDB's does. TiDB's returns 1
// for a lock another session holds (its advisory locks are rows locked by
// an internal session, which knows no owner), and 1 may be a real idle
// session there: liveHolder would refuse a restart because of it. On TiDB
// the fence only waits (Wait): a live process holding the task's slots is
// then refused after the wait instead of at once.
func namesHolder(ctx context.Context, conn *sql.Conn) bool {
	var v string
	if err := conn.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
		return true // liveHolder reports the connection's trouble itself
	}
	return !strings.Contains(v, "-TiDB-")
}
