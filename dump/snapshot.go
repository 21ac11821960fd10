package dump

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

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
//
// unchanged runs under the lock first: when it reports that the tables
// differ from what the caller read, nothing is started and the error is
// errSchemaChanged.
//
// underLock runs last under the lock, after the transactions started (it
// takes the non-transactional tables' read locks, see nontx.go).
//
// Every conn then opens every table that pin returns, still under the
// lock, so that its transaction holds their metadata locks until the dump
// ends: no DDL on them can complete in between. A snapshot read does not
// see a DDL: after an instant ALTER it reads the snapshot's rows through
// the new definition (a column dropped and added again reads as the new
// column's default), and after a RENAME it reads whatever table has the
// name now, both without an error. Every conn, not one: a conn that asks
// for a table's lock later queues behind a DDL that waits for the others,
// a wait no deadlock detector sees. So a DDL on a copied table waits for
// the dump to end (as with mysqldump and mydumper), and the dump never
// waits for a DDL.
func takeSnapshot(ctx context.Context, db *sql.DB, conns []*sql.Conn, cfg Config, unchanged func(*sql.Conn) (bool, error), pin func() []sluice.TableRef, underLock func(ctl *sql.Conn) error) (pos sluice.Position, err error) {
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
				hint := "a long-running statement or transaction holds a table; let it finish (SHOW PROCESSLIST) and run again"
				var lt *lockTimeout
				if errors.As(err, &lt) && lt.blocker != "" {
					hint = "a long-running statement holds the lock (" + lt.blocker + "); let it finish and run again"
				}
				return &sluice.Error{Op: "dump: " + what + " on source " + cfg.Source.Addr(), Err: fmt.Errorf("%w: lock wait timeout after %s", sluice.ErrUnreachable, cfg.LockWait), Hint: hint}
			}
		}
		return fmt.Errorf("dump: %s: %w", what, dbconn.Classify(err, "source", cfg.Source))
	}
	if err := globalReadLock(ctx, ctl, cfg); err != nil {
		return pos, fail("FLUSH TABLES WITH READ LOCK", err)
	}
	locked := true
	defer func() {
		if locked {
			// A fresh context: the unlock must happen even when ctx is done.
			_, _ = ctl.ExecContext(context.WithoutCancel(ctx), "UNLOCK TABLES")
		}
	}()
	if ok, err := unchanged(ctl); err != nil {
		return pos, fail("compare table definitions", err)
	} else if !ok {
		return pos, errSchemaChanged
	}
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
	tables := pin()
	for _, c := range conns {
		if err := pinTables(ctx, c, tables); err != nil {
			return pos, fail("open the tables in the snapshot", err)
		}
	}
	if err := underLock(ctl); err != nil {
		return pos, fail("LOCK TABLES ... READ on the non-transactional tables", err)
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

// pinTables opens tables in c's transaction, a statement per 100 tables,
// reading no row: the transaction keeps their metadata locks.
func pinTables(ctx context.Context, c *sql.Conn, tables []sluice.TableRef) error {
	for len(tables) > 0 {
		n := min(len(tables), 100)
		var b strings.Builder
		for i, t := range tables[:n] {
			if i > 0 {
				b.WriteString(" UNION ALL ")
			}
			b.WriteString("SELECT 1 FROM " + t.Quoted() + " WHERE 0")
		}
		rows, err := c.QueryContext(ctx, b.String())
		if err != nil {
			return err
		}
		if err := rows.Close(); err != nil {
			return err
		}
		tables = tables[n:]
	}
	return nil
}

// errSchemaChanged: a DDL changed the selected tables after they were read
// and before the snapshot.
var errSchemaChanged = errors.New("dump: the source's tables changed while the snapshot was taken")

// FTWRL attempts. While FLUSH TABLES WITH READ LOCK waits for the running
// statements to end, it already blocks every new write. A running
// statement may itself wait for a row lock of a transaction whose next
// statement is one of those blocked writes: a cycle across the server's
// lock kinds that no deadlock detector sees, broken only by a timeout
// (innodb_lock_wait_timeout, 50 s by default), with every write on the
// source stopped meanwhile. So each attempt waits briefly, and between
// attempts the writers run, which lets such a cycle resolve by itself.
const (
	lockAttempt  = time.Second
	lockPauseMin = 200 * time.Millisecond
	lockPauseMax = 3 * time.Second
)

// globalReadLock takes FLUSH TABLES WITH READ LOCK in short attempts until
// cfg.LockWait has passed. The last error names the statement that held it
// up longest, so the user knows what to wait for.
func globalReadLock(ctx context.Context, ctl *sql.Conn, cfg Config) error {
	secs := max(int(lockAttempt.Seconds()), 1)
	if _, err := ctl.ExecContext(ctx, fmt.Sprintf("SET SESSION lock_wait_timeout = %d", secs)); err != nil {
		return err
	}
	deadline := time.Now().Add(cfg.LockWait)
	pause := lockPauseMin
	for {
		_, err := ctl.ExecContext(ctx, "FLUSH TABLES WITH READ LOCK")
		var me *mysql.MySQLError
		if err == nil || !errors.As(err, &me) || me.Number != 1205 {
			return err
		}
		if time.Now().Add(pause).After(deadline) {
			return &lockTimeout{err: me, blocker: longestStatement(ctx, ctl) + xaLockHint(ctx, ctl)}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, lockPauseMax)
	}
}

// lockTimeout is FTWRL's last timeout and what most likely held it up.
type lockTimeout struct {
	err     *mysql.MySQLError
	blocker string
}

func (e *lockTimeout) Error() string { return e.err.Error() }
func (e *lockTimeout) Unwrap() error { return e.err }

// longestStatement describes the oldest running statement of another
// session, or "" when it cannot be read.
func longestStatement(ctx context.Context, ctl *sql.Conn) string {
	var id, secs int64
	var info string
	err := ctl.QueryRowContext(ctx, `SELECT ID, TIME, LEFT(IFNULL(INFO,''), 120) FROM information_schema.PROCESSLIST
		WHERE ID <> CONNECTION_ID() AND COMMAND NOT IN ('Sleep', 'Binlog Dump', 'Binlog Dump GTID', 'Daemon') AND INFO IS NOT NULL
		ORDER BY TIME DESC LIMIT 1`).Scan(&id, &secs, &info)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("connection %d, %d s: %s", id, secs, info)
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
