package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-db/sluice/dump"
	"github.com/sluice-db/sluice/internal/logx"
	"github.com/sluice-db/sluice/preflight"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/task"
)

func init() { register(newDumpCmd) }

func newDumpCmd() *cobra.Command {
	f := fullFlags{targetBinlog: true}
	var dir string
	cmd := &cobra.Command{
		Use: "dump --config task.yaml [--dir DIR]",
		Example: `  sluice dump --config task.yaml
  sluice dump --config task.yaml --dir /backup/app --threads 8 --rows-per-chunk 100000`,
		Short: "Write a consistent snapshot of the source's tables to a directory",
		Long: `dump reads a consistent snapshot of the selected tables on 'threads'
connections (FLUSH TABLES WITH READ LOCK is held only while the snapshot
transactions start), split into primary-key chunks, and writes schema
files, one LOAD DATA text file per chunk and metadata.json with the binlog
position and GTID set of the snapshot. 'sluice load' reads the directory.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := f.loadTask("source")
			if err != nil {
				return err
			}
			if dir == "" {
				dir = filepath.Join(cfg.Dir, "dump")
			}
			return runDump(c.Context(), cfg, &f, dir, c.OutOrStdout())
		},
	}
	f.addTask(cmd.Flags())
	cmd.Flags().StringVar(&dir, "dir", "", "directory to write (default: DIR/dump of the task)")
	addFullFlags(cmd, &f, true, false)
	return cmd
}

func runDump(ctx context.Context, cfg *task.Config, f *fullFlags, dir string, out io.Writer) error {
	unlock, err := replicate.LockTask(cfg.Dir, cfg.Name)
	if err != nil {
		return err
	}
	defer unlock()
	sink, err := dump.NewDirSink(dir)
	if err != nil {
		return err
	}
	began := time.Now()
	dc := f.dumpConfig(cfg, out)
	d, err := dump.Open(ctx, dc)
	if err != nil {
		return err
	}
	defer d.Close()
	log := logx.New(out, "dump "+cfg.Name)
	if err := preflight.CheckSelected(ctx, cfg, d.Tables(), false, log); err != nil {
		return err
	}
	if err := sink.WriteSchemas(d.Tables()); err != nil {
		return err
	}
	ds := d.Stats()
	log.Info(fmt.Sprintf("%d tables to %s, snapshot at %s", len(d.Tables()), dir, d.Position()))
	prog := startProgress(out, f.progressEvery, progressPhase{Name: "dump", Rows: ds.Rows.Load, Bytes: ds.Bytes.Load, Done: ds.Chunks.Load, Total: ds.TotalChunks.Load})
	start := time.Now()
	err = d.Run(ctx, sink)
	took := time.Since(start)
	prog.Stop()
	if err != nil {
		return err
	}
	if err := sink.Finish(d); err != nil {
		return err
	}
	writeSummary(out, summary{item: "dump", threads: cfg.Threads, rows: ds.Rows.Load(), dumpBytes: ds.Bytes.Load(), total: time.Since(began), dumpTime: took})
	reportLeftOut(ctx, cfg, out)
	return nil
}
