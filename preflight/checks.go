package preflight

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/binlog"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/load"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/schema"
	"github.com/sluice-db/sluice/task"
)

// ErrChecksFailed: a check failed (sluice check exits 1 on it).
var ErrChecksFailed = errors.New("checks failed")

// ErrRefused marks a check failure that stopped a run before it started
// (Before), as opposed to sluice check's own verdict.
var ErrRefused = errors.New("refused before starting")

// Result is one check's outcome.
type Result struct {
	Name   string
	Status string // "pass", "warn", "fail"
	Detail string
	Fix    string
	// Err is the failure's cause, for errors.Is (a sentinel or the error
	// the check met); nil for a pass or a warning.
	Err error
}

func Print(w io.Writer, res []Result) {
	for _, r := range res {
		line := fmt.Sprintf("%-4s  %-26s %s", r.Status, r.Name, r.Detail)
		if r.Status != "pass" && r.Fix != "" {
			line += " (fix: " + r.Fix + ")"
		}
		fmt.Fprintln(w, line)
	}
}

func FirstFailure(res []Result) *Result {
	for i := range res {
		if res[i].Status == "fail" {
			return &res[i]
		}
	}
	return nil
}

func Failures(res []Result) int {
	n := 0
	for _, r := range res {
		if r.Status == "fail" {
			n++
		}
	}
	return n
}

// Before runs the checks before migrate copies or replicates, logs the
// warnings on log, and fails with the first failing one (one line, with
// its fix).
func Before(ctx context.Context, cfg *task.Config, mode string, log *slog.Logger) error {
	res := Run(ctx, cfg, mode)
	for i, r := range res {
		if r.Name == "server-id" && r.Status == "fail" {
			// A killed run's own dump connection can linger on the source
			// for a moment (or longer behind a proxy): migrate warns, and
			// the new connection takes the id over; sluice check refuses.
			res[i].Status, r.Status = "warn", "warn"
		}
		if r.Name == preparedXAName {
			// The copy's snapshot refuses exactly, under its lock (checkxa.go).
			res[i].Status, r.Status = "pass", "pass"
		}
		if r.Status == "warn" {
			log.Info(fmt.Sprintf("warning: %s: %s (fix: %s)", r.Name, r.Detail, r.Fix))
		}
	}
	if f := FirstFailure(res); f != nil {
		cause := f.Err
		if cause == nil {
			cause = errors.New(f.Detail)
		} else {
			var se *sluice.Error
			if errors.As(cause, &se) {
				cause = se.Err // its hint is f.Fix
			}
		}
		return &sluice.Error{Op: "migrate " + cfg.Name, Err: fmt.Errorf("%w: %w: %s: %w (sluice check --config lists every check)", ErrRefused, ErrChecksFailed, f.Name, cause), Hint: f.Fix}
	}
	return nil
}

func errResult(name string, err error) Result {
	r := Result{Name: name, Status: "fail", Detail: oneLine(err), Err: err}
	var se *sluice.Error
	if errors.As(err, &se) {
		r.Detail = strings.TrimSpace(strings.Join(strings.Fields(fmt.Sprint(se.Err)), " "))
		r.Fix = se.Hint
	}
	return r
}

func Run(ctx context.Context, cfg *task.Config, mode string) []Result {
	replicating := mode != "full"
	var res []Result
	add := func(r Result) { res = append(res, r) }

	src, err := dbconn.Open(ctx, "source", cfg.Source, dbconn.Options{MaxOpen: 2})
	if err != nil {
		add(errResult("source connection", err))
		src = nil
	} else {
		defer src.Close()
		var version string
		_ = src.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version)
		add(Result{Name: "source connection", Status: "pass", Detail: cfg.Source.String() + " " + version})
		add(copyPrivileges(ctx, src, cfg))
		add(tableKeys(ctx, src, cfg))
		if replicating {
			res = append(res, binlogChecks(ctx, src, cfg)...)
			add(compressedColumns(ctx, src, cfg)) // checkcompressed.go
		}
		if mode == "all" {
			add(preparedXA(ctx, src, cfg)) // checkxa.go
		}
	}
	dst, err := dbconn.Open(ctx, "target", cfg.Target, dbconn.Options{MaxOpen: 1})
	if err != nil {
		add(errResult("target connection", err))
	} else {
		defer dst.Close()
		add(Result{Name: "target connection", Status: "pass", Detail: cfg.Target.String()})
		add(targetFlavor(ctx, src, dst, cfg, mode)) // tidb.go
		add(targetWritable(ctx, dst, cfg))
		if src != nil {
			add(sameServerCheck(ctx, src, dst, cfg, mode)) // sameserver.go
			add(routeCheck(ctx, src, cfg))                 // routecheck.go
			add(targetTriggers(ctx, src, dst, cfg))
		}
		if src != nil && mode != "incremental" {
			add(targetTables(ctx, src, dst, cfg))
		}
	}
	if src != nil {
		var tgt *sql.DB // sequences a copy's CREATE TABLE needs there
		if err == nil && mode != "incremental" {
			tgt = dst
		}
		res = append(res, sourceObjectChecks(ctx, src, tgt, cfg)...) // sourceobjects.go
	}
	if replicating {
		add(relayDisk(cfg))
	}
	add(metricsAddrCheck(cfg)) // routecheck.go
	return res
}

// copyPrivileges: the snapshot takes FLUSH TABLES WITH READ LOCK (RELOAD)
// and reads every selected table (SELECT).
func copyPrivileges(ctx context.Context, db *sql.DB, cfg *task.Config) Result {
	r := Result{Name: "source copy privileges"}
	grants, err := showGrants(ctx, db)
	if err != nil {
		return errResult(r.Name, dbconn.Classify(err, "source", cfg.Source))
	}
	if !hasGlobal(grants, "RELOAD") {
		r.Status, r.Detail = "fail", fmt.Sprintf("user %q lacks RELOAD (FLUSH TABLES WITH READ LOCK takes the consistent snapshot)", cfg.Source.User)
		r.Err = fmt.Errorf("%w: %s", sluice.ErrPrivilege, r.Detail)
		r.Fix = "on the source: GRANT SELECT, RELOAD, LOCK TABLES, REPLICATION CLIENT ON *.* TO the source user"
		return r
	}
	for _, cp := range cfg.IncludePatterns() {
		p, s := cp.Text, cp.SchemaPart()
		if n := cp.SchemaName(); n != "" {
			s = n
		}
		ok, err := maySelect(ctx, db, cp)
		if err != nil {
			return errResult(r.Name, dbconn.Classify(err, "source", cfg.Source))
		}
		if !ok {
			r.Status, r.Detail = "fail", fmt.Sprintf("source user %q has no SELECT privilege on %q, so no table matches tables.include pattern %q", cfg.Source.User, s, p)
			r.Err = fmt.Errorf("%w: %s", sluice.ErrPrivilege, r.Detail)
			r.Fix = fmt.Sprintf("GRANT SELECT ON `%s`.* TO the source user", strings.ReplaceAll(s, "`", ""))
			return r
		}
	}
	r.Status, r.Detail = "pass", "RELOAD and SELECT on the selected schemas"
	return r
}

// binlogChecks: what replication needs of the source.
func binlogChecks(ctx context.Context, db *sql.DB, cfg *task.Config) []Result {
	rc, err := replicate.FromTask(cfg)
	if err != nil {
		return []Result{errResult("binlog settings", err)}
	}
	info, err := binlog.CheckDB(ctx, db, rc.Binlog)
	if err != nil {
		return []Result{errResult("binlog and replication", err)}
	}
	res := []Result{{Name: "binlog and replication", Status: "pass",
		Detail: fmt.Sprintf("log_bin ON, ROW format, FULL row image, REPLICATION SLAVE; %d binlog files", len(info.Files))}}
	if info.GTIDBinlogPos == "" {
		res = append(res, Result{Name: "GTID", Status: "warn", Detail: "the source has no GTIDs: positions are by file and offset only",
			Fix: "enable GTIDs on the source (MariaDB has them always once a transaction is logged; MySQL: gtid_mode=ON)"})
	} else {
		res = append(res, Result{Name: "GTID", Status: "pass", Detail: info.GTIDBinlogPos})
	}
	res = append(res, retention(ctx, db), serverIDInUse(ctx, db, cfg, rc.Binlog.ServerID))
	return res
}

// retention warns when the source keeps its binlogs for less than a day:
// a task stopped over a weekend could not resume.
func retention(ctx context.Context, db *sql.DB) Result {
	r := Result{Name: "binlog retention", Status: "pass"}
	var secs sql.NullFloat64
	if err := db.QueryRowContext(ctx, "SELECT @@global.binlog_expire_logs_seconds").Scan(&secs); err != nil || !secs.Valid {
		var days sql.NullFloat64
		if err := db.QueryRowContext(ctx, "SELECT @@global.expire_logs_days").Scan(&days); err == nil {
			secs = sql.NullFloat64{Float64: days.Float64 * 86400, Valid: true}
		}
	}
	switch {
	case !secs.Valid:
		r.Status, r.Detail = "warn", "could not read binlog_expire_logs_seconds"
	case secs.Float64 == 0:
		r.Detail = "binlogs are kept until purged by hand"
	case secs.Float64 < 86400:
		r.Status, r.Detail = "warn", fmt.Sprintf("binlogs are purged after %.0f s: a task stopped longer cannot resume", secs.Float64)
		r.Fix = "keep binlogs longer on the source (binlog_expire_logs_seconds=604800)"
	default:
		r.Detail = fmt.Sprintf("binlogs are kept %.1f days", secs.Float64/86400)
	}
	return r
}

// serverIDInUse refuses a server-id another replica of the source already
// uses: the two would keep disconnecting each other.
func serverIDInUse(ctx context.Context, db *sql.DB, cfg *task.Config, id uint32) Result {
	r := Result{Name: "server-id", Status: "pass", Detail: fmt.Sprintf("%d is free on the source", id)}
	if _, running, _ := replicate.Holder(cfg.Dir); running {
		r.Detail = fmt.Sprintf("%d (this task is running: its own connection holds it)", id)
		return r
	}
	rows, err := db.QueryContext(ctx, "SHOW SLAVE HOSTS")
	if err != nil {
		r.Status, r.Detail = "warn", "could not list the source's replicas ("+oneLine(err)+")"
		r.Fix = "grant REPLICATION MASTER ADMIN (MariaDB) to see them, or make sure incremental.server-id is unique"
		return r
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	for rows.Next() {
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			break
		}
		if len(vals) > 0 && string(vals[0]) == fmt.Sprint(id) {
			r.Status = "fail"
			r.Detail = fmt.Sprintf("a replica with server-id %d is connected to the source (host %s)", id, string(vals[1]))
			r.Err = fmt.Errorf("%w: %s", sluice.ErrConfig, r.Detail)
			r.Fix = "set incremental.server-id to a value no other replica uses (the default derives one from the task name)"
			return r
		}
	}
	return r
}

// tableKeys warns about selected tables without a primary or NOT NULL
// unique key: replicated, but each change is found by a scan.
func tableKeys(ctx context.Context, db *sql.DB, cfg *task.Config) Result {
	r := Result{Name: "table keys", Status: "pass"}
	refs, err := schema.ListTables(ctx, db, cfg.Selected)
	if err != nil {
		return errResult(r.Name, dbconn.Classify(err, "source", cfg.Source))
	}
	var keyless []string
	for _, ref := range refs {
		var n int
		// STATISTICS, not TABLE_CONSTRAINTS: MariaDB shows a table's
		// constraints only to a user with a privilege beyond SELECT on it,
		// so with the documented source grants every table looked keyless.
		err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.STATISTICS
			WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND NON_UNIQUE = 0`, ref.Schema, ref.Name).Scan(&n)
		if err == nil && n == 0 {
			keyless = append(keyless, ref.String())
		}
	}
	r.Detail = fmt.Sprintf("%d tables selected", len(refs))
	if len(refs) == 0 {
		r.Status, r.Detail = "warn", "no table matches tables.include yet"
		r.Fix = "fix tables.include, or create the tables: replication takes them from their CREATE TABLE"
	}
	if len(keyless) > 0 {
		if len(keyless) > 5 {
			keyless = append(keyless[:5], "...")
		}
		r.Status = "warn"
		r.Detail = fmt.Sprintf("%d of %d tables have no primary or unique key (%s): each change to them is found by a scan of the target table", len(keyless), len(refs), strings.Join(keyless, ", "))
		r.Fix = "add a primary key on the source where you can"
	}
	return r
}

// targetWritable: read_only, and the privileges a copy and the checkpoints
// need.
func targetWritable(ctx context.Context, db *sql.DB, cfg *task.Config) Result {
	r := Result{Name: "target writable"}
	var ro int
	if err := db.QueryRowContext(ctx, "SELECT @@global.read_only").Scan(&ro); err == nil && ro == 1 {
		grants, _ := showGrants(ctx, db)
		if !hasGlobal(grants, "READ_ONLY ADMIN") && !hasGlobal(grants, "SUPER") {
			r.Status, r.Detail = "fail", "the target is read-only (read_only=ON)"
			r.Err = fmt.Errorf("%w: %s", sluice.ErrConfig, r.Detail)
			r.Fix = "point target: at a writable server (the primary), or run SET GLOBAL read_only=OFF there if it is meant to take writes"
			return r
		}
	}
	grants, err := showGrants(ctx, db)
	if err != nil {
		return errResult(r.Name, dbconn.Classify(err, "target", cfg.Target))
	}
	var missing []string
	// INDEX: a source's CREATE INDEX replays as CREATE INDEX, which ALTER
	// does not cover.
	for _, p := range []string{"CREATE", "INSERT", "UPDATE", "DELETE", "DROP", "ALTER", "INDEX"} {
		if !hasAnywhere(grants, p) {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		r.Status, r.Detail = "fail", fmt.Sprintf("user %q has no %s privilege anywhere", cfg.Target.User, strings.Join(missing, ", "))
		r.Err = fmt.Errorf("%w: %s", sluice.ErrPrivilege, r.Detail)
		r.Fix = "GRANT ALL ON the target schemas and on sluice_meta.* TO the target user"
		return r
	}
	r.Status, r.Detail = "pass", "read_only off; CREATE, INSERT, UPDATE, DELETE, DROP, ALTER, INDEX granted"
	return r
}

func showGrants(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, "SHOW GRANTS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			return nil, err
		}
		out = append(out, strings.ToUpper(g))
	}
	return out, rows.Err()
}

// hasGlobal: a grant ON *.* of priv, or of ALL PRIVILEGES.
func hasGlobal(grants []string, priv string) bool {
	for _, g := range grants {
		if strings.Contains(g, " ON *.* ") && (strings.Contains(g, "ALL PRIVILEGES") || strings.Contains(g, priv)) {
			return true
		}
	}
	return false
}

// hasAnywhere: priv granted on anything.
func hasAnywhere(grants []string, priv string) bool {
	for _, g := range grants {
		if strings.HasPrefix(g, "GRANT ") && (strings.Contains(g, "ALL PRIVILEGES") || strings.Contains(g, priv)) {
			return true
		}
	}
	return false
}

// relayDisk warns when the task directory's disk has less than 1 GiB free.
func relayDisk(cfg *task.Config) Result {
	r := Result{Name: "relay disk", Status: "pass"}
	dir := cfg.Dir
	for {
		if _, err := os.Stat(dir); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		r.Status, r.Detail = "warn", "could not read the free space under "+dir+": "+err.Error()
		return r
	}
	free := fs.Bavail * uint64(fs.Bsize)
	r.Detail = fmt.Sprintf("%.1f GiB free under %s", float64(free)/(1<<30), dir)
	if free < 1<<30 {
		r.Status = "warn"
		r.Fix = "the relay log holds the source's binlog until applied (and incremental.relay-retain after): give dir: a larger disk"
	}
	return r
}

// targetTables: on a task's first run (no chunk plan of it on the target
// yet), every existing target table must be loadable: the source's
// definition and empty. Later runs are the loader's business (it knows
// which tables it made and loaded).
func targetTables(ctx context.Context, src, dst *sql.DB, cfg *task.Config) Result {
	r := Result{Name: "target tables", Status: "pass"}
	var planned int
	err := dst.QueryRowContext(ctx, "SELECT COUNT(*) FROM `sluice_meta`.`load_plan` WHERE task = ?", cfg.Name).Scan(&planned)
	if err == nil && planned > 0 {
		r.Detail = "the task has run before: its tables are checked as it loads them"
		return r
	}
	refs, err := schema.ListTables(ctx, src, cfg.Selected)
	if err != nil {
		return errResult(r.Name, dbconn.Classify(err, "source", cfg.Source))
	}
	exist := 0
	for _, ref := range refs {
		t, err := schema.Inspect(ctx, src, ref)
		if err != nil {
			continue // dropped meanwhile: the copy's own checks see it
		}
		tgt := cfg.Route(ref)
		if err := load.Preflight(ctx, dst, t, tgt); err != nil {
			r = errResult(r.Name, err)
			var se *sluice.Error
			if errors.As(err, &se) {
				r.Detail = se.Op + ": " + oneLine(se.Err)
				r.Err = fmt.Errorf("%s: %w", se.Op, se.Err)
			}
			return r
		}
		if dst.QueryRowContext(ctx, "SELECT 1 FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", tgt.Schema, tgt.Name).Scan(new(int)) == nil {
			exist++
		}
	}
	r.Detail = fmt.Sprintf("%d of %d tables exist on the target, with the source's definition and empty", exist, len(refs))
	return r
}

// oneLine is err's text on one line.
func oneLine(err error) string {
	if err == nil {
		return ""
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}
