package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/preflight"
)

// sluice check runs the pre-flight checks (package preflight) alone.

func init() { register(newCheckCmd) }

// ErrChecksFailed: sluice check found a failing check (exit 1).
var ErrChecksFailed = preflight.ErrChecksFailed

func newCheckCmd() *cobra.Command {
	var config, mode string
	cmd := &cobra.Command{
		Use:   "check --config task.yaml",
		Short: "Check the source, the target and the task's tables before a migration (as DM's check-task)",
		Long: `check runs the checks migrate runs before it copies anything: the source's
connection, privileges, binlog settings (log_bin, ROW format, FULL row
image), GTIDs, binlog retention, server-id, the selected tables' keys, the
target's connection, privileges and read_only, triggers on the target
tables (refused: they would fire for copied and replicated rows), and the
free disk for the relay log. One line per check: pass, warn or fail, with the fix. Exit 0
when nothing fails, 1 when a check fails.`,
		Example: `  sluice check --config task.yaml
  sluice check --config task.yaml --mode full   # only what a copy alone needs`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			switch mode {
			case "all", "incremental", "full":
			default:
				return sluice.Errorf(sluice.ErrConfig, "check --mode", "use --mode all, incremental or full", "unknown mode %q", mode)
			}
			cfg, err := taskFromFlag("check", config)
			if err != nil {
				return err
			}
			if err := cfg.Require("source", "target"); err != nil {
				return err
			}
			res := preflight.Run(c.Context(), cfg, mode)
			preflight.Print(c.OutOrStdout(), res)
			if f := preflight.FirstFailure(res); f != nil {
				return &sluice.Error{Op: "check " + cfg.Name, Err: fmt.Errorf("%w: %d of %d; the first: %s: %s", ErrChecksFailed, preflight.Failures(res), len(res), f.Name, f.Detail), Hint: f.Fix}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&config, "config", "", "task file (YAML)")
	cmd.Flags().StringVar(&mode, "mode", "all", "what the checks are for: all or incremental (replication too) or full (the copy only)")
	return cmd
}
