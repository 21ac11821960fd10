package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/spf13/cobra"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/dump"
	"github.com/sluice-db/sluice/internal/chunk"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/internal/dumpfmt"
	"github.com/sluice-db/sluice/load"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/task"
)

func init() {
	register(newMigrateCmd)
	// The driver logs lost connections ("unexpected EOF") on its own; the
	// error it returns is classified and printed as sluice's one line, so
	// its log would only break the one-line contract of every command.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
}

// incrementalRunner is set by the incremental replication's file. start is
// the snapshot position of the full copy (--mode all) or nil (--mode
// incremental: the position comes from the task file or the checkpoint).
var incrementalRunner func(ctx context.Context, cfg *task.Config, start *sluice.Position, out io.Writer) error

// trackedTables is set with incrementalRunner: which source tables
// replication's schema holds at the task's checkpoint (nil: no checkpoint).
var trackedTables func(ctx context.Context, cfg *task.Config) (func(sluice.TableRef) bool, error)

// fullFlags are the command-line overrides shared by dump, load and
// migrate; zero means "from the task file".
type fullFlags struct {
	config           string
	threads          int
	poolSize         int
	rowsPerChunk     int
	rowsPerStatement int
	targetBinlog     bool
	commitUnit       string
	bulkMaxChunks    int
	chunkDelay       time.Duration
	progressEvery    time.Duration
}

func (f *fullFlags) addTask(fl interface {
	StringVar(*string, string, string, string)
}) {
	fl.StringVar(&f.config, "config", "", "task file (YAML) naming source, target and tables")
}

// loadTask reads the task file and applies flag overrides; need names the
// sections the command uses ("source", "target"), which must be in the file.
func (f *fullFlags) loadTask(need ...string) (*task.Config, error) {
	if f.config == "" {
		return nil, &sluice.Error{Op: "task file", Err: fmt.Errorf("%w: --config is required", sluice.ErrConfig), Hint: "pass --config task.yaml (see docs/manual/taskfile.md)"}
	}
	cfg, err := task.Load(f.config)
	if err != nil {
		return nil, err
	}
	if err := cfg.Require(need...); err != nil {
		return nil, err
	}
	// 0 means "the task's value"; a negative one was taken for 0 in
	// silence, so a script's mistake ran with another value than it said.
	for _, o := range []struct {
		name string
		v    int
	}{{"threads", f.threads}, {"pool-size", f.poolSize}, {"rows-per-chunk", f.rowsPerChunk}, {"rows-per-statement", f.rowsPerStatement}} {
		if o.v < 0 {
			return nil, sluice.Errorf(sluice.ErrConfig, "--"+o.name, "give a positive number, or leave the flag out for the task file's value", "--%s %d is negative", o.name, o.v)
		}
	}
	if err := checkCopyFlags(f); err != nil {
		return nil, err
	}
	if f.threads > 0 {
		cfg.Threads = f.threads
	}
	if f.poolSize > 0 {
		cfg.PoolSize = f.poolSize
	}
	if f.rowsPerChunk > 0 {
		cfg.RowsPerChunk = f.rowsPerChunk
	}
	if f.rowsPerStatement > 0 {
		cfg.RowsPerStatement = f.rowsPerStatement
	}
	return cfg, cfg.Validate()
}

func (f *fullFlags) dumpConfig(cfg *task.Config) dump.Config {
	dc := dump.DefaultConfig()
	dc.Source, dc.Threads, dc.RowsPerChunk, dc.Select = cfg.Source, cfg.Threads, cfg.RowsPerChunk, cfg.Selected
	return dc
}

func (f *fullFlags) loadConfig(cfg *task.Config, taskKey string) load.Config {
	lc := load.DefaultConfig()
	lc.Target, lc.Task, lc.PoolSize, lc.RowsPerStatement, lc.Route = cfg.Target, taskKey, cfg.PoolSize, cfg.RowsPerStatement, cfg.Route
	lc.DisableBinlog = !f.targetBinlog
	lc.ChunkDelay = f.chunkDelay
	if f.commitUnit != "" {
		lc.CommitUnit = f.commitUnit
	}
	if f.bulkMaxChunks > 0 {
		lc.BulkMaxChunks = f.bulkMaxChunks
	}
	return lc
}

func newMigrateCmd() *cobra.Command {
	f := fullFlags{targetBinlog: true}
	var mode string
	cmd := &cobra.Command{
		Use: "migrate --config task.yaml --mode full",
		Example: `  sluice migrate --config task.yaml --mode full          # copy, then sluice verify
  sluice migrate --config task.yaml --mode all           # copy, then replicate from the snapshot
  sluice migrate --config task.yaml --mode incremental   # replicate from incremental.gtid-set`,
		Short: "Copy the source's tables to the target: a consistent snapshot streamed straight into a pooled load",
		Long: `migrate --mode full reads a consistent snapshot of the selected tables on
'threads' source connections, chunk by chunk (primary-key ranges of about
'rows-per-chunk' rows), and streams each chunk into the target on
'pool-size' connections, with no intermediate files. Each chunk commits with
its checkpoint in sluice_meta on the target, so an interrupted run (even
kill -9) resumes where it stopped when run again: finished chunks are not
read again and no row is loaded twice. A resumed run reads the remaining
chunks from a new snapshot.

--mode all runs the incremental replication after the full copy, from the
snapshot's binlog position; --mode incremental runs only the replication.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := f.loadTask("source")
			if err != nil {
				return err
			}
			if cfg.HasSink() {
				return runSinkMigrate(c.Context(), cfg, mode, c.OutOrStdout())
			}
			if err := cfg.Require("target"); err != nil {
				return err
			}
			return runMigrate(c.Context(), cfg, &f, mode, c.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	f.addTask(fl)
	fl.StringVar(&mode, "mode", "full", "full (copy), all (copy, then replicate), incremental (replicate only)")
	addFullFlags(cmd, &f, true, true)
	return cmd
}

func addFullFlags(cmd *cobra.Command, f *fullFlags, dumpSide, loadSide bool) {
	fl := cmd.Flags()
	if dumpSide {
		fl.IntVar(&f.threads, "threads", 0, "source connections sharing the snapshot (default: the task's threads)")
		fl.IntVar(&f.rowsPerChunk, "rows-per-chunk", 0, "rows per primary-key chunk (default: the task's rows-per-chunk)")
	}
	if loadSide {
		fl.IntVar(&f.poolSize, "pool-size", 0, "target connections loading at once (default: the task's pool-size)")
		fl.IntVar(&f.rowsPerStatement, "rows-per-statement", 0, "use multi-row INSERTs of N rows instead of LOAD DATA LOCAL INFILE (default: the task's)")
		fl.BoolVar(&f.targetBinlog, "target-binlog", true, "write the loaded rows to the target's binlog; false sets sql_log_bin=0 (needs SUPER or BINLOG ADMIN)")
		fl.StringVar(&f.commitUnit, "commit-unit", load.CommitAuto, "chunk: each chunk commits with its checkpoint (parallel within a table, finest resume); table: each table's chunks are one LOAD DATA in one transaction (MariaDB's fast bulk insert into an empty table; resume per table); auto: table for tables not started and of at most --bulk-max-chunks chunks, chunk for the others")
		fl.IntVar(&f.bulkMaxChunks, "bulk-max-chunks", load.DefaultConfig().BulkMaxChunks, "with --commit-unit auto, the largest table (in chunks) loaded as one transaction")
		fl.DurationVar(&f.chunkDelay, "chunk-delay", 0, "wait this long before committing each chunk (for interruption tests)")
		_ = fl.MarkHidden("chunk-delay")
	}
	fl.DurationVar(&f.progressEvery, "progress-every", 10*time.Second, "interval of the plain progress lines when not on a terminal")
}

func runMigrate(ctx context.Context, cfg *task.Config, f *fullFlags, mode string, out io.Writer) error {
	if err := checkMetricsAddr(cfg); err != nil {
		return err
	}
	switch mode {
	case "full", "all":
	case "incremental":
		if incrementalRunner == nil {
			return notInBuild()
		}
		if err := precheck(ctx, cfg, mode, out); err != nil {
			return err
		}
		return incrementalRunner(ctx, cfg, nil, out)
	default:
		return &sluice.Error{Op: "migrate", Err: fmt.Errorf("%w: --mode %q", sluice.ErrConfig, mode), Hint: "use --mode full, all or incremental"}
	}
	if mode == "all" && incrementalRunner == nil {
		return notInBuild()
	}
	// One process per task, from the copy on (replication locks it again).
	unlock, err := replicate.LockTask(cfg.Dir, cfg.Name)
	if err != nil {
		return err
	}
	defer unlock()
	// Everything the run needs is checked before it copies a row.
	if err := precheck(ctx, cfg, mode, out); err != nil {
		return err
	}
	if mode == "full" {
		if err := refuseUnmatchedEarly(ctx, cfg, out); err != nil {
			return err
		}
	}
	if err := markOwnCopy(ctx, cfg, mode, out); err != nil { // sameserver.go
		return err
	}
	res, err := migrateFull(ctx, cfg, f, mode == "all", out)
	if err != nil {
		return err
	}
	if mode == "all" {
		// Replication starts at the first snapshot. Chunks that a resumed
		// run read from a later snapshot already hold the changes up to it;
		// the replication's copy filter (internal/snapfilter) skips those
		// changes chunk by chunk, from the positions stored with each chunk.
		return incrementalRunner(ctx, cfg, res.start, out)
	}
	return nil
}

// afterPrepare, set by tests, runs once the dump has its snapshot and the
// loader its plan, before a chunk is read.
var afterPrepare func()

// interrupted is the error of a run stopped by a signal: committed chunks
// stay, and the same command resumes.
func interrupted(op string) error {
	return &sluice.Error{Op: op, Err: errors.New("interrupted; every committed chunk is kept"), Hint: "run the same command again to resume"}
}

func notInBuild() error {
	return &sluice.Error{Op: "migrate", Err: fmt.Errorf("%w: incremental replication is not available in this build", sluice.ErrConfig), Hint: "use --mode full"}
}

// fullResult is what a full copy reports.
type fullResult struct {
	start   *sluice.Position // earliest snapshot position of the task
	resumed bool
}

// migrateFull streams a snapshot of the source into the target.
func migrateFull(ctx context.Context, cfg *task.Config, f *fullFlags, replicating bool, out io.Writer) (*fullResult, error) {
	lc := f.loadConfig(cfg, cfg.Name)
	lc.ReloadMixed = replicating
	l, err := load.Open(ctx, lc)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	// A copied table that the target lost (dropped or emptied by hand) is
	// loaded again, never left empty under checkpoints that say done.
	// Once replication has run, only a table that replication's schema
	// says must exist is reloaded (see load.ReloadLost).
	var tracked func(sluice.TableRef) bool
	if replicating && trackedTables != nil {
		if tracked, err = trackedTables(ctx, cfg); err != nil {
			return nil, fmt.Errorf("migrate: read replication's schema: %w", err)
		}
	}
	lost, err := l.ReloadLost(ctx, sourceProbe(cfg), tracked)
	if err != nil {
		return nil, err
	}
	for _, t := range lost {
		logf(out, "migrate %s: %s is %s although this task copied it; it is loaded again whole\n", cfg.Name, t.Target, t.Why)
	}
	complete, err := l.Complete(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: read the copy's checkpoints: %w", err)
	}
	if replicating && complete {
		// Nothing to copy: replication resumes from its checkpoint, as
		// --mode incremental does. The target tables are not compared with
		// the source's definitions (a source DDL that replication has not
		// applied yet makes them differ) and tables that replication made
		// are not copied. No snapshot, so no lock on the source.
		logf(out, "migrate %s: the full copy is complete; resuming replication\n", cfg.Name)
		return &fullResult{start: l.FirstPosition(), resumed: true}, nil
	}
	dc := f.dumpConfig(cfg)
	dc.Logf = func(format string, args ...any) { logf(out, format, args...) }
	dc.PlanFor, dc.Done, dc.WholeTable, dc.WholeWave = l.Plan, l.Done, l.WholeTable, cfg.PoolSize
	dc.RefusePreparedXA = replicating
	restricted := false
	if replicating && l.Resumed() {
		if done, err := l.CopiedBefore(ctx); err != nil {
			return nil, err
		} else if done {
			// The copy had finished, and replication may have run since:
			// copy only the planned tables with chunks to load again (lost
			// tables). Any other table is replication's (made on the source
			// after the copy) and keeps its replicated definition and rows.
			sel := dc.Select
			dc.Select = func(t sluice.TableRef) bool { return sel(t) && l.Pending(t) }
			restricted = true
		}
	}
	began := time.Now()
	d, err := dump.Open(ctx, dc)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	if !restricted {
		if err := checkSelected(ctx, cfg, d.Tables(), replicating, out); err != nil {
			return nil, err
		}
	}
	specs := make([]load.TableSpec, len(d.Tables()))
	for i, tp := range d.Tables() {
		specs[i] = load.TableSpec{Table: tp.Table, Plan: dumpfmt.PlanOf(tp.Chunks)}
	}
	resumed := l.Resumed()
	if replicating && resumed && !restricted {
		if err := linkForeignKeys(ctx, cfg, specs); err != nil {
			return nil, err
		}
	}
	snap := d.Position()
	if d.NoSnapshot() && l.FirstPosition() != nil {
		snap = *l.FirstPosition()
	}
	if err := l.Prepare(ctx, snap, specs); err != nil {
		return nil, err
	}
	if d.NoSnapshot() {
		logf(out, "migrate %s: %d tables, nothing left to copy (no snapshot taken)", cfg.Name, len(specs))
	} else {
		logf(out, "migrate %s: %d tables, snapshot at %s, %d chunks to copy", cfg.Name, len(specs), d.Position(), l.Stats().TotalChunks.Load())
	}
	if resumed {
		fmt.Fprintf(out, " (resumed: %d chunks done before; the rest is read from a new snapshot)", l.Stats().Skipped.Load())
	}
	for _, t := range l.Remade() {
		fmt.Fprintf(out, "; %s is loaded again whole (a DDL on the source changed it since its first chunks were loaded)", t)
	}
	for _, t := range l.Reloaded() {
		fmt.Fprintf(out, "; %s is reloaded whole (its key does not let replication match chunks of two snapshots)", t)
	}
	fmt.Fprint(out, groupReloadNote(l.GroupReloaded()))
	fmt.Fprintln(out)
	ds, ls := d.Stats(), l.Stats()
	prog := startProgress(out, f.progressEvery,
		progressPhase{Name: "dump", Rows: ds.Rows.Load, Bytes: ds.Bytes.Load, Done: ds.Chunks.Load, Total: ds.TotalChunks.Load},
		loadPhase(ls))
	rep := startCopyReporter(cfg, ds, l)
	if afterPrepare != nil {
		afterPrepare()
	}
	l.Start(ctx)
	dumpStart := time.Now()
	derr := d.Run(ctx, streamSink{l})
	dumpTime := time.Since(dumpStart)
	if derr != nil {
		l.Abort(derr)
	}
	lerr := l.Wait()
	prog.Stop()
	rep.Stop(errors.Join(derr, lerr, ctx.Err()))
	if ctx.Err() != nil {
		return nil, interrupted("migrate")
	}
	if derr != nil {
		return nil, derr
	}
	if lerr != nil {
		return nil, lerr
	}
	writeSummary(out, summary{item: "migrate (stream)", threads: cfg.Threads, pool: cfg.PoolSize, bytes: ls.Bytes.Load(), rows: ls.Rows.Load(),
		total: time.Since(began), dumpBytes: ds.Bytes.Load(), dumpTime: dumpTime, loadTime: ls.Active()})
	reportLeftOut(ctx, cfg, out) // views, triggers, routines, events: sourceobjects.go
	pos := l.FirstPosition()
	if pos != nil {
		fmt.Fprintf(out, "snapshot position: %s\n", pos)
	}
	return &fullResult{start: pos, resumed: resumed}, nil
}

// sourceProbe checks source tables for the loader's lost-table check with
// one plain connection: no snapshot, no lock.
func sourceProbe(cfg *task.Config) load.SourceProbe {
	return func(ctx context.Context, t sluice.TableRef) (bool, bool, error) {
		db, err := dbconn.Open(ctx, "source", cfg.Source, dbconn.Options{MaxOpen: 1})
		if err != nil {
			return false, false, err
		}
		defer db.Close()
		var one int
		err = db.QueryRowContext(ctx, "SELECT 1 FROM "+t.Quoted()+" LIMIT 1").Scan(&one)
		var me *mysql.MySQLError
		switch {
		case err == nil:
			return true, true, nil
		case errors.Is(err, sql.ErrNoRows):
			return true, false, nil
		case errors.As(err, &me) && me.Number == 1146:
			return false, false, nil
		}
		return false, false, dbconn.Classify(err, "source", cfg.Source)
	}
}

// streamSink adapts the loader to dump.Sink.
type streamSink struct{ l *load.Loader }

func (s streamSink) OpenChunk(ctx context.Context, t *sluice.Table, r chunk.Range) (dump.ChunkWriter, error) {
	return s.l.OpenChunk(ctx, t.Ref, r)
}

// checkPatterns makes every include pattern match at least one table, so a
// misspelt table name is an error instead of a silent no-op.
func checkPatterns(cfg *task.Config, tables []*dump.TablePlan) error {
	if p := unmatched(cfg, tables); len(p) > 0 {
		return noMatch(cfg, p[0])
	}
	return nil
}

func noMatch(cfg *task.Config, p string) error {
	return &sluice.Error{Op: "select tables", Err: fmt.Errorf("%w: no table on the source %s matches %q", sluice.ErrUnknownTable, cfg.Source.Addr(), p),
		Hint: "fix tables.include in the task file (patterns are schema.table globs) or create the table"}
}

// unmatched lists the include patterns that match none of tables.
func unmatched(cfg *task.Config, tables []*dump.TablePlan) []string {
	var out []string
	for _, p := range cfg.IncludePatterns() {
		found := false
		for _, tp := range tables {
			if p.Match(tp.Table.Ref.Schema, tp.Table.Ref.Name) {
				found = true
				break
			}
		}
		if !found {
			out = append(out, p.Text)
		}
	}
	return out
}

// checkSelected is checkPatterns against the source: a pattern that
// matches no table because the source user may not read it is a privilege
// error (the server hides tables a user cannot read, so it looked like "no
// table matches"). Otherwise, a task that replicates takes the pattern with
// a warning: its tables are created later, and replicated from their
// CREATE in the stream. A copy alone refuses it.
func checkSelected(ctx context.Context, cfg *task.Config, tables []*dump.TablePlan, replicating bool, out io.Writer) error {
	miss := unmatched(cfg, tables)
	if len(miss) == 0 {
		return nil
	}
	db, err := dbconn.Open(ctx, "source", cfg.Source, dbconn.Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	for _, p := range miss {
		cp, err := task.ParsePattern(p)
		if err != nil {
			return err
		}
		schema := cp.SchemaPart()
		if n := cp.SchemaName(); n != "" {
			schema = n
		}
		can, err := maySelect(ctx, db, cp)
		if err != nil {
			return dbconn.Classify(err, "source", cfg.Source)
		}
		if !can {
			return &sluice.Error{Op: "select tables", Err: fmt.Errorf("%w: source user %q has no SELECT privilege on %q, so no table matches tables.include pattern %q", sluice.ErrPrivilege, cfg.Source.User, schema, p),
				Hint: fmt.Sprintf("GRANT SELECT ON `%s`.* TO the source user (for a pattern, on each schema it names), or fix tables.include", strings.ReplaceAll(schema, "`", ""))}
		}
		if !replicating {
			return noMatch(cfg, p)
		}
		logf(out, "migrate %s: warning: tables.include pattern %q matches no table on the source yet; tables created later are replicated from their CREATE TABLE\n", cfg.Name, p)
	}
	return nil
}

// maySelect reports whether the current user holds SELECT globally, on a
// schema that the pattern's schema part matches, or on a table in one.
func maySelect(ctx context.Context, db *sql.DB, p task.Pattern) (bool, error) {
	var global int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.USER_PRIVILEGES WHERE PRIVILEGE_TYPE = 'SELECT'").Scan(&global); err != nil {
		return false, err
	}
	if global > 0 {
		return true, nil
	}
	rows, err := db.QueryContext(ctx, "SELECT TABLE_SCHEMA FROM information_schema.SCHEMA_PRIVILEGES WHERE PRIVILEGE_TYPE = 'SELECT' "+
		"UNION SELECT TABLE_SCHEMA FROM information_schema.TABLE_PRIVILEGES WHERE PRIVILEGE_TYPE = 'SELECT'")
	if err != nil {
		return false, err
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return false, err
		}
		if p.MatchSchema(s) {
			return true, nil
		}
		// A grant's schema may itself be a LIKE pattern (app\_%).
		if lit := p.SchemaName(); lit != "" && likeMatch(s, lit) {
			return true, nil
		}
	}
	return false, rows.Err()
}

// likeMatch matches name against a grant's schema, a LIKE pattern: % any
// run, _ one character, \ escapes.
func likeMatch(like, name string) bool {
	var b strings.Builder
	for i := 0; i < len(like); i++ {
		switch c := like[i]; c {
		case '\\':
			if i+1 < len(like) {
				i++
				b.WriteString("\\" + string(like[i]))
			}
		case '%':
			b.WriteByte('*')
		case '_':
			b.WriteByte('?')
		case '*', '?', '[', '`':
			b.WriteString("\\" + string(c))
		default:
			b.WriteByte(c)
		}
	}
	return task.MatchPart(b.String(), name)
}

// summary is the final table, in the style of the DM benchmark report.
type summary struct {
	item               string
	threads, pool      int
	bytes, rows        int64
	dumpBytes          int64
	total              time.Duration
	dumpTime, loadTime time.Duration
}

func writeSummary(out io.Writer, s summary) {
	mbs := func(b int64, d time.Duration) string {
		if d <= 0 || b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", float64(b)/1e6/d.Seconds())
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, "| item | dump threads | load pool size | rows | data size (MB) | time (s) | dump speed (MB/s) | load speed (MB/s) | end-to-end (MB/s) |")
	fmt.Fprintln(out, "| :--: | :--: | :--: | --: | --: | --: | --: | --: | --: |")
	count := func(n int) string {
		if n == 0 {
			return "-"
		}
		return fmt.Sprint(n)
	}
	fmt.Fprintf(out, "| %s | %s | %s | %d | %.2f | %.1f | %s | %s | %s |\n", s.item, count(s.threads), count(s.pool), s.rows,
		float64(max(s.bytes, s.dumpBytes))/1e6, s.total.Seconds(), mbs(s.dumpBytes, s.dumpTime), mbs(s.bytes, s.loadTime), mbs(max(s.bytes, s.dumpBytes), s.total))
}
