package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-db/sluice/sandbox"
)

func init() { register(newSandboxCmd) }

func newSandboxCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use: "sandbox",
		Example: `  sluice sandbox up --name src --port 3307
  sluice sandbox list
  sluice sandbox down --name src --purge`,
		Short: "Start and stop local MariaDB instances for demos, tests and benchmarks",
		Long: `Local MariaDB instances from the installed mariadbd, each in DIR/NAME, on
127.0.0.1 only, ready for replication (ROW binlog, full images and metadata,
GTID strict mode, distinct server_id). root has an empty password on
127.0.0.1; the user repl/repl has replication privileges.`,
	}
	cmd.PersistentFlags().StringVar(&dir, "dir", sandbox.DefaultDir(), "state directory holding the instances (env SLUICE_HOME)")

	up := sandbox.DefaultConfig()
	upCmd := &cobra.Command{
		Use: "up",
		Example: `  sluice sandbox up --name src --port 3307
  sluice sandbox up --name dst --port 3308 --server-id 2 --buffer-pool 1G
  sluice sandbox up --name sec --port 3309 --tls --option require_secure_transport=ON`,
		Short: "Create (first time) and start an instance; prints its DSN when it accepts connections",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			up.Dir = dir
			inst, err := sandbox.Up(c.Context(), up)
			if err != nil {
				return err
			}
			fmt.Fprintln(c.OutOrStdout(), inst.DSN(""))
			if ca := inst.CAFile(); ca != "" {
				fmt.Fprintf(c.OutOrStdout(), "tls: {mode: verify-identity, ca: %s}\n", ca)
			}
			return nil
		},
	}
	f := upCmd.Flags()
	f.StringVar(&up.Name, "name", up.Name, "instance name")
	f.IntVar(&up.Port, "port", up.Port, "TCP port on 127.0.0.1")
	f.Uint32Var(&up.ServerID, "server-id", 0, "server_id (default: the port)")
	f.Uint32Var(&up.DomainID, "domain-id", 0, "gtid_domain_id")
	f.StringVar(&up.BufferPool, "buffer-pool", up.BufferPool, "innodb_buffer_pool_size")
	f.StringArrayVar(&up.Options, "option", nil, "extra [mariadbd] option, key=value (repeatable)")
	f.BoolVar(&up.TLS, "tls", false, "serve TLS with a CA and server certificate made for 127.0.0.1 (the CA is <dir>/<name>/tls/ca.pem)")
	f.DurationVar(&up.StartTimeout, "timeout", up.StartTimeout, "how long to wait for the server to accept connections")

	var name string
	var purge bool
	var timeout time.Duration
	downCmd := &cobra.Command{
		Use: "down",
		Example: `  sluice sandbox down --name src
  sluice sandbox down --name src --purge   # also remove its data`,
		Short: "Stop an instance by its own pid; --purge also removes its directory",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return sandbox.Down(c.Context(), dir, name, purge, timeout)
		},
	}
	downCmd.Flags().StringVar(&name, "name", "sandbox", "instance name")
	downCmd.Flags().BoolVar(&purge, "purge", false, "remove the instance's datadir and config too")
	downCmd.Flags().DurationVar(&timeout, "timeout", time.Minute, "wait this long for a clean shutdown before SIGKILL")

	var statusName string
	statusCmd := &cobra.Command{
		Use: "status",
		Example: `  sluice sandbox status
  sluice sandbox status --name src`,
		Short: "Show whether instances are running (all, or --name)",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			insts, err := sandbox.List(dir)
			if err != nil {
				return err
			}
			if statusName != "" {
				inst, err := sandbox.Load(dir, statusName)
				if err != nil {
					return err
				}
				insts = []*sandbox.Instance{inst}
			}
			printInstances(c, insts)
			return nil
		},
	}
	statusCmd.Flags().StringVar(&statusName, "name", "", "only this instance")

	listCmd := &cobra.Command{
		Use: "list",
		Example: `  sluice sandbox list
  sluice sandbox list --dir /tmp/sandboxes`,
		Short: "List the instances under the state directory",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			insts, err := sandbox.List(dir)
			if err != nil {
				return err
			}
			printInstances(c, insts)
			return nil
		},
	}
	cmd.AddCommand(upCmd, downCmd, statusCmd, listCmd, newSandboxEtcdCmd(&dir), newSandboxKafkaCmd(&dir), newSandboxTiDBCmd(&dir))
	return cmd
}

func printInstances(c *cobra.Command, insts []*sandbox.Instance) {
	w := c.OutOrStdout()
	if len(insts) == 0 {
		fmt.Fprintln(w, "no sandboxes")
		return
	}
	fmt.Fprintf(w, "%-16s %-6s %-10s %-8s %s\n", "NAME", "PORT", "SERVER_ID", "STATE", "DSN")
	for _, i := range insts {
		state := "-"
		if pid, ok := i.Running(); ok {
			state = fmt.Sprintf("up:%d", pid)
		} else {
			state = "down"
		}
		fmt.Fprintf(w, "%-16s %-6d %-10d %-8s %s\n", i.Name, i.Port, i.ServerID, strings.TrimSpace(state), i.DSN(""))
	}
}
