package main

import (
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/task"
)

func init() { register(newStopCmd) }

func newStopCmd() *cobra.Command {
	var config string
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "stop --config task.yaml",
		Short: "Stop a running task cleanly (what Ctrl-C does to it)",
		Long: `stop asks the process that runs the task (the pid in its task.lock) to
stop, as SIGTERM or Ctrl-C would: a copy keeps every committed chunk, and
replication commits what it applied with its checkpoint. It waits until
the process has let go of the task, then exits 0; a task that is not
running is already stopped (exit 0). The same command that started the
task resumes it.`,
		Example: `  sluice stop --config task.yaml
  sluice stop --config task.yaml --wait 5m && sluice status --config task.yaml`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := taskFromFlag("stop", config)
			if err != nil {
				return err
			}
			return stopTask(cfg, wait, c.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&config, "config", "", "task file (YAML)")
	cmd.Flags().DurationVar(&wait, "wait", time.Minute, "how long to wait for the process to stop")
	return cmd
}

func stopTask(cfg *task.Config, wait time.Duration, out io.Writer) error {
	pid, running, err := replicate.Holder(cfg.Dir)
	if err != nil {
		return fmt.Errorf("stop task %s: %w", cfg.Name, err)
	}
	if !running {
		fmt.Fprintf(out, "task %s is not running\n", cfg.Name)
		return nil
	}
	if pid <= 0 {
		return &sluice.Error{Op: "stop task " + cfg.Name, Err: fmt.Errorf("a process holds %s/task.lock but wrote no pid", cfg.Dir),
			Hint: "stop it with Ctrl-C or SIGTERM (fuser " + cfg.Dir + "/task.lock names it)"}
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return &sluice.Error{Op: "stop task " + cfg.Name, Err: fmt.Errorf("signal pid %d: %w", pid, err), Hint: "run stop as the user that runs the task"}
	}
	deadline := time.Now().Add(wait)
	for {
		_, running, err := replicate.Holder(cfg.Dir)
		if err != nil {
			return fmt.Errorf("stop task %s: %w", cfg.Name, err)
		}
		if !running {
			break
		}
		if time.Now().After(deadline) {
			return &sluice.Error{Op: "stop task " + cfg.Name, Err: fmt.Errorf("pid %d did not stop within %s", pid, wait),
				Hint: fmt.Sprintf("wait longer (--wait), or kill -9 %d: a restart resumes from the last checkpoint without losing or repeating a change", pid)}
		}
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Fprintf(out, "task %s (pid %d) stopped\n", cfg.Name, pid)
	return nil
}
