package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
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
	depth0 := strings.Count(filepath.Clean(root), string(filepath.Separator))
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if d != nil && d.IsDir() && p != root {
				return fs.SkipDir // unreadable: not ours to list
			}
			return err
		}
		if d.IsDir() {
			if strings.Count(filepath.Clean(p), string(filepath.Separator))-depth0 > 4 || d.Name() == "relay" || d.Name() == "dump" {
				return fs.SkipDir
			}
			return nil
		}
		if d.Name() == "task.lock" || d.Name() == replicate.StatusFile {
			seen[filepath.Dir(p)] = true
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("task list %s: %w", root, err)
	}
	dirs := make([]string, 0, len(seen))
	for d := range seen {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
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
