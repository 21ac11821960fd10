// Command sluice moves MySQL-family data and keeps it consistent: full
// migration, incremental replication, a binlog service, a distributed
// transaction coordinator and benchmarks. This package only turns flags and
// task files into typed configs and wires the stage packages together.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/preflight"
)

// commands are added by each command's file in init, so that files for
// different capabilities never have to edit one shared list.
var commands []func() *cobra.Command

func register(f func() *cobra.Command) { commands = append(commands, f) }

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use: "sluice",
		Example: `  sluice sandbox up --name src --port 3307 && sluice sandbox up --name dst --port 3308
  sluice migrate --config task.yaml --mode all
  sluice status --config task.yaml`,
		Short: "Move MySQL/MariaDB data and keep it consistent",
		Long: `sluice moves MySQL-family data and keeps it consistent across databases:
full migration (dump, load, verify), incremental replication, a binlog
service, distributed transactions, and benchmarks against the usual peers.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	for _, f := range commands {
		root.AddCommand(f())
	}
	refuseUnknownSubcommands(root)
	cobraErrorsAsSluice(root)
	return root
}

// refuseUnknownSubcommands makes a group command (sluice task, sluice dtx,
// ...) fail on a word that is none of its subcommands: cobra prints the
// group's help and exits 0 for "sluice task lsit", so a script's typo
// passed for success. Bare, a group still prints its help.
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if c.Parent() == nil || !c.HasSubCommands() || c.Runnable() {
		return
	}
	c.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		hint := "run '" + cmd.CommandPath() + " --help' for the list"
		if cmd.SuggestionsMinimumDistance <= 0 {
			cmd.SuggestionsMinimumDistance = 2
		}
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			hint = "did you mean '" + cmd.CommandPath() + " " + s[0] + "'?"
		}
		return sluice.Errorf(sluice.ErrConfig, strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" "), hint, "unknown command %q", args[0])
	}
	c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
}

// errPrecheck marks a check failure that stopped migrate (exit 2, a
// refused run), as opposed to sluice check's own verdict (exit 1).
var errPrecheck = preflight.ErrRefused

// exitCode: 1 means "verify found differences" or "sluice check found a
// failing check", 3 "status found the task
// not running", 2 any other failure, so scripts can tell a difference or a
// stopped task from a broken run.
func exitCode(err error) int {
	switch {
	case errors.Is(err, sluice.ErrVerifyDifferent), errors.Is(err, ErrChecksFailed) && !errors.Is(err, errPrecheck):
		return 1
	case errors.Is(err, sluice.ErrNotRunning):
		return 3
	}
	return 2
}

func main() {
	// SIGHUP (the terminal closed, an ssh session lost) stops as cleanly as
	// INT and TERM: a copy under commit-unit auto must roll back or commit
	// its open transaction, not die with it.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	handlePauseSignals()
	endProfile := startProfile()
	err := newRoot().ExecuteContext(ctx)
	endProfile()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sluice: "+strings.Join(strings.Fields(err.Error()), " "))
		stop()
		os.Exit(exitCode(err))
	}
}
