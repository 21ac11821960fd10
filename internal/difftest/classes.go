package difftest

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/rand"
	"regexp"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// The generator classes of issue 29: workload shapes outside the generic
// DML/DDL generator (FK trees, triggers, XA, savepoints, sequences...).
// Each class is drawn on or off per seed, from a random stream of its own
// (so the generic workload of a seed is the same with or without them),
// and each has a Features switch that keeps it off. A class works on its
// own tables, named k_*, which the generic generator leaves alone.
type classID int

const (
	clsFK classID = iota
	clsTriggers
	clsXA
	clsSavepoints
	clsSequences
	clsSysVersioned
	clsCheck
	clsDDLSession
	clsHelperNames
	clsDDLKills
	nClasses
)

// classInfo names each class, its chance (in %) to be on in a seed, and
// its switch.
var classInfo = [nClasses]struct {
	name   string
	weight int
	off    func(Features) bool
}{
	clsFK:           {"fk", 50, func(f Features) bool { return f.NoFK }},
	clsTriggers:     {"triggers", 40, func(f Features) bool { return f.NoTriggers }},
	clsXA:           {"xa", 50, func(f Features) bool { return f.NoXA }},
	clsSavepoints:   {"savepoints", 40, func(f Features) bool { return f.NoSavepoints }},
	clsSequences:    {"sequences", 35, func(f Features) bool { return f.NoSequences }},
	clsSysVersioned: {"sysversioned", 35, func(f Features) bool { return f.NoSysVersioned }},
	clsCheck:        {"check", 40, func(f Features) bool { return f.NoCheckOff }},
	clsDDLSession:   {"ddlsession", 40, func(f Features) bool { return f.NoDDLSession }},
	clsHelperNames:  {"helpernames", 35, func(f Features) bool { return f.NoHelperNames }},
	clsDDLKills:     {"ddlkills", 40, func(f Features) bool { return f.NoDDLKills }},
}

// stopClass is a class whose documented outcome is that sluice refuses
// the task: the seed passes only when sluice exits non-zero and the end
// of its log matches pattern. Such a class fires once, at a random moment
// late in the seed, and ends the workload, so the seed has tested data
// replication until then.
type stopClass struct {
	name    string
	pattern *regexp.Regexp
	off     func(Features) bool
}

// refusals is the table of expected stops and the message each must give.
// The patterns are the documented refusals (docs/manual/apply.md,
// fullcopy.md): a statement-format or mixed-format event, triggers on
// target tables, a sequence, a system-versioned table.
var refusals = []stopClass{
	{"statement", regexp.MustCompile(`(?i)(statement|mixed)[ -]?(format|based)|binlog_format`), func(f Features) bool { return f.NoStatementFormat }},
	{"mixed", regexp.MustCompile(`(?i)(statement|mixed)[ -]?(format|based)|binlog_format`), func(f Features) bool { return f.NoStatementFormat }},
	{"target-triggers", regexp.MustCompile(`(?i)trigger`), func(f Features) bool { return f.NoTargetTriggers }},
	// A sequence is refused in the stream, or, when a kill restarts sluice
	// after the class made its table, by the restart's check (seed 2850).
	{"sequence", regexp.MustCompile(`(?i)replicates no sequence|defaults to NEXT VALUE FOR .*sluice copies no sequence`), func(f Features) bool { return f.NoSequenceStop }},
	{"sysversioned", regexp.MustCompile(`(?i)replicates no system-versioned|WITH SYSTEM VERSIONING`), func(f Features) bool { return f.NoSysVersionedStop }},
}

// seedClasses is what a seed drew.
type seedClasses struct {
	on      [nClasses]bool
	early   [nClasses]bool // its tables exist before the copy (else created in the stream)
	created [nClasses]bool
	stop    *stopClass
	stopAt  float64 // fraction of the duration after which the stop fires
}

func isClassTable(name string) bool { return strings.HasPrefix(name, "k_") }

// drawClasses draws the seed's classes. Every number is drawn whatever the
// switches say, so a switch changes nothing but its own class.
func drawClasses(seed int64, f Features) *seedClasses {
	r := rand.New(rand.NewSource(seed ^ 0xc1a55e5))
	c := &seedClasses{}
	for i := range classInfo {
		x, early := r.Intn(100), r.Intn(2) == 0
		c.on[i] = !f.NoClasses && !classInfo[i].off(f) && x < classInfo[i].weight
		c.early[i] = early
	}
	x, which, at := r.Intn(100), r.Intn(len(refusals)), 0.5+0.4*r.Float64()
	if sc := &refusals[which]; x < 30 && !f.NoClasses && !sc.off(f) {
		c.stop, c.stopAt = sc, at
	}
	return c
}

// names lists the classes that are on, for the seed's summary line.
func (c *seedClasses) names() []string {
	var out []string
	for i := range classInfo {
		if c.on[i] {
			out = append(out, classInfo[i].name)
		}
	}
	if c.stop != nil {
		out = append(out, "stop:"+c.stop.name)
	}
	return out
}

// classTables returns the statements that create a class's tables (and
// rows for them), with {s} for the schema.
func classTables(id classID) []string {
	switch id {
	case clsFK:
		// Three levels: k_fp <- k_fc <- k_fg, and k_fn (SET NULL) and
		// k_fr (RESTRICT) under k_fp.
		return []string{
			"CREATE TABLE {s}.k_fp (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
			"CREATE TABLE {s}.k_fc (id INT PRIMARY KEY, pid INT, v INT, KEY (pid), CONSTRAINT k_fc_p FOREIGN KEY (pid) REFERENCES {s}.k_fp (id) ON DELETE CASCADE ON UPDATE CASCADE) ENGINE=InnoDB",
			"CREATE TABLE {s}.k_fn (id INT PRIMARY KEY, pid INT NULL, v INT, CONSTRAINT k_fn_p FOREIGN KEY (pid) REFERENCES {s}.k_fp (id) ON DELETE SET NULL ON UPDATE SET NULL) ENGINE=InnoDB",
			"CREATE TABLE {s}.k_fg (id INT PRIMARY KEY, cid INT, v INT, CONSTRAINT k_fg_c FOREIGN KEY (cid) REFERENCES {s}.k_fc (id) ON DELETE CASCADE ON UPDATE CASCADE) ENGINE=InnoDB",
			"CREATE TABLE {s}.k_fr (id INT PRIMARY KEY, pid INT, CONSTRAINT k_fr_p FOREIGN KEY (pid) REFERENCES {s}.k_fp (id) ON DELETE RESTRICT ON UPDATE RESTRICT) ENGINE=InnoDB",
			"INSERT INTO {s}.k_fp VALUES (1,1),(2,2),(3,3),(4,4),(5,5),(6,6)",
			"INSERT INTO {s}.k_fc VALUES (1,1,1),(2,1,2),(3,2,3),(4,3,4),(5,5,5)",
			"INSERT INTO {s}.k_fn VALUES (1,1,1),(2,2,2),(3,3,3),(4,6,4)",
			"INSERT INTO {s}.k_fg VALUES (1,1,1),(2,2,2),(3,4,3)",
			"INSERT INTO {s}.k_fr VALUES (1,6)",
		}
	case clsTriggers:
		return append([]string{
			"CREATE TABLE {s}.k_tr (id INT PRIMARY KEY, v INT)",
			"CREATE TABLE {s}.k_trlog (id INT AUTO_INCREMENT PRIMARY KEY, tid INT, op CHAR(1), v INT)",
		}, append(triggerDDL(), "INSERT INTO {s}.k_tr VALUES (1,1),(2,2),(3,3)")...)
	case clsXA:
		return []string{"CREATE TABLE {s}.k_xa (id INT PRIMARY KEY, v INT)", "INSERT INTO {s}.k_xa VALUES (1,1),(2,2)"}
	case clsSavepoints:
		return []string{"CREATE TABLE {s}.k_sp (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
			"CREATE TABLE {s}.k_spa (id INT PRIMARY KEY, v INT) ENGINE=Aria",
			"INSERT INTO {s}.k_sp VALUES (1,1)"}
	case clsSequences:
		return []string{"CREATE SEQUENCE {s}.k_seq START WITH 1 INCREMENT BY 3 CACHE 5",
			"CREATE TABLE {s}.k_sq (id BIGINT NOT NULL DEFAULT NEXTVAL({s}.k_seq) PRIMARY KEY, v INT)",
			"INSERT INTO {s}.k_sq (v) VALUES (1),(2),(3)"}
	case clsSysVersioned:
		return []string{"CREATE TABLE {s}.k_sv (id INT PRIMARY KEY, v INT, w VARCHAR(10)) WITH SYSTEM VERSIONING",
			"INSERT INTO {s}.k_sv VALUES (1,1,'a'),(2,2,'b')", "UPDATE {s}.k_sv SET v = v + 1 WHERE id = 1"}
	case clsCheck:
		return []string{"CREATE TABLE {s}.k_ck (id INT PRIMARY KEY, v INT CHECK (v >= 0), w VARCHAR(10), CONSTRAINT k_ck_w CHECK (w <> 'bad'))",
			"INSERT INTO {s}.k_ck VALUES (1,1,'a')"}
	case clsDDLSession:
		return []string{"CREATE TABLE {s}.k_ds (id INT PRIMARY KEY, v INT)", "INSERT INTO {s}.k_ds VALUES (1,1)"}
	}
	return nil
}

// triggerDDL is the source's triggers of the triggers class; the
// target-triggers stop puts the same ones on the target.
func triggerDDL() []string {
	return []string{
		"CREATE TRIGGER {s}.k_tr_ai AFTER INSERT ON {s}.k_tr FOR EACH ROW INSERT INTO {s}.k_trlog (tid, op, v) VALUES (NEW.id, 'i', NEW.v)",
		"CREATE TRIGGER {s}.k_tr_bu BEFORE UPDATE ON {s}.k_tr FOR EACH ROW SET NEW.v = NEW.v + 100",
		"CREATE TRIGGER {s}.k_tr_ad AFTER DELETE ON {s}.k_tr FOR EACH ROW INSERT INTO {s}.k_trlog (tid, op, v) VALUES (OLD.id, 'd', OLD.v)",
	}
}

func (w *workload) sq(q string) string { return strings.ReplaceAll(q, "{s}", "`"+w.schema+"`") }

// createClass creates a class's tables. A statement the source refuses is
// a tester error: these definitions are fixed.
func (w *workload) createClass(ctx context.Context, id classID) error {
	for _, q := range classTables(id) {
		if _, err := w.db.ExecContext(ctx, w.sq(q)); err != nil {
			return fmt.Errorf("class %s: %s: %w", classInfo[id].name, w.sq(q), err)
		}
	}
	w.cls.created[id] = true
	if len(classTables(id)) > 0 {
		w.logf("class %s: tables created", classInfo[id].name)
	}
	return nil
}

// setupClasses creates the tables of the classes drawn "early", before the
// copy starts, and the table of a statement-format stop.
func (w *workload) setupClasses(ctx context.Context) error {
	w.kid.Store(100) // above the ids of the classes' first rows
	for id := classID(0); id < nClasses; id++ {
		// Without DDL in the stream, every class's tables come first.
		if w.cls.on[id] && (w.cls.early[id] || w.f.NoDDL) {
			if err := w.createClass(ctx, id); err != nil {
				return err
			}
		}
	}
	if w.cls.stop != nil && (w.cls.stop.name == "statement" || w.cls.stop.name == "mixed") {
		for _, q := range []string{"CREATE TABLE {s}.k_sf (id INT PRIMARY KEY, v INT)", "INSERT INTO {s}.k_sf VALUES (1,1),(2,2),(3,3)"} {
			if _, err := w.db.ExecContext(ctx, w.sq(q)); err != nil {
				return err
			}
		}
	}
	return nil
}

// classRound runs the classes' share of a round, on one connection next
// to the generic workers: the tables of late classes are created in the
// stream first (once DDL may run), then 1-3 class transactions.
func (w *workload) classRound(ctx context.Context, round int) {
	r := rand.New(rand.NewSource(w.seed*7_000_003 + int64(round)*31 + 0xc1a))
	var live []classID
	for id := classID(0); id < nClasses; id++ {
		if !w.cls.on[id] || classTables(id) == nil || (id == clsXA && !w.xaOK.Load()) {
			continue
		}
		if !w.cls.created[id] {
			if !w.ddlOK.Load() {
				continue
			}
			if err := w.createClass(ctx, id); err != nil {
				w.logf("%v", err)
				continue
			}
		}
		live = append(live, id)
	}
	if len(live) == 0 {
		return
	}
	for i, n := 0, 1+r.Intn(3); i < n && ctx.Err() == nil; i++ {
		w.classTxn(ctx, r, pick(r, live))
	}
}

// run runs statements on one connection, each counted; the source decides.
func (w *workload) run(ctx context.Context, conn *sql.Conn, stmts ...string) bool {
	ok := true
	for _, q := range stmts {
		w.stmts.Add(1)
		if _, err := conn.ExecContext(ctx, w.sq(q)); err != nil {
			w.failed.Add(1)
			w.logf("class statement (source refused: %v): %s", err, q)
			var me *mysql.MySQLError
			if errors.As(err, &me) && me.Number == 1205 {
				w.logBlockers(ctx)
			}
			ok = false
		}
	}
	return ok
}

// logBlockers logs (with -v) the source's open transactions after a lock
// wait timeout, to tell a tester leak from a server's choice.
func (w *workload) logBlockers(ctx context.Context) {
	rows, err := w.db.QueryContext(ctx, "SELECT CONCAT_WS(' ', trx_id, trx_state, trx_started, IFNULL(trx_mysql_thread_id, '-'), IFNULL(trx_query, '-')) FROM information_schema.INNODB_TRX")
	if err != nil {
		return
	}
	defer rows.Close()
	for rows.Next() {
		var t string
		if rows.Scan(&t) == nil {
			w.logf("  open transaction on the source: %s", t)
		}
	}
	xr, err := w.db.QueryContext(ctx, "XA RECOVER")
	if err != nil {
		return
	}
	defer xr.Close()
	for xr.Next() {
		var format, gl, bl int
		var data string
		if xr.Scan(&format, &gl, &bl, &data) == nil {
			w.logf("  prepared XA on the source: %s", data)
		}
	}
}

// discard closes a connection instead of returning it to the pool: its
// session state (binlog_format, sql_mode, character set, a prepared XA
// transaction) must not leak into other statements.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}

func (w *workload) classTxn(ctx context.Context, r *rand.Rand, id classID) {
	conn, err := w.db.Conn(ctx)
	if err != nil {
		return
	}
	defer discard(conn)
	k := func(n int) int { return 1 + r.Intn(n) }
	switch id {
	case clsFK:
		w.fkTxn(ctx, conn, r)
	case clsTriggers:
		switch r.Intn(3) {
		case 0:
			w.run(ctx, conn, fmt.Sprintf("INSERT INTO {s}.k_tr VALUES (%d, %d)", k(30), k(9)))
		case 1:
			w.run(ctx, conn, fmt.Sprintf("UPDATE {s}.k_tr SET v = %d WHERE id <= %d", k(9), k(30)))
		default:
			w.run(ctx, conn, fmt.Sprintf("DELETE FROM {s}.k_tr WHERE id = %d", k(30)))
		}
	case clsXA:
		w.xaTxn(ctx, conn, r)
	case clsSavepoints:
		a, b, c := w.kid.Add(1), w.kid.Add(1), w.kid.Add(1)
		stmts := []string{"BEGIN", fmt.Sprintf("INSERT INTO {s}.k_sp VALUES (%d, 1)", a), "SAVEPOINT s1",
			fmt.Sprintf("INSERT INTO {s}.k_sp VALUES (%d, 2)", b), fmt.Sprintf("UPDATE {s}.k_sp SET v = v + 1 WHERE id = %d", k(int(a))),
		}
		if r.Intn(4) != 0 {
			stmts = append(stmts, fmt.Sprintf("INSERT INTO {s}.k_spa VALUES (%d, 3)", c))
		}
		stmts = append(stmts, "ROLLBACK TO SAVEPOINT s1", fmt.Sprintf("INSERT IGNORE INTO {s}.k_sp VALUES (%d, 4)", c))
		if r.Intn(5) == 0 {
			stmts = append(stmts, "ROLLBACK")
		} else {
			stmts = append(stmts, "COMMIT")
		}
		w.run(ctx, conn, stmts...)
	case clsSequences:
		switch r.Intn(4) {
		case 0:
			w.run(ctx, conn, "SELECT NEXTVAL({s}.k_seq)")
		case 1:
			w.run(ctx, conn, fmt.Sprintf("DELETE FROM {s}.k_sq WHERE id %% %d = 0", 2+r.Intn(4)))
		default:
			w.run(ctx, conn, fmt.Sprintf("INSERT INTO {s}.k_sq (v) VALUES (%d), (%d)", k(9), k(9)))
		}
	case clsSysVersioned:
		switch r.Intn(3) {
		case 0:
			w.run(ctx, conn, fmt.Sprintf("INSERT INTO {s}.k_sv VALUES (%d, %d, 'x') ON DUPLICATE KEY UPDATE v = v + 1", k(20), k(9)))
		case 1:
			w.run(ctx, conn, fmt.Sprintf("UPDATE {s}.k_sv SET w = '%c' WHERE id <= %d", 'a'+r.Intn(26), k(20)))
		default:
			w.run(ctx, conn, fmt.Sprintf("DELETE FROM {s}.k_sv WHERE id = %d", k(20)))
		}
	case clsCheck:
		if r.Intn(3) == 0 {
			// Rows that break the constraints, written with the checks
			// off: the source keeps them, and so does a native replica.
			w.run(ctx, conn, "SET SESSION check_constraint_checks=0",
				fmt.Sprintf("INSERT INTO {s}.k_ck VALUES (%d, -%d, 'bad') ON DUPLICATE KEY UPDATE v = -1", k(20), k(9)))
		} else {
			w.run(ctx, conn, fmt.Sprintf("INSERT INTO {s}.k_ck VALUES (%d, %d, 'ok') ON DUPLICATE KEY UPDATE w = 'up'", k(20), k(9)))
		}
	case clsDDLSession:
		// Rows that take the columns' defaults, which the class's DDL
		// wrote under another sql_mode or character set.
		w.run(ctx, conn, fmt.Sprintf("INSERT IGNORE INTO {s}.k_ds (id) VALUES (%d)", w.kid.Add(1)+1000))
	}
}

// fkTxn changes the FK tree: child rows (some orphans the source
// refuses), parent deletes, key updates and REPLACEs that cascade.
func (w *workload) fkTxn(ctx context.Context, conn *sql.Conn, r *rand.Rand) {
	k := func(n int) int { return 1 + r.Intn(n) }
	var stmts []string
	for i, n := 0, 1+r.Intn(3); i < n; i++ {
		switch r.Intn(9) {
		case 0:
			stmts = append(stmts, fmt.Sprintf("INSERT IGNORE INTO {s}.k_fp VALUES (%d, %d), (%d, %d)", k(12), k(9), k(12), k(9)))
		case 1:
			stmts = append(stmts, fmt.Sprintf("INSERT INTO {s}.k_fc VALUES (%d, %d, %d)", k(20), k(12), k(9)))
		case 2:
			stmts = append(stmts, fmt.Sprintf("INSERT IGNORE INTO {s}.k_fn VALUES (%d, %d, %d)", k(20), k(12), k(9)))
		case 3:
			stmts = append(stmts, fmt.Sprintf("INSERT IGNORE INTO {s}.k_fg VALUES (%d, %d, %d)", k(20), k(20), k(9)))
		case 4:
			stmts = append(stmts, fmt.Sprintf("INSERT IGNORE INTO {s}.k_fr VALUES (%d, %d)", k(20), k(12)))
		case 5:
			stmts = append(stmts, fmt.Sprintf("DELETE FROM {s}.k_fp WHERE id IN (%d, %d, %d)", k(12), k(12), k(12)))
		case 6:
			stmts = append(stmts, fmt.Sprintf("UPDATE {s}.k_fp SET id = id + 1000 WHERE id = %d", k(12)),
				fmt.Sprintf("UPDATE {s}.k_fp SET id = id - 1000 WHERE id > 1000 AND id - 1000 <> %d", k(12)))
		case 7:
			stmts = append(stmts, fmt.Sprintf("REPLACE INTO {s}.k_fp VALUES (%d, %d)", k(12), k(9)))
		default:
			stmts = append(stmts, fmt.Sprintf("DELETE FROM {s}.k_fc WHERE id = %d", k(20)),
				fmt.Sprintf("UPDATE {s}.k_fc SET id = id + 100 WHERE id = %d", k(20)))
		}
	}
	if len(stmts) == 1 {
		w.run(ctx, conn, stmts[0])
		return
	}
	w.run(ctx, conn, append(append([]string{"BEGIN"}, stmts...), "COMMIT")...)
}

// xaTxn runs one XA transaction: two phases committed or rolled back by
// the same session or by another one after the first disconnected, or
// one phase; sometimes sluice is killed while it is prepared.
func (w *workload) xaTxn(wctx context.Context, conn *sql.Conn, r *rand.Rand) {
	// Once started, the transaction is always finished, even when the
	// workload's time is up: a prepared XA transaction left behind would
	// hold its locks (and block the schema's DROP) for good.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(wctx), time.Minute)
	defer cancel()
	xid := fmt.Sprintf("'dt%d_%d'", w.seed, w.kid.Add(1))
	a := w.kid.Add(1)
	body := []string{"XA START " + xid,
		fmt.Sprintf("INSERT INTO {s}.k_xa VALUES (%d, 1)", a),
		fmt.Sprintf("UPDATE {s}.k_xa SET v = v + 1 WHERE id <= %d", 1+r.Intn(int(a))),
		"XA END " + xid}
	mode := r.Intn(6)
	if !w.run(ctx, conn, body...) {
		w.run(ctx, conn, "XA END "+xid, "XA ROLLBACK "+xid)
		return
	}
	if mode == 0 {
		w.run(ctx, conn, "XA COMMIT "+xid+" ONE PHASE")
		return
	}
	w.logf("xa %s: mode %d", xid, mode)
	if !w.run(ctx, conn, "XA PREPARE "+xid) {
		w.run(ctx, conn, "XA ROLLBACK "+xid)
		return
	}
	end := "XA COMMIT " + xid
	if mode == 1 || mode == 4 {
		end = "XA ROLLBACK " + xid
	}
	if mode <= 2 {
		w.run(ctx, conn, end)
		return
	}
	// From another session: the preparing one disconnects first (a
	// prepared XA transaction survives it).
	discard(conn)
	if mode == 5 && w.killAfter != nil {
		var seq int64
		var pos string
		if w.db.QueryRowContext(ctx, "SELECT @@GLOBAL.gtid_binlog_pos").Scan(&pos) == nil {
			seq = domain0Seq(pos)
		}
		w.killAfter(wctx, seq, "with an XA transaction prepared")
	}
	c2, err := w.db.Conn(ctx)
	if err != nil {
		return
	}
	defer discard(c2)
	// The server detaches the prepared transaction from the closed
	// session asynchronously: wait until XA RECOVER lists it.
	// Under load that can take seconds; the wait ends as soon as it is
	// listed (ctx bounds it at a minute).
	waitFrom := time.Now()
	for ctx.Err() == nil && !xaRecovered(ctx, c2, strings.Trim(xid, "'")) {
		time.Sleep(10 * time.Millisecond)
	}
	if d := time.Since(waitFrom); d > time.Second {
		w.logf("xa: %s was listed by XA RECOVER %s after its session closed", xid, d.Round(time.Millisecond))
	}
	// XA RECOVER can list the transaction while the closing session still
	// holds it (XAER_NOTA for a moment): try again while it is listed.
	w.stmts.Add(1)
	for {
		_, err := c2.ExecContext(ctx, end)
		if err == nil {
			return
		}
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1397 && ctx.Err() == nil && xaRecovered(ctx, c2, strings.Trim(xid, "'")) {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		w.failed.Add(1)
		w.logf("class statement (source refused: %v): %s", err, end)
		// The tester must not leave a prepared transaction behind.
		_, _ = c2.ExecContext(context.Background(), "XA ROLLBACK "+xid)
		return
	}
}

// xaCleanup rolls back any XA transaction of this seed still prepared on
// the source (a safety net: xaTxn finishes its own), so that nothing
// holds the seed's rows or schema after the workload.
func (w *workload) xaCleanup(ctx context.Context) {
	conn, err := w.db.Conn(ctx)
	if err != nil {
		return
	}
	defer discard(conn)
	rows, err := conn.QueryContext(ctx, "XA RECOVER")
	if err != nil {
		return
	}
	var left []string
	for rows.Next() {
		var format, gl, bl int
		var data string
		if rows.Scan(&format, &gl, &bl, &data) == nil && strings.HasPrefix(data, fmt.Sprintf("dt%d_", w.seed)) {
			left = append(left, data)
		}
	}
	rows.Close()
	for _, x := range left {
		w.logf("xa: rolling back %s, left prepared", x)
		_, _ = conn.ExecContext(ctx, "XA ROLLBACK '"+x+"'")
	}
}

// xaRecovered reports whether XA RECOVER lists xid.
func xaRecovered(ctx context.Context, conn *sql.Conn, xid string) bool {
	rows, err := conn.QueryContext(ctx, "XA RECOVER")
	if err != nil {
		return false
	}
	defer rows.Close()
	for rows.Next() {
		var format, gl, bl int
		var data string
		if rows.Scan(&format, &gl, &bl, &data) == nil && data == xid {
			return true
		}
	}
	return false
}

func domain0Seq(gtids string) int64 {
	for _, part := range strings.Split(gtids, ",") {
		f := strings.Split(strings.TrimSpace(part), "-")
		if len(f) == 3 && f[0] == "0" {
			var n int64
			fmt.Sscan(f[2], &n)
			return n
		}
	}
	return -1
}
