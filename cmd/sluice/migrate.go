package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/spf13/cobra"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/dump"
	"github.com/sluice-db/sluice/internal/logx"
	"github.com/sluice-db/sluice/load"
	"github.com/sluice-db/sluice/migrate"
	"github.com/sluice-db/sluice/preflight"
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
	if err := f.check(); err != nil {
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

func (f *fullFlags) dumpConfig(cfg *task.Config, out io.Writer) dump.Config {
	dc := dump.DefaultConfig()
	dc.Log = logx.New(out, "dump")
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

// check refuses the copy flags that a negative value silently
// turned into the default, as loadTask does for --threads (issue 30).
func (f *fullFlags) check() error {
	if f.bulkMaxChunks < 0 {
		return sluice.Errorf(sluice.ErrConfig, "--bulk-max-chunks", "give a positive number, or leave the flag out for the default", "--bulk-max-chunks %d is negative", f.bulkMaxChunks)
	}
	if f.progressEvery < 0 {
		return sluice.Errorf(sluice.ErrConfig, "--progress-every", "give a positive interval such as 10s, or leave the flag out for the default", "--progress-every %s is negative", f.progressEvery)
	}
	return nil
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
	mc := migrate.DefaultConfig()
	mc.Task, mc.Mode = cfg, mode
	mc.Load, mc.Dump = f.loadConfig(cfg, cfg.Name), f.dumpConfig(cfg, out)
	mc.Log = logx.New(out, "migrate "+cfg.Name)
	mc.Tracked, mc.AfterPrepare = trackedTables, afterPrepare
	mc.Progress = func(ds *dump.Stats, ls *load.Stats) func() {
		p := startProgress(out, f.progressEvery,
			progressPhase{Name: "dump", Rows: ds.Rows.Load, Bytes: ds.Bytes.Load, Done: ds.Chunks.Load, Total: ds.TotalChunks.Load},
			loadPhase(ls))
		return p.Stop
	}
	if incrementalRunner != nil {
		mc.Replicate = func(ctx context.Context, start *sluice.Position) error {
			return incrementalRunner(ctx, cfg, start, out)
		}
	}
	mc.Report = func(ctx context.Context, res *migrate.Result) {
		writeSummary(out, summary{item: "migrate (stream)", threads: cfg.Threads, pool: cfg.PoolSize, bytes: res.Bytes, rows: res.Rows,
			total: res.Total, dumpBytes: res.DumpBytes, dumpTime: res.DumpTime, loadTime: res.LoadTime})
		reportLeftOut(ctx, cfg, out) // views, triggers, routines, events
		if res.Start != nil {
			fmt.Fprintf(out, "snapshot position: %s\n", res.Start)
		}
	}
	return migrate.Run(ctx, mc)
}

// afterPrepare, set by tests, runs once the dump has its snapshot and the
// loader its plan, before a chunk is read.
var afterPrepare func()

// interrupted is the error of a run stopped by a signal: committed chunks
// stay, and the same command resumes.
func interrupted(op string) error { return migrate.Interrupted(op) }

// reportLeftOut prints, at the end of a full copy or a dump, what it did
// not copy.
func reportLeftOut(ctx context.Context, cfg *task.Config, out io.Writer) {
	if s := preflight.LeftOutLine(ctx, cfg); s != "" {
		fmt.Fprintln(out, s)
	}
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
