package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-db/sluice/sandbox"
)

// newSandboxEtcdCmd is `sluice sandbox etcd up|down|status`: a one-member
// etcd from the installed etcd-server package, for workers (sluice worker)
// in demos and tests.
func newSandboxEtcdCmd(dir *string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "etcd",
		Short: "Start and stop a local one-member etcd (Debian's etcd-server) for sluice workers",
		Example: `  sluice sandbox etcd up --name etcd --port 2379
  sluice sandbox etcd down --name etcd --purge`,
	}
	up := sandbox.DefaultEtcdConfig()
	upCmd := &cobra.Command{
		Use:     "up",
		Short:   "Create (first time) and start an etcd member on 127.0.0.1; prints its client URL when healthy",
		Example: `  sluice sandbox etcd up --name etcd --port 2379   # peer port 2380`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			up.Dir = *dir
			e, err := sandbox.EtcdUp(c.Context(), up)
			if err != nil {
				return err
			}
			fmt.Fprintln(c.OutOrStdout(), e.Endpoint())
			return nil
		},
	}
	f := upCmd.Flags()
	f.StringVar(&up.Name, "name", up.Name, "sandbox name (its directory under --dir)")
	f.IntVar(&up.Port, "port", up.Port, "client port on 127.0.0.1")
	f.IntVar(&up.PeerPort, "peer-port", 0, "peer port on 127.0.0.1 (default: --port + 1)")
	f.DurationVar(&up.StartTimeout, "timeout", up.StartTimeout, "how long to wait for the member to become healthy")

	var name string
	var purge bool
	var timeout time.Duration
	downCmd := &cobra.Command{
		Use:     "down",
		Short:   "Stop an etcd sandbox by its own pid; --purge also removes its data",
		Example: `  sluice sandbox etcd down --name etcd --purge`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return sandbox.EtcdDown(c.Context(), *dir, name, purge, timeout)
		},
	}
	downCmd.Flags().StringVar(&name, "name", "etcd", "sandbox name")
	downCmd.Flags().BoolVar(&purge, "purge", false, "remove the member's data directory too")
	downCmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "wait this long for a clean shutdown before SIGKILL")

	var statusName string
	statusCmd := &cobra.Command{
		Use:     "status",
		Example: "  sluice sandbox etcd status --name etcd",
		Short:   "Show whether an etcd sandbox runs",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			e, err := sandbox.LoadEtcd(*dir, statusName)
			if err != nil {
				return err
			}
			state := "down"
			if pid, ok := e.Running(); ok {
				state = fmt.Sprintf("up:%d", pid)
			}
			fmt.Fprintf(c.OutOrStdout(), "%-16s %-6d %-8s %s\n", e.Name, e.Port, state, e.Endpoint())
			return nil
		},
	}
	statusCmd.Flags().StringVar(&statusName, "name", "etcd", "sandbox name")
	cmd.AddCommand(upCmd, downCmd, statusCmd)
	return cmd
}
