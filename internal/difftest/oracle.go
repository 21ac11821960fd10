package difftest

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// The oracle is a stock MariaDB replica of the source, started with the
// Env before any seed writes anything: CHANGE MASTER ... MASTER_USE_GTID=
// slave_pos and the server's defaults otherwise (foreign_key_checks on,
// slave_run_triggers_for_rbr=NO, one applier thread). It replicates the
// whole of the source's binlog from its first event, so every seed's
// schema exists on it exactly as a native replica would have it, without
// a snapshot to seed. At the end of a seed the target must equal the
// source and the native replica; where the native replica itself differs
// from the source, the generator produced something a native replica
// does not reproduce, and that is reported apart (Result.OracleDiffs).

// startReplica points the replica sandbox at the source and starts it.
func (e *Env) startReplica(ctx context.Context) error {
	for _, q := range []string{
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=%d, MASTER_USER='root', MASTER_PASSWORD='', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1", e.Src.Port),
		"START SLAVE",
	} {
		if _, err := e.RepDB.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("native replica: %s: %w", q, err)
		}
	}
	return nil
}

// replicaState reads SHOW SLAVE STATUS: whether both threads run, and the
// last error of either.
func replicaState(ctx context.Context, db *sql.DB) (running bool, lastErr string, err error) {
	rows, err := db.QueryContext(ctx, "SHOW SLAVE STATUS")
	if err != nil {
		return false, "", err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return false, "", err
	}
	if !rows.Next() {
		return false, "no replication configured", rows.Err()
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return false, "", err
	}
	get := func(name string) string {
		for i, c := range cols {
			if c == name {
				return vals[i].String
			}
		}
		return ""
	}
	// The IO thread says "Connecting" while it (re)connects: still running.
	running = get("Slave_IO_Running") != "No" && get("Slave_SQL_Running") == "Yes"
	var errs []string
	for _, c := range []string{"Last_SQL_Error", "Last_IO_Error"} {
		if v := get(c); v != "" {
			errs = append(errs, v)
		}
	}
	return running, strings.Join(errs, "; "), nil
}

// prepareOracle makes sure the native replica runs before the seed writes
// anything. A replica that a previous seed stopped (its seed reported it)
// is re-pointed at the source's current position: the earlier seeds'
// schemas on it do not matter, only this seed's, which starts empty.
func (s *seedRun) prepareOracle(ctx context.Context) error {
	running, lastErr, err := replicaState(ctx, s.e.RepDB)
	if err != nil {
		return fmt.Errorf("native replica: %w", err)
	}
	if running {
		return nil
	}
	if lastErr == "" {
		lastErr = "no error"
	}
	s.out("native replica was stopped (%s); re-pointed at the source's current position", lastErr)
	var pos string
	if err := s.e.SrcDB.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_binlog_pos").Scan(&pos); err != nil {
		return err
	}
	conn, err := s.e.RepDB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, q := range []string{
		"STOP SLAVE",
		// Local fixes stay out of the replica's binlog: gtid_strict_mode
		// would refuse the source's later GTIDs after a local one.
		"SET SESSION sql_log_bin=0",
		"DROP DATABASE IF EXISTS `" + s.schema + "`",
		"SET GLOBAL gtid_slave_pos='" + pos + "'",
		"START SLAVE",
		"SET SESSION sql_log_bin=1",
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("native replica: %s: %w", q, err)
		}
	}
	return nil
}

// waitReplica waits until the native replica has applied everything the
// source has logged, bounded by cfg.CatchUp. It returns false (and
// records why) when the replica stopped or did not get there.
func (s *seedRun) waitReplica(ctx context.Context) bool {
	var pos string
	if err := s.e.SrcDB.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_binlog_pos").Scan(&pos); err != nil {
		s.res.oracle("read the source's gtid_binlog_pos: %v", err)
		return false
	}
	deadline := time.Now().Add(s.cfg.CatchUp)
	for {
		var r sql.NullInt64
		if err := s.e.RepDB.QueryRowContext(ctx, "SELECT MASTER_GTID_WAIT(?, 1)", pos).Scan(&r); err == nil && r.Valid && r.Int64 == 0 {
			return true
		}
		running, lastErr, err := replicaState(ctx, s.e.RepDB)
		if err == nil && !running {
			s.res.oracle("the native replica stopped: %s", lastErr)
			return false
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			var at string
			_ = s.e.RepDB.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_slave_pos").Scan(&at)
			s.res.oracle("the native replica did not reach the source's %s within %s (at %s)", pos, s.cfg.CatchUp, at)
			return false
		}
	}
}

// checkOracle compares the native replica with the source (differences
// are the oracle's, reported apart) and, when sluice's target was
// compared (withTarget), the target with the native replica: a
// difference there fails the seed.
func (s *seedRun) checkOracle(ctx context.Context, withTarget bool) error {
	if !s.cfg.Oracle || s.e.RepDB == nil {
		return nil
	}
	if !s.waitReplica(ctx) {
		return nil
	}
	diffs, err := compare(ctx, s.e.SrcDB, s.e.RepDB, s.schema, "source", "native replica")
	if err != nil {
		return fmt.Errorf("seed %d: compare with the native replica: %w", s.seed, err)
	}
	for _, d := range diffs {
		s.res.oracle("%s", d)
	}
	if !withTarget {
		return nil
	}
	diffs, err = compare(ctx, s.e.RepDB, s.e.DstDB, s.schema, "native replica", "target")
	if err != nil {
		return fmt.Errorf("seed %d: compare with the native replica: %w", s.seed, err)
	}
	for _, d := range diffs {
		s.res.fail("target differs from the native replica: %s", d)
	}
	return nil
}
