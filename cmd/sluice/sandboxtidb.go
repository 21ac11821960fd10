package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-db/sluice/sandbox"
)

// newSandboxTiDBCmd is `sluice sandbox tidb up|down|status`: one tidb-server
// in unistore mode (no PD, no TiKV), built once from the Go module proxy, as
// a target for demos, tests and benchmarks.
func newSandboxTiDBCmd(dir *string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tidb",
		Short: "Start and stop a local TiDB (one tidb-server in unistore mode, built once) as a target",
		Long: `One tidb-server in unistore mode (its storage in the process: no PD, no
TiKV), on 127.0.0.1, root with no password. The first run builds tidb-server
` + sandbox.TiDBVersion + ` (TiDB v8.4) from the Go module proxy into
~/.cache/sluice-tidb/<version> (or $SLUICE_TIDB_CACHE): about 11 minutes and
2.4 GB of memory on two cores, with progress; later runs start in seconds.`,
		Example: `  sluice sandbox tidb up --name tidb --port 4000
  sluice sandbox tidb down --name tidb --purge`,
	}
	up := sandbox.DefaultTiDBConfig()
	upCmd := &cobra.Command{
		Use:     "up",
		Short:   "Build tidb-server (first time), create and start a TiDB sandbox; prints its DSN when it answers",
		Example: `  sluice sandbox tidb up --name tidb --port 4000`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			up.Dir = *dir
			up.Progress = c.ErrOrStderr()
			t, err := sandbox.TiDBUp(c.Context(), up)
			if err != nil {
				return err
			}
			fmt.Fprintln(c.OutOrStdout(), t.DSN(""))
			return nil
		},
	}
	f := upCmd.Flags()
	f.StringVar(&up.Name, "name", up.Name, "sandbox name (its directory under --dir)")
	f.IntVar(&up.Port, "port", up.Port, "MySQL protocol port on 127.0.0.1")
	f.IntVar(&up.StatusPort, "status-port", 0, "HTTP status port on 127.0.0.1 (default: a free one)")
	f.StringVar(&up.Cache, "cache", up.Cache, "where tidb-server is built and kept (env SLUICE_TIDB_CACHE)")
	f.DurationVar(&up.StartTimeout, "timeout", up.StartTimeout, "how long to wait for the server to answer (the build is not counted)")

	var name string
	var purge bool
	var timeout time.Duration
	downCmd := &cobra.Command{
		Use:     "down",
		Short:   "Stop a TiDB sandbox by its own pid; --purge also removes its data",
		Example: `  sluice sandbox tidb down --name tidb --purge`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return sandbox.TiDBDown(c.Context(), *dir, name, purge, timeout)
		},
	}
	downCmd.Flags().StringVar(&name, "name", "tidb", "sandbox name")
	downCmd.Flags().BoolVar(&purge, "purge", false, "remove the sandbox's data directory too")
	downCmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "wait this long for a clean shutdown before SIGKILL")

	var statusName string
	statusCmd := &cobra.Command{
		Use:     "status",
		Example: "  sluice sandbox tidb status --name tidb",
		Short:   "Show whether a TiDB sandbox runs",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			t, err := sandbox.LoadTiDB(*dir, statusName)
			if err != nil {
				return err
			}
			state := "down"
			if pid, ok := t.Running(); ok {
				state = fmt.Sprintf("up:%d", pid)
			}
			fmt.Fprintf(c.OutOrStdout(), "%-16s %-6d %-8s %s\n", t.Name, t.Port, state, t.DSN(""))
			return nil
		},
	}
	statusCmd.Flags().StringVar(&statusName, "name", "tidb", "sandbox name")
	var cache string
	buildCmd := &cobra.Command{
		Use:     "build",
		Short:   "Build tidb-server into the cache if it is not there yet (make test runs it first); prints its path",
		Example: "  sluice sandbox tidb build",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			bin, err := sandbox.TiDBBinary(c.Context(), cache, c.ErrOrStderr())
			if err != nil {
				return err
			}
			fmt.Fprintln(c.OutOrStdout(), bin)
			return nil
		},
	}
	buildCmd.Flags().StringVar(&cache, "cache", sandbox.TiDBCacheDir(), "where tidb-server is built and kept (env SLUICE_TIDB_CACHE)")
	cmd.AddCommand(upCmd, downCmd, statusCmd, buildCmd)
	return cmd
}
