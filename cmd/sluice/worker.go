package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/cluster"
	"github.com/sluice-db/sluice/internal/logx"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/sandbox"
	"github.com/sluice-db/sluice/task"
)

func init() { register(newWorkerCmd) }

// clusterFlags are the flags every etcd-backed command shares.
type clusterFlags struct {
	etcd   string
	prefix string
	ttl    time.Duration
}

func (f *clusterFlags) add(fl interface {
	StringVar(*string, string, string, string)
}) {
	fl.StringVar(&f.etcd, "etcd", "", "etcd client URL(s), comma-separated (sluice sandbox etcd up starts one)")
	fl.StringVar(&f.prefix, "etcd-prefix", "/sluice", "root of sluice's keys in etcd")
}

func (f *clusterFlags) config() cluster.Config {
	var eps []string
	for _, e := range strings.Split(f.etcd, ",") {
		if e = strings.TrimSpace(e); e != "" {
			eps = append(eps, e)
		}
	}
	c := cluster.DefaultConfig(eps...)
	c.Prefix = f.prefix
	if f.ttl > 0 {
		c.TTL = f.ttl
	}
	return c
}

func (f *clusterFlags) open(ctx context.Context) (*cluster.Store, error) {
	return cluster.Open(ctx, f.config())
}

func newWorkerCmd() *cobra.Command {
	var f clusterFlags
	var name, dir, metricsAddr string
	cmd := &cobra.Command{
		Use: "worker --etcd URL --name W",
		Example: `  sluice sandbox etcd up --name etcd --port 2379
  sluice worker --etcd http://127.0.0.1:2379 --name w1 &
  sluice worker --etcd http://127.0.0.1:2379 --name w2 &
  sluice task add --etcd http://127.0.0.1:2379 --config task.yaml
  sluice status --etcd http://127.0.0.1:2379`,
		Short: "Run the replication tasks etcd assigns to this worker, and take over those of dead workers",
		Long: `worker registers in etcd under a lease, runs the replication tasks assigned
to it, and takes over the tasks of workers whose lease expired (a dead
worker's tasks move within about --ttl plus a few seconds). A task resumes
from its checkpoint on the target, so nothing is lost or applied twice.
A worker that cannot refresh its lease for half the TTL stops its tasks on
its own, and a new owner waits on the target for the old one's sessions
(docs/manual/cluster.md). SIGINT/SIGTERM stop the tasks cleanly and hand
them over at once.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if dir == "" {
				dir = filepath.Join(sandbox.DefaultDir(), "worker-"+name)
			}
			wc := cluster.DefaultWorkerConfig(f.config(), name, dir)
			wc.Log, wc.TaskOut = logx.New(c.OutOrStdout(), "worker "+name), c.OutOrStdout()
			wc.Start = startReplication
			wc.MetricsAddr = metricsAddr
			wc.ProcessCollectors = replicate.ProcessCollectors()
			if err := wc.Validate(); err != nil {
				return err
			}
			w, err := cluster.NewWorker(c.Context(), wc)
			if err != nil {
				return err
			}
			defer w.Close()
			return w.Run(c.Context())
		},
	}
	f.add(cmd.Flags())
	cmd.Flags().DurationVar(&f.ttl, "ttl", 0, "lease TTL: how long a dead worker holds its tasks (default 6s)")
	cmd.Flags().StringVar(&name, "name", "", "this worker's name, unique in the cluster")
	cmd.Flags().StringVar(&metricsAddr, "metrics-addr", "", "serve the worker's Prometheus metrics (labelled by worker) here, e.g. 127.0.0.1:9360")
	cmd.Flags().StringVar(&dir, "dir", "", "local state: one directory per task (relay log); default $SLUICE_HOME/worker-NAME")
	return cmd
}

// replication adapts a replicate.Task to cluster.Runnable.
type replication struct{ t *replicate.Task }

func (r replication) Run(ctx context.Context) error { return r.t.Run(ctx, nil) }
func (r replication) Status() any                   { return r.t.Status() }
func (r replication) LagSeconds() float64           { return r.t.Status().LagSeconds }

// sinkReplication adapts a Kafka sink task (sink: in the task file).
type sinkReplication struct{ t *replicate.SinkTask }

func (r sinkReplication) Run(ctx context.Context) error { return r.t.Run(ctx, nil) }
func (r sinkReplication) Status() any                   { return r.t.Status() }
func (r sinkReplication) LagSeconds() float64           { return r.t.Status().LagSeconds }

func startReplication(cfg *task.Config, log io.Writer, reg prometheus.Registerer) (cluster.Runnable, error) {
	if cfg.HasSink() {
		// Changes only, from the checkpoint in Kafka (or the task file's
		// start): a worker never takes a snapshot.
		rc, kc, err := replicate.SinkFromTask(cfg)
		if err != nil {
			return nil, err
		}
		rc.Registerer = reg // on the worker's endpoint, as below
		rc.Log = logx.New(log, "replicate "+rc.Name)
		t, err := replicate.NewSinkTask(rc, kc)
		if err != nil {
			return nil, err
		}
		return sinkReplication{t}, nil
	}
	rc, err := replicate.FromTask(cfg)
	if err != nil {
		return nil, err
	}
	// Under a worker that serves metrics, the task's go on the worker's
	// endpoint (labelled worker and task), not on its metrics-addr: a
	// task that moves to another worker on the same host must not find
	// its port taken.
	rc.Registerer = reg
	rc.Log = logx.New(log, "replicate "+rc.Name)
	t, err := replicate.New(rc)
	if err != nil {
		return nil, err
	}
	return replication{t}, nil
}

func newTaskAddCmd() *cobra.Command {
	var f clusterFlags
	var config string
	cmd := &cobra.Command{
		Use:     "add --etcd URL --config task.yaml",
		Short:   "Store a replication task in etcd; a worker picks it up",
		Example: `  sluice task add --etcd http://127.0.0.1:2379 --config task.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if f.etcd == "" || config == "" {
				return &sluice.Error{Op: "task add", Err: fmt.Errorf("%w: --etcd and --config are required", sluice.ErrConfig), Hint: "sluice task add --etcd http://HOST:2379 --config task.yaml"}
			}
			b, err := os.ReadFile(config)
			if err != nil {
				return &sluice.Error{Op: "task add", Err: fmt.Errorf("%w: %v", sluice.ErrConfig, err), Hint: "pass an existing YAML file with --config"}
			}
			s, err := f.open(c.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			name, err := s.AddTask(c.Context(), b)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "task %s added\n", name)
			return nil
		},
	}
	f.add(cmd.Flags())
	cmd.Flags().StringVar(&config, "config", "", "task file (YAML); passwords as ${VAR} are read by each worker from its environment")
	return cmd
}

func newTaskRemoveCmd() *cobra.Command {
	var f clusterFlags
	cmd := &cobra.Command{
		Use:     "remove NAME --etcd URL",
		Short:   "Remove a task from etcd; its worker stops it (its checkpoint stays on the target)",
		Example: `  sluice task remove orders --etcd http://127.0.0.1:2379`,
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			s, err := f.open(c.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			if err := s.RemoveTask(c.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "task %s removed\n", args[0])
			return nil
		},
	}
	f.add(cmd.Flags())
	return cmd
}

func newTaskMoveCmd() *cobra.Command {
	var f clusterFlags
	var to string
	cmd := &cobra.Command{
		Use:     "move NAME --to WORKER --etcd URL",
		Short:   "Hand a task to another live worker; it resumes from the checkpoint",
		Example: `  sluice task move orders --to w2 --etcd http://127.0.0.1:2379`,
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if to == "" {
				return &sluice.Error{Op: "task move", Err: fmt.Errorf("%w: --to is required", sluice.ErrConfig), Hint: "name the worker: --to W"}
			}
			s, err := f.open(c.Context())
			if err != nil {
				return err
			}
			defer s.Close()
			if err := s.MoveTask(c.Context(), args[0], to); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "task %s moved to %s\n", args[0], to)
			return nil
		},
	}
	f.add(cmd.Flags())
	cmd.Flags().StringVar(&to, "to", "", "the worker that takes the task")
	return cmd
}

// clusterStatus prints every task of the cluster: assignment, owner,
// stage, lag and applied position, then the live workers.
func clusterStatus(ctx context.Context, w io.Writer, f *clusterFlags, asJSON bool) error {
	s, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer s.Close()
	st, err := s.Load(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(st)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tWORKER\tSTAGE\tLAG\tAPPLIED\tTOKEN")
	for _, t := range st.Tasks {
		worker, stage, lag, applied := t.Assigned, "unassigned", "-", "-"
		var p struct {
			cluster.Published
			Replicate *replicate.Status `json:"replicate"`
		}
		if len(t.Status) > 0 && json.Unmarshal(t.Status, &p) == nil {
			worker, stage = p.Worker, p.Stage
			if p.Replicate != nil {
				stage = p.Replicate.Stage
				lag = fmt.Sprintf("%.1fs", p.Replicate.LagSeconds)
				applied = p.Replicate.Applied.String()
			}
			if p.Error != "" {
				stage += ": " + p.Error
			} else if p.Note != "" {
				stage += ": " + p.Note
			}
		} else if t.Assigned != "" {
			stage = "assigned, not started"
		}
		if t.Assigned != "" && worker != t.Assigned {
			worker += " -> " + t.Assigned
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\n", t.Name, worker, stage, lag, applied, t.Token)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tHOST\tPID\tSINCE")
	for _, wk := range st.Workers {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", wk.Name, wk.Host, wk.PID, wk.Started.Format(time.RFC3339))
	}
	return tw.Flush()
}
