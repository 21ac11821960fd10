package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/task"
)

func init() { register(newStatusCmd) }

func newStatusCmd() *cobra.Command {
	var config string
	var asJSON bool
	var cf clusterFlags
	cmd := &cobra.Command{
		Use: "status --config task.yaml",
		Example: `  sluice status --config task.yaml
  sluice status --config task.yaml --json | jq .lag_seconds
  sluice status --config task.yaml >/dev/null || alert "replication is down"   # exit 3: failed or stopped`,
		Short: "Show a replication task's stage, positions, lag and rates",
		Long: `status reads the snapshot a running replication task refreshes every second
in its directory (status.json): the stage; the source position (from events,
or heartbeats while the source is idle), the end of the relay log and the
position applied on the target; the lag in seconds; events/s and
transactions/s. The same figures are served as Prometheus metrics on the
task's metrics-addr.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if cf.etcd != "" {
				return clusterStatus(c.Context(), c.OutOrStdout(), &cf, asJSON)
			}
			cfg, err := taskFromFlag("status", config)
			if err != nil {
				return err
			}
			if len(cfg.Sources) > 0 {
				return globalStatus(c.OutOrStdout(), cfg.Dir, asJSON)
			}
			s, err := replicate.ReadStatus(cfg.Dir)
			if err != nil {
				return err
			}
			running := taskRunning(cfg.Dir)
			if asJSON {
				enc := json.NewEncoder(c.OutOrStdout())
				enc.SetIndent("", "  ")
				hs, err := replicate.ReadHandles(cfg.Dir)
				if err != nil {
					return err
				}
				if err := enc.Encode(struct {
					replicate.Status
					Running bool               `json:"running"`
					Handled []replicate.Handle `json:"handled,omitempty"`
				}{s, running, hs}); err != nil {
					return err
				}
			} else {
				printStatus(c.OutOrStdout(), s, running, cfg.Dir)
			}
			return healthError(s, running)
		},
	}
	cmd.Flags().StringVar(&config, "config", "", "task file (YAML)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
	cf.add(cmd.Flags())
	return cmd
}

// taskRunning reports whether a process holds the task's lock.
func taskRunning(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "task.lock"))
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return true
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

func printStatus(w io.Writer, s replicate.Status, running bool, dir string) {
	stage := s.Stage
	switch {
	case running:
		stage = fmt.Sprintf("%s (pid %d, up %s)", s.Stage, s.PID, time.Since(s.Started).Round(time.Second))
	case s.Stage == replicate.StageRunning || s.Stage == replicate.StageRetrying || s.Stage == replicate.StageStarting || s.Stage == replicate.StageCopying || s.Stage == replicate.StagePaused:
		stage = fmt.Sprintf("not running (last seen %s, %s ago; the process ended without a clean stop)", s.Stage, time.Since(s.Updated).Round(time.Second))
	}
	row := func(k, v string) { fmt.Fprintf(w, "%-12s %s\n", k+":", v) }
	row("task", s.Task)
	row("stage", stage)
	row("source", s.Source.String())
	row("relay", s.Relay.String())
	row("applied", s.Applied.String())
	row("lag", fmt.Sprintf("%.1f s", s.LagSeconds))
	row("events/s", fmt.Sprintf("%.0f", s.EventsPerSec))
	row("txns/s", fmt.Sprintf("%.0f", s.TxnsPerSec))
	row("totals", fmt.Sprintf("%d events, %d transactions, %d rows, %d DDL", s.Events, s.Txns, s.Rows, s.DDL))
	if s.KafkaTxns > 0 {
		// A sink task: how many Kafka transactions carried those source
		// transactions (each with its checkpoint).
		row("kafka", fmt.Sprintf("%d transactions committed, with the checkpoint in each", s.KafkaTxns))
	}
	row("relay log", fmt.Sprintf("%d files in %s", s.RelayFiles, filepath.Join(dir, "relay")))
	row("reconnects", fmt.Sprintf("%d to the source, %d applier restarts", s.Reconnects, s.Restarts))
	if running && s.MetricsAddr != "" {
		row("metrics", "http://"+s.MetricsAddr+"/metrics")
	}
	row("updated", s.Updated.Local().Format(time.RFC3339))
	if sv := s.Serve; sv != nil {
		row("serving", fmt.Sprintf("on %s, %d dumps in progress", sv.Addr, len(sv.Replicas)))
		for _, r := range sv.Replicas {
			row("  replica", fmt.Sprintf("server_id %d from %s at %s:%d, lag %.1f s, sent %d events, %d transactions, %.1f MB, DT p50 %.0f ms p99 %.0f ms",
				r.ServerID, r.Addr, r.File, r.Pos, r.LagSeconds, r.Events, r.Txns, float64(r.Bytes)/1e6, r.DelayP50Ms, r.DelayP99Ms))
		}
	}
	if c := s.Copy; c != nil {
		eta := ""
		if c.ETASeconds > 0 {
			eta = ", ETA " + (time.Duration(c.ETASeconds) * time.Second).String()
		}
		row("copy", fmt.Sprintf("%d rows, %.1f MB, %d of %d chunks%s", c.Rows, float64(c.Bytes)/1e6, c.ChunksDone, c.ChunksTotal, eta))
		for _, t := range c.Tables {
			row("  table", fmt.Sprintf("%s: %d of %d chunks", t.Table, t.Done, t.Total))
		}
	}
	if s.Error != "" {
		row("error", s.Error)
	}
	hs, _ := replicate.ReadHandles(dir)
	for _, h := range hs {
		row("handled", h.String())
	}
}

// healthError makes status a health check: nil while a process runs the
// task and it has not failed; otherwise an ErrNotRunning that says why.
func healthError(s replicate.Status, running bool) error {
	switch {
	case s.Stage == replicate.StageCopying && running:
		return nil
	case s.Stage == replicate.StageFailed:
		return &sluice.Error{Op: "status", Err: fmt.Errorf("%w: task %s failed: %s", sluice.ErrNotRunning, s.Task, s.Error),
			Hint: "fix what the error names, then start the task again with the same command"}
	case !running && s.Stage == replicate.StageStopped && s.Applied.File == "" && s.Copy != nil:
		return &sluice.Error{Op: "status", Err: fmt.Errorf("%w: task %s's copy ended (%d of %d chunks of this run loaded)", sluice.ErrNotRunning, s.Task, s.Copy.ChunksDone, s.Copy.ChunksTotal),
			Hint: "sluice migrate --mode all replicates from the copy's snapshot; the same command resumes an interrupted copy"}
	case !running && s.Stage == replicate.StageStopped:
		return &sluice.Error{Op: "status", Err: fmt.Errorf("%w: task %s was stopped cleanly at %s", sluice.ErrNotRunning, s.Task, s.Applied.String()),
			Hint: "start it again with the same command to resume"}
	case !running:
		return &sluice.Error{Op: "status", Err: fmt.Errorf("%w: task %s has no process (last seen %s at %s, without a clean stop)", sluice.ErrNotRunning, s.Task, s.Stage, s.Updated.UTC().Format(time.RFC3339)),
			Hint: "start it again with the same command; it resumes from its checkpoint"}
	}
	return nil
}

// taskFromFlag reads the task file a command's --config names.
func taskFromFlag(op, config string) (*task.Config, error) {
	if config == "" {
		return nil, &sluice.Error{Op: op, Err: fmt.Errorf("%w: --config is required", sluice.ErrConfig), Hint: "pass --config task.yaml"}
	}
	return task.Load(config)
}

// globalStatus prints a global binlog's status (sluice serve with
// sources:): the merged stream, each source's part and lag, and each
// replica reading it.
func globalStatus(w io.Writer, dir string, asJSON bool) error {
	s, err := replicate.ReadGlobalStatus(dir)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	row := func(k, v string) { fmt.Fprintf(w, "%-12s %s\n", k+":", v) }
	m := s.Merge
	row("merged", fmt.Sprintf("%s; %d transactions, %d events, %.1f MB since start", m.GTID, m.Transactions, m.Events, float64(m.Bytes)/1e6))
	row("rates", fmt.Sprintf("%.0f txns/s, %.0f events/s, %.2f MB/s", s.Rates.Transactions, s.Rates.Events, s.Rates.Bytes/1e6))
	if m.Waiting != "" {
		row("waiting", fmt.Sprintf("for source %s since %s (nothing heard from it since the oldest waiting transaction was committed)", m.Waiting, m.WaitingSince.Local().Format(time.RFC3339)))
	}
	for i, src := range s.Sources {
		line := fmt.Sprintf("%s (domain %d): relay at %s, merged up to %s", src.Name, src.DomainID, src.Relay, src.Merged)
		if i < len(m.Sources) {
			ms := m.Sources[i]
			line += fmt.Sprintf(", lag %.1f s; %.0f txns/s, %.0f events/s, %.2f MB/s; %d transactions since start",
				ms.LagSeconds, src.Rates.Transactions, src.Rates.Events, src.Rates.Bytes/1e6, ms.Transactions)
		}
		row("  source", line)
	}
	if sv := s.Serve; sv != nil {
		row("serving", fmt.Sprintf("on %s, %d dumps in progress", sv.Addr, len(sv.Replicas)))
		for _, r := range sv.Replicas {
			row("  replica", fmt.Sprintf("server_id %d from %s at %s:%d, lag %.1f s, sent %d events, %d transactions, %.1f MB, DT p50 %.0f ms p99 %.0f ms",
				r.ServerID, r.Addr, r.File, r.Pos, r.LagSeconds, r.Events, r.Txns, float64(r.Bytes)/1e6, r.DelayP50Ms, r.DelayP99Ms))
		}
	}
	if s.MetricsAddr != "" {
		row("metrics", "http://"+s.MetricsAddr+"/metrics")
	}
	row("updated", fmt.Sprintf("%s (%s ago)", s.Updated.Local().Format(time.RFC3339), time.Since(s.Updated).Round(time.Second)))
	return nil
}
