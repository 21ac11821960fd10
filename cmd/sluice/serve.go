package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/logx"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/task"
)

func init() { register(newServeCmd) }

func newServeCmd() *cobra.Command {
	var config string
	cmd := &cobra.Command{
		Use: "serve",
		Example: `  sluice serve --config binlog-server.yaml

  # binlog-server.yaml: no target, so a pure binlog server
  name: bls
  source: {host: db1, port: 3306, user: repl, password: ${SRC_PW}}
  incremental: {binlog-file: mysql-bin.000042, binlog-pos: 4}
  serve:
    listen: 127.0.0.1:3310
    server-id: 4242
    users: [{user: replica, password: ${SERVE_PW}}]`,
		Short: "Serve the source's binlog over the MySQL replication protocol (a binlog server)",
		Long: `serve copies the source's binlog into the task's relay log and serves the
relay to MariaDB replicas (CHANGE MASTER TO ... MASTER_LOG_FILE, MASTER_LOG_POS),
mariadb-binlog --read-from-remote-server and CDC tools, with the source's file
names and positions, by file and position or by GTID (MASTER_USE_GTID). A
restart continues where the relay's complete data ends.

With a target: in the task file, serve also replicates to it, as
'sluice migrate --mode incremental' does, and serves the same relay log.

With sources: [{name, host, port, user, password, domain-id}] instead of
source:, serve relays every source and serves one global binlog that merges
them by commit time, each source's transactions in its own GTID domain
(docs/manual/global-binlog.md).`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if config == "" {
				return sluice.Errorf(sluice.ErrConfig, "serve", "pass the task file with --config", "no --config")
			}
			cfg, err := task.Load(config)
			if err != nil {
				return err
			}
			if len(cfg.Sources) > 0 {
				// sources: a global binlog of several sources (the task file
				// refuses source: and target: beside it).
				if err := cfg.Require("serve"); err != nil {
					return err
				}
				return replicate.RunGlobalServe(c.Context(), cfg, logx.NewUntimed(c.OutOrStdout(), "serve "+cfg.Name), func(addr string) {
					fmt.Fprintf(c.OutOrStdout(), "serving on %s\n", addr)
				})
			}
			if err := cfg.Require("source", "serve"); err != nil {
				return err
			}
			if cfg.Has("target") {
				// Replicate and serve the same relay log (replicate.Config.Serve).
				return runIncremental(c.Context(), cfg, nil, c.OutOrStdout())
			}
			return replicate.RunServe(c.Context(), cfg, logx.NewUntimed(c.OutOrStdout(), "serve "+cfg.Name), func(addr string) {
				fmt.Fprintf(c.OutOrStdout(), "serving on %s\n", addr)
			})
		},
	}
	cmd.Flags().StringVar(&config, "config", "", "task file (YAML) with source: and serve:")
	return cmd
}
