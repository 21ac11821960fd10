package dump

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/dbconn"
)

// snapshotHint names what the snapshot needs: RELOAD for FLUSH TABLES WITH
// READ LOCK (which holds every writer for the instant all connections
// start their transactions) and the privilege to read the binlog position.
const snapshotHint = "GRANT SELECT, RELOAD, LOCK TABLES, REPLICATION CLIENT ON *.* TO the source user (MariaDB 10.5+: BINLOG MONITOR instead of REPLICATION CLIENT)"

// takeSnapshot starts a consistent-snapshot transaction on every conn and
// returns the binlog position that snapshot corresponds to. A global read
// lock is held only while the transactions start and the position is read,
// so every connection sees the same committed data and the position is
// exactly where the incremental copy must begin.
func takeSnapshot(ctx context.Context, db *sql.DB, conns []*sql.Conn, cfg Config) (pos sluice.Position, err error) {
	ctl, err := db.Conn(ctx)
	if err != nil {
		return pos, dbconn.Classify(err, "source", cfg.Source)
	}
	defer ctl.Close()
	fail := func(what string, err error) error {
		var me *mysql.MySQLError
		if errors.As(err, &me) {
			switch me.Number {
			case 1227, 1142, 1044, 1045, 1370:
				return &sluice.Error{Op: "dump: " + what + " on source " + cfg.Source.Addr(), Err: fmt.Errorf("%w: %s", sluice.ErrPrivilege, me.Message), Hint: snapshotHint}
			case 1205:
				return &sluice.Error{Op: "dump: " + what + " on source " + cfg.Source.Addr(), Err: fmt.Errorf("%w: lock wait timeout after %s", sluice.ErrUnreachable, cfg.LockWait), Hint: "a long-running statement or transaction holds a table; let it finish (SHOW PROCESSLIST) and run again"}
			}
		}
		return fmt.Errorf("dump: %s: %w", what, dbconn.Classify(err, "source", cfg.Source))
	}
	secs := int(cfg.LockWait.Seconds())
	if secs < 1 {
		secs = 1
	}
	if _, err := ctl.ExecContext(ctx, fmt.Sprintf("SET SESSION lock_wait_timeout = %d", secs)); err != nil {
		return pos, fail("set lock_wait_timeout", err)
	}
	if _, err := ctl.ExecContext(ctx, "FLUSH TABLES WITH READ LOCK"); err != nil {
		return pos, fail("FLUSH TABLES WITH READ LOCK", err)
	}
	locked := true
	defer func() {
		if locked {
			// A fresh context: the unlock must happen even when ctx is done.
			_, _ = ctl.ExecContext(context.WithoutCancel(ctx), "UNLOCK TABLES")
		}
	}()
	for _, c := range conns {
		for _, q := range []string{
			"SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ",
			"START TRANSACTION WITH CONSISTENT SNAPSHOT",
		} {
			if _, err := c.ExecContext(ctx, q); err != nil {
				return pos, fail(q, err)
			}
		}
	}
	pos, err = readPosition(ctx, ctl)
	if err != nil {
		return pos, fail("read binlog position", err)
	}
	if _, err := ctl.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
		return pos, fail("UNLOCK TABLES", err)
	}
	locked = false
	return pos, nil
}

// readPosition reads SHOW MASTER STATUS and the flavour's GTID set. A source
// without a binlog has an empty position: the dump is still consistent but
// no incremental copy can follow it.
func readPosition(ctx context.Context, c *sql.Conn) (sluice.Position, error) {
	var pos sluice.Position
	var version string
	if err := c.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return pos, err
	}
	pos.Flavor = "mysql"
	if strings.Contains(strings.ToLower(version), "mariadb") {
		pos.Flavor = "mariadb"
	}
	rows, err := c.QueryContext(ctx, "SHOW MASTER STATUS")
	if err != nil {
		return pos, err
	}
	cols, _ := rows.Columns()
	if rows.Next() {
		vals := make([]sql.NullString, len(cols))
		dest := make([]any, len(cols))
		for i := range vals {
			dest[i] = &vals[i]
		}
		if err := rows.Scan(dest...); err != nil {
			rows.Close()
			return pos, err
		}
		pos.File = vals[0].String
		var p uint64
		fmt.Sscan(vals[1].String, &p)
		pos.Pos = uint32(p)
		// MySQL 5.6+ prints Executed_Gtid_Set as the fifth column.
		if pos.Flavor == "mysql" && len(vals) >= 5 {
			pos.GTIDSet = strings.ReplaceAll(vals[4].String, "\n", "")
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return pos, err
	}
	if pos.Flavor == "mariadb" {
		var g sql.NullString
		if err := c.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_binlog_pos").Scan(&g); err != nil {
			return pos, err
		}
		pos.GTIDSet = g.String
	}
	return pos, nil
}
