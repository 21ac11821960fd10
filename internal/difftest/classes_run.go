package difftest

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand"
	"strings"
	"time"
)

// killRestart kills sluice with SIGKILL and starts the same command again,
// under slMu so that the fault schedule and the classes never run two
// sluice processes at once. It does nothing if sluice stopped by itself.
func (s *seedRun) killRestart(ctx context.Context, what string) error {
	s.slMu.Lock()
	defer s.slMu.Unlock()
	if !s.sl.running() {
		return nil
	}
	s.sl.kill()
	s.res.Kills++
	mode := s.restartMode(ctx)
	s.out("kill -9 #%d %s; restart --mode %s", s.res.Kills, what, mode)
	return s.sl.start(mode)
}

// killAfterSeq waits until the target has applied the source's domain-0
// GTID seq (bounded: a stalled or stopped sluice is the final check's to
// judge), then kills sluice and restarts it. It reports whether it killed.
func (s *seedRun) killAfterSeq(ctx context.Context, seq int64, what string) bool {
	if s.cfg.Features.NoKills || seq < 0 || progress(ctx, s.e.DstDB, s.task) < 0 {
		return false // no kills, or the copy still runs: no wait that long
	}
	// Bounded: the target's checkpoint may rightly stay before a PREPARE
	// until its COMMIT comes (a prepared transaction held by sluice), and
	// the workload waits meanwhile. No kill then, rather than one placed
	// by a timer.
	deadline := time.Now().Add(5 * time.Second)
	for progress(ctx, s.e.DstDB, s.task) < seq || !s.sluiceRunning() {
		if ctx.Err() != nil || s.sl.exited() || time.Now().After(deadline) {
			s.w.logf("no kill %s: the checkpoint did not reach gtid seq %d", what, seq)
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := s.killRestart(ctx, fmt.Sprintf("at applied gtid seq %d %s", seq, what)); err != nil {
		s.res.fail("tester: %v", err)
		return false
	}
	return true
}

// ddlStep is the DDL slot between rounds: a class DDL (DDL under another
// session context, online-DDL helper names, a column swap) or a generic
// one; with the ddlkills class, sometimes followed by a kill -9 placed
// once the target shows the DDL's effect but its checkpoint has not moved.
func (s *seedRun) ddlStep(ctx context.Context, round int) error {
	c := s.w.cls
	r := rand.New(rand.NewSource(s.seed*9_000_011 + int64(round)*13 + 0xdd1))
	kill := r.Intn(2) == 0 && c.on[clsDDLKills] && !s.cfg.Features.NoKills
	classDDL := r.Intn(3) == 0
	var kinds []classID
	for _, id := range []classID{clsDDLSession, clsHelperNames, clsDDLKills} {
		if c.on[id] {
			kinds = append(kinds, id)
		}
	}
	var before map[string]string
	if kill {
		before = schemaDefs(ctx, s.e.SrcDB, s.schema)
	}
	var err error
	if classDDL && len(kinds) > 0 {
		err = s.w.classDDL(ctx, r, pick(r, kinds))
	} else {
		err = s.w.ddl(ctx, round)
	}
	if err != nil || !kill {
		return err
	}
	s.killAfterDDL(ctx, before)
	return nil
}

// killAfterDDL kills sluice between a DDL and its checkpoint, placed by
// observed progress: once every table the DDL changed on the source has
// the same definition on the target while the checkpoint is still before
// the DDL's end. Whether it landed is read back from the checkpoint after
// the kill. A DDL that changed no definition (refused by the source,
// TRUNCATE) places no kill.
func (s *seedRun) killAfterDDL(ctx context.Context, before map[string]string) {
	after := schemaDefs(ctx, s.e.SrcDB, s.schema)
	var changed []string
	for t, d := range after {
		if before[t] != d {
			changed = append(changed, t)
		}
	}
	for t := range before {
		if _, ok := after[t]; !ok {
			changed = append(changed, t)
		}
	}
	end, err := sourcePos(ctx, s.e.SrcDB)
	if err != nil || len(changed) == 0 {
		s.w.logf("ddl kill: no table definition changed (%v)", err)
		return
	}
	if _, ok, _ := appliedPos(ctx, s.e.DstDB, s.task); !ok {
		s.w.logf("ddl kill: the copy runs")
		return // the copy runs: its checkpoint is another class's (copy kills)
	}
	deadline := time.Now().Add(20 * time.Second)
	for ctx.Err() == nil && time.Now().Before(deadline) && !s.sl.exited() {
		if p, ok, _ := appliedPos(ctx, s.e.DstDB, s.task); ok && !p.less(end) {
			s.res.DDLKillsMissed++
			return
		}
		now := schemaDefs(ctx, s.e.DstDB, s.schema)
		same := true
		for _, t := range changed {
			if now[t] != after[t] {
				same = false
				break
			}
		}
		if same {
			s.slMu.Lock()
			if !s.sl.running() {
				s.slMu.Unlock()
				return
			}
			s.sl.kill()
			s.res.Kills++
			p, _, _ := appliedPos(ctx, s.e.DstDB, s.task)
			landed := p.less(end)
			if landed {
				s.res.DDLKills++
			} else {
				s.res.DDLKillsMissed++
			}
			mode := s.restartMode(ctx)
			s.out("kill -9 #%d after a DDL reached the target (%s), checkpoint %s, DDL ends at %s (in between: %v); restart --mode %s",
				s.res.Kills, strings.Join(changed, ","), p, end, landed, mode)
			err := s.sl.start(mode)
			s.slMu.Unlock()
			if err != nil {
				s.res.fail("tester: %v", err)
			}
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// schemaDefs is each table's definition (columns and keys) as
// information_schema shows it.
func schemaDefs(ctx context.Context, db *sql.DB, schema string) map[string]string {
	out := map[string]string{}
	for _, q := range []string{
		`SELECT TABLE_NAME, CONCAT_WS(' ', COLUMN_NAME, COLUMN_TYPE, IFNULL(COLLATION_NAME,'-'), IS_NULLABLE, IFNULL(COLUMN_DEFAULT,'-'))
			FROM information_schema.COLUMNS WHERE TABLE_SCHEMA=? ORDER BY TABLE_NAME, ORDINAL_POSITION`,
		`SELECT TABLE_NAME, CONCAT_WS(' ', INDEX_NAME, NON_UNIQUE, COLUMN_NAME) FROM information_schema.STATISTICS
			WHERE TABLE_SCHEMA=? ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX`,
	} {
		rows, err := db.QueryContext(ctx, q, schema)
		if err != nil {
			return out
		}
		for rows.Next() {
			var t, d string
			if rows.Scan(&t, &d) == nil {
				out[t] += d + ";"
			}
		}
		rows.Close()
	}
	return out
}

// stopDue reports whether the seed's stop class should fire now.
func (s *seedRun) stopDue(start time.Time) bool {
	c := s.w.cls
	if c.stop == nil || s.expect != nil || s.script != nil {
		return false
	}
	if time.Since(start) < time.Duration(c.stopAt*float64(s.cfg.Duration)) {
		return false
	}
	_, ok, _ := appliedPos(context.Background(), s.e.DstDB, s.task)
	return ok // after the copy: the stop must come from replication
}

// lateStop fires the seed's stop class once the copy is done, when the
// workload ended before it could fire (a slow copy).
func (s *seedRun) lateStop(ctx context.Context) {
	c := s.w.cls
	if c == nil || c.stop == nil || s.expect != nil {
		return
	}
	deadline := time.Now().Add(s.cfg.CatchUp)
	for ctx.Err() == nil && !s.sl.exited() && time.Now().Before(deadline) {
		if _, ok, _ := appliedPos(ctx, s.e.DstDB, s.task); ok {
			s.fireStop(ctx)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.out("stop class %s did not fire: the copy did not end", c.stop.name)
}

// fireStop makes the seed's expected stop happen: a statement-format or
// mixed-format session writes on the source, or sluice is killed, the
// source's triggers are put on the target and sluice restarted. From then
// on the seed passes only if sluice stops with the class's message.
func (s *seedRun) fireStop(ctx context.Context) {
	sc := s.w.cls.stop
	switch sc.name {
	case "statement", "mixed":
		conn, err := s.e.SrcDB.Conn(ctx)
		if err != nil {
			return
		}
		defer discard(conn)
		if _, err := conn.ExecContext(ctx, "SET SESSION binlog_format="+strings.ToUpper(sc.name)); err != nil {
			s.res.fail("tester: set binlog_format: %v", err)
			return
		}
		// Deterministic statements, logged as statements in either format.
		n := 0
		for _, q := range []string{"UPDATE {s}.k_sf SET v = v + 10 WHERE id <= 2", "INSERT INTO {s}.k_sf VALUES (100, 7)", "DELETE FROM {s}.k_sf WHERE id = 3"} {
			if _, err := conn.ExecContext(ctx, s.w.sq(q)); err == nil {
				n++
			}
		}
		if n == 0 {
			s.res.fail("tester: the %s-format statements all failed on the source", sc.name)
			return
		}
		s.out("stop class %s: %d statements in a %s-format session; sluice must stop", sc.name, n, strings.ToUpper(sc.name))
	case "sequence", "sysversioned":
		stmts := []string{"CREATE SEQUENCE {s}.k_seqs", "CREATE TABLE {s}.k_sqs (id BIGINT NOT NULL DEFAULT NEXTVAL({s}.k_seqs) PRIMARY KEY, v INT)",
			"INSERT INTO {s}.k_sqs (v) VALUES (1), (2)"}
		if sc.name == "sysversioned" {
			stmts = []string{"CREATE TABLE {s}.k_svs (id INT PRIMARY KEY, v INT) WITH SYSTEM VERSIONING",
				"INSERT INTO {s}.k_svs VALUES (1, 1), (2, 2)", "UPDATE {s}.k_svs SET v = v + 1"}
		}
		for i, q := range stmts {
			if _, err := s.e.SrcDB.ExecContext(ctx, s.w.sq(q)); err != nil {
				if ctx.Err() != nil {
					// sluice stopped (on the first statement, the refused
					// one, seed 2883; or before it, on a documented stop,
					// seed 2839) and the workload ended: the stop decides
					// the seed, not this statement.
					if i == 0 {
						return
					}
					break
				}
				s.res.fail("tester: %s: %v", s.w.sq(q), err)
				return
			}
		}
		s.out("stop class %s: %s; sluice must stop", sc.name, s.w.sq(stmts[0]))
	case "target-triggers":
		s.slMu.Lock()
		defer s.slMu.Unlock()
		if !s.sl.running() {
			return
		}
		s.sl.kill()
		s.res.Kills++
		var stmts []string
		if s.w.cls.created[clsTriggers] {
			stmts = triggerDDL()
		} else {
			ts, _ := listTables(ctx, s.e.DstDB, s.schema)
			var plain []string
			for _, t := range ts {
				if !isClassTable(t) && t != "zz_end" {
					plain = append(plain, t)
				}
			}
			if len(plain) == 0 {
				plain = []string{"zz_end"}
			}
			stmts = []string{"CREATE TRIGGER {s}.k_tt BEFORE INSERT ON {s}.`" + plain[0] + "` FOR EACH ROW SET @k_tt = 1"}
		}
		for _, q := range stmts {
			if _, err := s.e.DstDB.ExecContext(ctx, s.w.sq(q)); err != nil {
				s.out("stop class %s: could not create the trigger on the target (%v); no stop expected", sc.name, err)
				if err := s.sl.start(s.restartMode(ctx)); err != nil {
					s.res.fail("tester: %v", err)
				}
				return
			}
		}
		s.out("kill -9 #%d; stop class %s: %d triggers on the target; restart, which must refuse", s.res.Kills, sc.name, len(stmts))
		if err := s.sl.start(s.restartMode(ctx)); err != nil {
			s.res.fail("tester: %v", err)
			return
		}
	}
	s.expect = sc
}
