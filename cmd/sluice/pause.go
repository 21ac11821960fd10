package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/task"
)

// sluice pause and resume signal the process that runs the task: SIGUSR1
// pauses replication, SIGUSR2 resumes it. The process always handles both
// (their default action would end it), so a pause sent during the copy is
// only noted: the copy goes on.

var (
	pauserMu sync.Mutex
	pauser   interface {
		Pause() bool
		Resume() bool
	}
)

// setPauser makes t the target of the pause signals; the returned func
// clears it.
func setPauser(t *replicate.Task) func() {
	pauserMu.Lock()
	pauser = t
	pauserMu.Unlock()
	return func() {
		pauserMu.Lock()
		pauser = nil
		pauserMu.Unlock()
	}
}

// handlePauseSignals routes SIGUSR1 and SIGUSR2 for the process's life.
func handlePauseSignals() {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		for s := range ch {
			pauserMu.Lock()
			p := pauser
			pauserMu.Unlock()
			switch {
			case p == nil:
				fmt.Fprintln(os.Stderr, "sluice: pause and resume apply to replication; the copy goes on")
			case s == syscall.SIGUSR1:
				p.Pause()
			default:
				p.Resume()
			}
		}
	}()
}

func init() {
	register(func() *cobra.Command { return newPauseCmd("pause") })
	register(func() *cobra.Command { return newPauseCmd("resume") })
}

func newPauseCmd(action string) *cobra.Command {
	var config string
	var wait time.Duration
	want := replicate.StagePaused
	if action == "resume" {
		want = replicate.StageRunning
	}
	cmd := &cobra.Command{
		Use: action + " --config task.yaml",
		Short: map[string]string{"pause": "Pause a running replication task (it stops reading and applying, and keeps its process)",
			"resume": "Resume a paused replication task from its checkpoint"}[action],
		Example: "  sluice " + action + " --config task.yaml",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg, err := taskFromFlag(action, config)
			if err != nil {
				return err
			}
			return pauseTask(cfg, action, wait, c.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&config, "config", "", "task file (YAML)")
	cmd.Flags().DurationVar(&wait, "wait", 30*time.Second, "how long to wait for the task to be "+want)
	return cmd
}

// pauseTask is sluice pause and sluice resume (action): it signals the
// process that runs the task and waits up to wait for the stage to change.
// The console runs it too.
func pauseTask(cfg *task.Config, action string, wait time.Duration, out io.Writer) error {
	want, sig := replicate.StagePaused, syscall.SIGUSR1
	if action == "resume" {
		want, sig = replicate.StageRunning, syscall.SIGUSR2
	}
	op := action + " task " + cfg.Name
	pid, running, err := replicate.Holder(cfg.Dir)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if !running || pid <= 0 {
		return &sluice.Error{Op: op, Err: fmt.Errorf("%w: no process runs the task", sluice.ErrNotRunning), Hint: "start it with the command that ran it"}
	}
	if s, err := replicate.ReadStatus(cfg.Dir); err == nil && s.Stage == want {
		fmt.Fprintf(out, "task %s is %s already\n", cfg.Name, want)
		return nil
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return &sluice.Error{Op: op, Err: fmt.Errorf("signal pid %d: %w", pid, err), Hint: "run it as the user that runs the task"}
	}
	for deadline := time.Now().Add(wait); ; {
		if s, err := replicate.ReadStatus(cfg.Dir); err == nil && s.Stage == want {
			fmt.Fprintf(out, "task %s (pid %d) %s at %s\n", cfg.Name, pid, want, s.Applied)
			return nil
		}
		if time.Now().After(deadline) {
			return &sluice.Error{Op: op, Err: fmt.Errorf("the task is not %s after %s (a copy cannot be paused; replication can)", want, wait),
				Hint: "see sluice status --config; " + action + " again once replication runs"}
		}
		time.Sleep(100 * time.Millisecond)
	}
}
