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
	return root
}

// errPrecheck marks a check failure that stopped migrate (exit 2, a
// refused run), as opposed to sluice check's own verdict (exit 1).
var errPrecheck = errors.New("refused before starting")

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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
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
