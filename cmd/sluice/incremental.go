package main

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/logx"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/task"
)

// The incremental replication plugs into `sluice migrate --mode all|incremental`.
func init() {
	incrementalRunner = runIncremental
	trackedTables = func(ctx context.Context, cfg *task.Config) (func(sluice.TableRef) bool, error) {
		rc, err := replicate.FromTask(cfg)
		if err != nil {
			return nil, err
		}
		return replicate.TrackedTables(ctx, rc)
	}
}

// runIncremental replicates until ctx ends (SIGINT/SIGTERM stop it cleanly)
// or a fatal error; a rerun resumes from the checkpoint on the target.
func runIncremental(ctx context.Context, cfg *task.Config, start *sluice.Position, out io.Writer) error {
	rc, err := replicate.FromTask(cfg)
	if err != nil {
		return err
	}
	if !isTerminal(out) {
		rc.Log = logx.New(out, "replicate "+rc.Name)
		t, err := replicate.New(rc)
		if err != nil {
			return err
		}
		defer setPauser(t)()
		return t.Run(ctx, start)
	}
	// On a terminal, a live line under the log: lag, rates, position.
	lo := &liveOut{out: out}
	rc.Log = logx.New(lo, "replicate "+rc.Name)
	t, err := replicate.New(rc)
	if err != nil {
		return err
	}
	defer setPauser(t)()
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				s := t.Status()
				lo.set(liveLine(s, termWidth(out))) // liveline.go
			}
		}
	}()
	err = t.Run(ctx, start)
	close(done)
	lo.set("")
	return err
}

// liveOut writes the task's log lines above a status line that it redraws
// in place: each log line first clears the status line, then draws it
// again under itself.
type liveOut struct {
	mu   sync.Mutex
	out  io.Writer
	line string
}

func (l *liveOut) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.line != "" {
		io.WriteString(l.out, "\r\033[K")
	}
	n, err := l.out.Write(p)
	if l.line != "" {
		io.WriteString(l.out, l.line)
	}
	return n, err
}

// set replaces the status line ("" removes it).
func (l *liveOut) set(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	io.WriteString(l.out, "\r\033[K"+s)
	l.line = s
}
