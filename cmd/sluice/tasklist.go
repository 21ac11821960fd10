package main

import (
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sluice-db/sluice/replicate"
)

func init() {
	register(func() *cobra.Command {
		cmd := &cobra.Command{Use: "task", Short: "Work with the tasks on this machine",
			Example: `  sluice task list
  sluice task list --dir /srv/sluice`}
		cmd.AddCommand(newTaskListCmd(), newTaskAddCmd(), newTaskRemoveCmd(), newTaskMoveCmd())
		return cmd
	})
}

func newTaskListCmd() *cobra.Command {
	var dir string
	var cf clusterFlags
	cmd := &cobra.Command{
		Use:   "list [--dir DIR | --etcd URL]",
		Short: "List the task directories under DIR (default $SLUICE_HOME, else the current directory) with their stage",
		Example: `  sluice task list
  SLUICE_HOME=/srv/sluice sluice task list`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if cf.etcd != "" {
				return clusterStatus(c.Context(), c.OutOrStdout(), &cf, false)
			}
			if dir == "" {
				dir = os.Getenv("SLUICE_HOME")
			}
			if dir == "" {
				dir = "."
			}
			return listTasks(c.OutOrStdout(), dir)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "where to look for task directories (up to 4 levels down)")
	cf.add(cmd.Flags())
	return cmd
}

// listTasks finds task directories (a task.lock or status.json) under root
// and prints one line each: name, stage (running with its pid, or the last
// stage the status file recorded), applied position, directory.
func listTasks(w io.Writer, root string) error {
	dirs, err := replicate.FindTaskDirs(root)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tSTAGE\tAPPLIED\tDIR")
	for _, d := range dirs {
		name, stage, applied := "?", "never ran replication", "-"
		if s, err := replicate.ReadStatus(d); err == nil {
			name, stage = s.Task, s.Stage
			if s.Applied.File != "" {
				applied = s.Applied.String()
			}
		}
		if pid, running, _ := replicate.Holder(d); running {
			stage = fmt.Sprintf("running (pid %d)", pid)
			if name == "?" {
				stage = fmt.Sprintf("copying (pid %d)", pid)
			}
		} else if stage == replicate.StageRunning || stage == replicate.StageRetrying || stage == replicate.StageStarting {
			stage = "gone (last seen " + stage + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", name, stage, applied, d)
	}
	return tw.Flush()
}
