package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/internal/every"
	"github.com/sluice-db/sluice/schema"
	"github.com/sluice-db/sluice/task"
	"github.com/sluice-db/sluice/verify"
)

func init() { register(newVerifyCmd) }

// verifyFlags are the command line of sluice verify; zero means "from the
// task file".
type verifyFlags struct {
	config        string
	threads       int
	rowsPerChunk  int
	maxDiffs      int
	tables        []string
	json          bool
	rechecks      int
	recheckDelay  time.Duration
	progressEvery time.Duration
}

func newVerifyCmd() *cobra.Command {
	var f verifyFlags
	cmd := &cobra.Command{
		Use: "verify --config task.yaml",
		Example: `  sluice verify --config task.yaml
  sluice verify --config task.yaml --table 'app.orders' --json > diff.json`,
		Short: "Compare source and target table by table; exit 0 if equal, 1 if they differ",
		Long: `verify compares every table the task selects with its (routed) table on the
target. Each table is split into primary-key ranges; both servers compute a
row count and a checksum of each range, and ranges that differ are drilled
into to name every key that is missing on the target, extra on the target,
or different. Tables without a key are compared as a multiset of rows.

Exit status: 0 equal, 1 differences found, 2 the comparison could not run.
On a pair that is still replicating, rows in flight show as differences.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runVerify(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.config, "config", "", "task file (YAML) naming source, target and tables")
	fl.IntVar(&f.threads, "threads", 0, "chunks compared at once (default: the task's threads)")
	fl.IntVar(&f.rowsPerChunk, "rows-per-chunk", 0, "rows per key range (default: the task's rows-per-chunk)")
	fl.IntVar(&f.maxDiffs, "max-diffs", 20, "differing keys to print per table (counts are always complete)")
	fl.StringArrayVar(&f.tables, "table", nil, "only verify tables matching this schema.table glob (repeatable)")
	fl.BoolVar(&f.json, "json", false, "print the report as JSON instead of a table")
	fl.IntVar(&f.rechecks, "rechecks", 0, "checksum a differing chunk this many more times before reporting it (for a pair that just caught up)")
	fl.DurationVar(&f.recheckDelay, "recheck-delay", time.Second, "wait between rechecks")
	fl.DurationVar(&f.progressEvery, "progress-every", 10*time.Second, "print a progress line to stderr this often (0: never)")
	return cmd
}

func runVerify(ctx context.Context, out, errOut io.Writer, f verifyFlags) error {
	if f.config == "" {
		return &sluice.Error{Op: "verify", Err: fmt.Errorf("%w: no task file", sluice.ErrConfig), Hint: "pass --config task.yaml"}
	}
	tc, err := task.Load(f.config)
	if err != nil {
		return err
	}
	if err := tc.Require("source", "target"); err != nil {
		return err
	}
	cfg := verify.DefaultConfig()
	cfg.Threads, cfg.RowsPerChunk, cfg.MaxDiffs, cfg.Route = tc.Threads, tc.RowsPerChunk, f.maxDiffs, tc.Route
	cfg.Rechecks, cfg.RecheckDelay = f.rechecks, f.recheckDelay
	if f.threads != 0 {
		cfg.Threads = f.threads
	}
	if f.rowsPerChunk != 0 {
		cfg.RowsPerChunk = f.rowsPerChunk
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	// One connection per worker and side, plus one for planning the next
	// table while the workers check chunks.
	opts := dbconn.Options{MaxOpen: cfg.Threads + 1}
	src, err := dbconn.Open(ctx, "source", tc.Source, opts)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := dbconn.Open(ctx, "target", tc.Target, opts)
	if err != nil {
		return err
	}
	defer dst.Close()

	tables, err := verifyTables(ctx, src, tc, f.tables)
	if err != nil {
		return err
	}
	cfg.Progress = &verify.Progress{}
	stop := verifyProgress(errOut, f.progressEvery, cfg.Progress, len(tables))
	rep, err := verify.Run(ctx, cfg, src, dst, tables)
	stop()
	var qe *verify.QueryError
	if errors.As(err, &qe) {
		// Name the server and the fix: a missing privilege, a lost server.
		ep := tc.Source
		if qe.Side == verify.Target {
			ep = tc.Target
		}
		return dbconn.Classify(err, string(qe.Side), ep)
	}
	if err != nil {
		return err
	}
	if f.json {
		err = rep.WriteJSON(out)
	} else {
		err = rep.WriteText(out, f.maxDiffs)
	}
	if err != nil {
		return fmt.Errorf("verify: write report: %w", err)
	}
	return rep.Err()
}

// verifyTables lists the source tables the task selects, narrowed by the
// --table globs. A pattern that matches no table is an error naming it: a
// typo must not turn into "0 tables, all equal".
func verifyTables(ctx context.Context, src *sql.DB, tc *task.Config, only []string) ([]sluice.TableRef, error) {
	all, err := schema.ListTables(ctx, src, nil)
	if err != nil {
		return nil, dbconn.Classify(err, "source", tc.Source)
	}
	matches := func(pattern string, refs []sluice.TableRef) bool {
		one := &task.Config{Tables: task.Tables{Include: []string{pattern}}}
		for _, r := range refs {
			if one.Selected(r) {
				return true
			}
		}
		return false
	}
	for _, p := range tc.Tables.Include {
		if !matches(p, all) {
			return nil, &sluice.Error{Op: "verify", Err: fmt.Errorf("%w: tables.include pattern %q matches no table on source %s", sluice.ErrUnknownTable, p, tc.Source.Addr()),
				Hint: "check the schema and table names (patterns are schema.table globs)"}
		}
	}
	var selected []sluice.TableRef
	for _, r := range all {
		if tc.Selected(r) {
			selected = append(selected, r)
		}
	}
	if len(only) > 0 {
		for _, p := range only {
			if !matches(p, selected) {
				return nil, &sluice.Error{Op: "verify", Err: fmt.Errorf("%w: --table %q matches none of the tables the task selects on source %s", sluice.ErrUnknownTable, p, tc.Source.Addr()),
					Hint: "pass a schema.table glob that tables.include selects and tables.exclude does not remove"}
			}
		}
		filter := &task.Config{Tables: task.Tables{Include: only}}
		var kept []sluice.TableRef
		for _, r := range selected {
			if filter.Selected(r) {
				kept = append(kept, r)
			}
		}
		selected = kept
	}
	if len(selected) == 0 {
		return nil, &sluice.Error{Op: "verify", Err: fmt.Errorf("%w: tables.exclude removes every table tables.include selects", sluice.ErrUnknownTable),
			Hint: "narrow tables.exclude in the task file"}
	}
	return selected, nil
}

// verifyProgress prints a progress line every `every` until the returned
// stop func is called; stop waits for the printer to finish.
func verifyProgress(w io.Writer, period time.Duration, p *verify.Progress, tables int) (stop func()) {
	if period <= 0 {
		return func() {}
	}
	start := time.Now()
	return every.Start(period, func() {
		planned, chunks, total := p.TablesPlanned.Load(), p.Chunks.Load(), p.ChunksPlanned.Load()
		pct := ""
		if planned == int64(tables) && total > 0 {
			pct = fmt.Sprintf(" (%d%%)", chunks*100/total)
		}
		fmt.Fprintf(w, "verify %s: %d/%d tables planned, %d/%d chunks%s, %d rows, %d chunks differ\n",
			time.Since(start).Round(time.Second), planned, tables, chunks, total, pct, p.Rows.Load(), p.DiffChunks.Load())
	})
}
