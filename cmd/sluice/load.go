package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/dumpfmt"
	"github.com/sluice-db/sluice/internal/logx"
	"github.com/sluice-db/sluice/load"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/task"
)

func init() { register(newLoadCmd) }

func newLoadCmd() *cobra.Command {
	f := fullFlags{targetBinlog: true}
	var dir string
	cmd := &cobra.Command{
		Use: "load --config task.yaml [--dir DIR]",
		Example: `  sluice load --config task.yaml
  sluice load --config task.yaml --dir /backup/app --pool-size 16`,
		Short: "Load a directory written by 'sluice dump' into the target",
		Long: `load creates the schemas and tables on the target (or checks that existing
ones match), then loads every chunk file on 'pool-size' connections with
LOAD DATA LOCAL INFILE (or multi-row INSERTs with --rows-per-statement).
Each chunk commits together with its checkpoint row in sluice_meta, so an
interrupted load (kill -9 included) resumes when run again, without
loading a finished chunk twice.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := f.loadTask("target")
			if err != nil {
				return err
			}
			if dir == "" {
				dir = filepath.Join(cfg.Dir, "dump")
			}
			return runLoad(c.Context(), cfg, &f, dir, c.OutOrStdout())
		},
	}
	f.addTask(cmd.Flags())
	cmd.Flags().StringVar(&dir, "dir", "", "dump directory to read (default: DIR/dump of the task)")
	addFullFlags(cmd, &f, false, true)
	return cmd
}

func runLoad(ctx context.Context, cfg *task.Config, f *fullFlags, dir string, out io.Writer) error {
	unlock, err := replicate.LockTask(cfg.Dir, cfg.Name)
	if err != nil {
		return err
	}
	defer unlock()
	m, err := dumpfmt.ReadMetadata(dir)
	if err != nil {
		return err
	}
	// Checkpoints belong to this task and this dump: loading another dump
	// (or the same tables by migrate) never mistakes its chunks for done.
	key := cfg.Name + "@dump:" + m.Started.UTC().Format(time.RFC3339Nano)
	l, err := load.Open(ctx, f.loadConfig(cfg, key))
	if err != nil {
		return err
	}
	defer l.Close()
	llog := logx.New(out, "load "+cfg.Name)
	// The dump holds every chunk: a loaded table that the target lost
	// (dropped or emptied by hand) is loaded again from it.
	inDump := map[sluice.TableRef]bool{}
	for _, tm := range m.Tables {
		inDump[tm.Table.Ref] = true
	}
	lost, err := l.ReloadLost(ctx, func(_ context.Context, t sluice.TableRef) (bool, bool, error) { return inDump[t], inDump[t], nil }, nil)
	if err != nil {
		return err
	}
	for _, t := range lost {
		llog.Info(fmt.Sprintf("%s is %s although this load wrote it; it is loaded again whole", t.Target, t.Why))
	}
	var specs []load.TableSpec
	var tables []dumpfmt.TableMeta
	for _, tm := range m.Tables {
		if !cfg.Selected(tm.Table.Ref) {
			continue
		}
		tables = append(tables, tm)
		specs = append(specs, load.TableSpec{Table: tm.Table, Plan: dumpfmt.Plan(tm.Chunks)})
	}
	if len(specs) == 0 {
		return &sluice.Error{Op: "load " + dir, Err: fmt.Errorf("%w: no table of the dump matches tables.include", sluice.ErrUnknownTable), Hint: "fix tables.include in the task file"}
	}
	began := time.Now()
	if err := l.Prepare(ctx, m.Position, specs); err != nil {
		return err
	}
	ls := l.Stats()
	llog.Info(fmt.Sprintf("%d tables from %s, %d chunks to load (%d done before)", len(specs), dir, ls.TotalChunks.Load(), ls.Skipped.Load()))
	prog := startProgress(out, f.progressEvery, loadPhase(ls))
	l.Start(ctx)
	var qerr error
	// A table loaded as one stream needs all its chunks queued before the
	// next table's: those go first, table by table.
	for _, tm := range tables {
		if !l.WholeTable(tm.Table.Ref) {
			continue
		}
		for _, c := range tm.Chunks {
			if qerr == nil && !l.Done(tm.Table.Ref, c.Index) {
				qerr = l.LoadFile(ctx, tm.Table.Ref, c, filepath.Join(dir, c.File))
			}
		}
	}
	// Chunks of the other tables are interleaved, as the dump does, so
	// loaders work on different tables.
	for i := 0; qerr == nil; i++ {
		more := false
		for _, tm := range tables {
			if l.WholeTable(tm.Table.Ref) || i >= len(tm.Chunks) {
				continue
			}
			more = true
			c := tm.Chunks[i]
			if l.Done(tm.Table.Ref, c.Index) {
				continue
			}
			if qerr = l.LoadFile(ctx, tm.Table.Ref, c, filepath.Join(dir, c.File)); qerr != nil {
				break
			}
		}
		if !more {
			break
		}
	}
	err = l.Wait()
	prog.Stop()
	if ctx.Err() != nil {
		return interrupted("load")
	}
	if err != nil {
		return err
	}
	if qerr != nil {
		return qerr
	}
	writeSummary(out, summary{item: "load", pool: cfg.PoolSize, rows: ls.Rows.Load(), bytes: ls.Bytes.Load(), total: time.Since(began), loadTime: ls.Active()})
	return nil
}
