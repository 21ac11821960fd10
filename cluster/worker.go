package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/logx"
	"github.com/sluice-db/sluice/task"
)

// Runnable is one run of a task: Run until ctx ends, Status any time.
type Runnable interface {
	Run(ctx context.Context) error
	// Status is a JSON-encodable snapshot (replicate.Status).
	Status() any
}

// StartFunc makes a run of a task from its file (cmd/ wires replicate).
// reg, when not nil, takes the run's Prometheus metrics: the worker's
// registry, labelled worker="W". The run must label its metrics by task
// and take them out of reg when Run returns (the next run of the task
// registers them again); nil means the worker serves no metrics, and the
// run may serve its own.
type StartFunc func(cfg *task.Config, out io.Writer, reg prometheus.Registerer) (Runnable, error)

// WorkerConfig configures a worker.
type WorkerConfig struct {
	Cluster Config
	Name    string
	// Dir holds the worker's local state: Dir/<task>/ (relay log).
	Dir   string
	Start StartFunc
	// Log takes the worker's own lines (cmd/ prefixes them "worker W");
	// nil writes none.
	Log *slog.Logger
	// TaskOut is what Start gives each task for its output (the tasks log
	// there themselves); nil discards it.
	TaskOut io.Writer
	// StatusEvery is how often a task's status is published to etcd.
	StatusEvery time.Duration
	// Retry bounds the wait before a failed task is run again.
	RetryMin, RetryMax time.Duration
	// MetricsAddr serves the worker's Prometheus metrics, its tasks'
	// included ("" disables).
	MetricsAddr string
	// ProcessCollectors are registered once with the worker's metrics
	// (the Go runtime's, the process's, the build's).
	ProcessCollectors []prometheus.Collector
}

// DefaultWorkerConfig returns a worker config with the default timings.
func DefaultWorkerConfig(c Config, name, dir string) WorkerConfig {
	return WorkerConfig{Cluster: c, Name: name, Dir: dir, StatusEvery: time.Second, RetryMin: time.Second, RetryMax: 15 * time.Second}
}

// Validate checks the config.
func (c WorkerConfig) Validate() error {
	if err := c.Cluster.Validate(); err != nil {
		return err
	}
	bad := func(msg, hint string) error {
		return &sluice.Error{Op: "worker", Err: fmt.Errorf("%w: %s", sluice.ErrConfig, msg), Hint: hint}
	}
	if !ValidName(c.Name) {
		return bad(fmt.Sprintf("worker name %q", c.Name), "pass --name W (letters, digits, - and _)")
	}
	if c.Dir == "" {
		return bad("no state directory", "pass --dir DIR")
	}
	if c.Start == nil || c.StatusEvery <= 0 || c.RetryMin <= 0 || c.RetryMax < c.RetryMin {
		return bad("start function and intervals", "use DefaultWorkerConfig")
	}
	return nil
}

// Worker runs the tasks etcd assigns to it, and takes over the tasks of
// workers whose lease expired.
type Worker struct {
	cfg   WorkerConfig
	store *Store
	log   *slog.Logger
	met   *metrics
}

// NewWorker connects to etcd.
func NewWorker(ctx context.Context, cfg WorkerConfig) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s, err := Open(ctx, cfg.Cluster)
	if err != nil {
		return nil, err
	}
	if cfg.TaskOut == nil {
		cfg.TaskOut = io.Discard
	}
	return &Worker{cfg: cfg, store: s, log: logx.OrDiscard(cfg.Log), met: newMetrics(cfg.Name, cfg.ProcessCollectors)}, nil
}

// Close closes the etcd client.
func (w *Worker) Close() error { return w.store.Close() }

// Run works until ctx ends. A lost lease stops every task; the worker then
// joins again with a new lease. Only a cancelled ctx returns (nil).
func (w *Worker) Run(ctx context.Context) error {
	if w.cfg.MetricsAddr != "" {
		addr, err := w.met.serve(w.cfg.MetricsAddr)
		if err != nil {
			return err
		}
		defer w.met.close()
		w.log.Info(fmt.Sprintf("metrics on http://%s/metrics", addr))
	}
	wait := time.Second
	for ctx.Err() == nil {
		began := time.Now()
		err := w.term(ctx)
		if ctx.Err() != nil {
			break
		}
		if time.Since(began) > time.Minute {
			wait = time.Second
		}
		if errors.Is(err, errLeaseLost) {
			w.met.leaseLost.Inc()
		}
		w.log.Info(fmt.Sprintf("%v; joining again in %s", err, wait))
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(wait*2, 10*time.Second)
	}
	w.log.Info("stopped")
	return nil
}

// term is one lease's life: register, run the assigned tasks, and stop them
// all when the lease may be lost or ctx ends.
func (w *Worker) term(ctx context.Context) error {
	cli, c := w.store.cli, w.cfg.Cluster
	granted := time.Now()
	gctx, cancel := context.WithTimeout(ctx, c.TTL)
	lease, err := cli.Grant(gctx, int64((c.TTL+time.Second-1)/time.Second))
	cancel()
	if err != nil {
		return fmt.Errorf("cannot get a lease from etcd: %v", err)
	}
	k := newKeeper(cli, lease.ID, c.TTL, granted)
	tctx, stop := context.WithCancel(ctx)
	defer stop()
	var bg sync.WaitGroup
	defer bg.Wait()
	bg.Add(1)
	go func() { defer bg.Done(); k.run(tctx) }()
	sess, err := concurrency.NewSession(cli, concurrency.WithLease(lease.ID), concurrency.WithContext(tctx))
	if err != nil {
		return fmt.Errorf("etcd session: %v", err)
	}
	// The session's keepalive goroutine ends with tctx; join it.
	defer func() { stop(); <-sess.Done() }()
	bg.Add(1)
	go func() {
		defer bg.Done()
		select {
		case <-k.Lost():
		case <-sess.Done():
		case <-tctx.Done():
		}
		stop()
	}()
	defer func() {
		// Every task has stopped (manage joined its runners): give the
		// lease back so that the tasks move at once, not after its TTL.
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, _ = cli.Revoke(rctx, lease.ID)
		cancel()
	}()
	if err := w.register(tctx, lease.ID); err != nil {
		if tctx.Err() != nil && ctx.Err() == nil {
			return w.lostErr(k, sess)
		}
		return err
	}
	w.log.Info(fmt.Sprintf("joined with lease %x (ttl %s)", int64(lease.ID), c.TTL))
	w.manage(tctx, sess, k)
	if ctx.Err() != nil {
		return nil
	}
	return w.lostErr(k, sess)
}

func (w *Worker) lostErr(k *keeper, sess *concurrency.Session) error {
	if err := k.Err(); err != nil {
		return fmt.Errorf("%w: %v; every task stopped", errLeaseLost, err)
	}
	select {
	case <-sess.Done():
		return fmt.Errorf("%w: the etcd session ended; every task stopped", errLeaseLost)
	default:
	}
	return fmt.Errorf("the worker's term ended")
}

// register puts workers/<name> on the lease, waiting while another live
// process holds the name (a restarted worker waits out its old lease).
func (w *Worker) register(ctx context.Context, lease clientv3.LeaseID) error {
	c := w.cfg.Cluster
	k := c.key("workers", w.cfg.Name)
	host, _ := os.Hostname()
	info, _ := json.Marshal(WorkerInfo{Name: w.cfg.Name, Host: host, PID: os.Getpid(), Started: time.Now().UTC(), Lease: int64(lease)})
	said := false
	for {
		resp, err := w.store.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
			Then(clientv3.OpPut(k, string(info), clientv3.WithLease(lease))).Else(clientv3.OpGet(k)).Commit()
		if err != nil {
			return fmt.Errorf("register: %v", err)
		}
		if resp.Succeeded {
			return nil
		}
		if !said {
			said = true
			held := ""
			if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
				held = string(kvs[0].Value)
			}
			w.log.Info(fmt.Sprintf("the name %s is held by a live worker (%s); waiting for its lease to end", w.cfg.Name, held))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// snapshot is what manage reconciles against.
type snapshot struct {
	files   map[string][]byte
	fileRev map[string]int64
	assign  map[string]string
	aRev    map[string]int64
	live    map[string]bool
}

func (w *Worker) read(ctx context.Context) (*snapshot, int64, error) {
	c := w.cfg.Cluster
	resp, err := w.store.cli.Get(ctx, c.Prefix+"/", clientv3.WithPrefix())
	if err != nil {
		return nil, 0, err
	}
	s := &snapshot{files: map[string][]byte{}, fileRev: map[string]int64{}, assign: map[string]string{}, aRev: map[string]int64{}, live: map[string]bool{}}
	for _, kv := range resp.Kvs {
		kind, name, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), c.Prefix+"/"), "/")
		if !ok {
			continue
		}
		switch kind {
		case "tasks":
			s.files[name], s.fileRev[name] = kv.Value, kv.ModRevision
		case "assign":
			s.assign[name], s.aRev[name] = string(kv.Value), kv.ModRevision
		case "workers":
			s.live[name] = true
		}
	}
	return s, resp.Header.Revision, nil
}

// balance gives every task without a live worker to the live worker with
// the fewest tasks, and, when this worker has two tasks more than the
// least loaded one, hands one of its own over (a worker that joins gets
// its share). Every worker does this; the compare-and-swap on the
// assignment's revision lets one of them win, and the others see the
// result on their next read.
func (w *Worker) balance(ctx context.Context, s *snapshot) bool {
	load := map[string]int{}
	for n := range s.live {
		load[n] = 0
	}
	var orphans []string
	for name := range s.files {
		if a, ok := s.assign[name]; ok && s.live[a] {
			load[a]++
		} else {
			orphans = append(orphans, name)
		}
	}
	if len(load) == 0 {
		return false
	}
	names := make([]string, 0, len(load))
	for n := range load {
		names = append(names, n)
	}
	sort.Strings(names)
	least := func() string {
		best := names[0]
		for _, n := range names[1:] {
			if load[n] < load[best] {
				best = n
			}
		}
		return best
	}
	assign := func(t, to, why string) bool {
		k := w.cfg.Cluster.key("assign", t)
		resp, err := w.store.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", s.aRev[t]),
			clientv3.Compare(clientv3.CreateRevision(w.cfg.Cluster.key("tasks", t)), ">", 0)).
			Then(clientv3.OpPut(k, to)).Commit()
		if err != nil || !resp.Succeeded {
			return false
		}
		w.log.Info(fmt.Sprintf("task %s assigned to %s (%s)", t, to, why))
		return true
	}
	sort.Strings(orphans)
	changed := false
	for _, t := range orphans {
		to := least()
		if assign(t, to, fmt.Sprintf("%q was not live", s.assign[t])) {
			load[to]++
			changed = true
		}
	}
	if changed {
		return true
	}
	if to := least(); s.live[w.cfg.Name] && load[w.cfg.Name]-load[to] >= 2 {
		var mine []string
		for t, a := range s.assign {
			if a == w.cfg.Name && s.files[t] != nil {
				mine = append(mine, t)
			}
		}
		sort.Strings(mine)
		return assign(mine[len(mine)-1], to, fmt.Sprintf("from %s, which had %d tasks to its %d", w.cfg.Name, load[w.cfg.Name], load[to]))
	}
	return false
}

// runner is one task's goroutine on this worker.
type runner struct {
	rev    int64
	cancel context.CancelFunc
	done   chan struct{}
}

// manage reconciles the runners with etcd on every change (watch) and
// every second, until ctx ends; then it stops every runner and waits.
func (w *Worker) manage(ctx context.Context, sess *concurrency.Session, k *keeper) {
	runners := map[string]*runner{}
	defer func() {
		for _, r := range runners {
			r.cancel()
		}
		for _, r := range runners {
			<-r.done
		}
	}()
	var wch clientv3.WatchChan
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for ctx.Err() == nil {
		s, rev, err := w.read(ctx)
		if err == nil {
			if w.balance(ctx, s) {
				continue
			}
			if wch == nil {
				wch = w.store.cli.Watch(clientv3.WithRequireLeader(ctx), w.cfg.Cluster.Prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(rev+1))
			}
			for name, r := range runners {
				select {
				case <-r.done:
					delete(runners, name)
					continue
				default:
				}
				if s.assign[name] != w.cfg.Name || s.fileRev[name] != r.rev {
					r.cancel()
				}
			}
			for name, file := range s.files {
				if s.assign[name] != w.cfg.Name || runners[name] != nil {
					continue
				}
				rctx, cancel := context.WithCancel(ctx)
				r := &runner{rev: s.fileRev[name], cancel: cancel, done: make(chan struct{})}
				runners[name] = r
				go func(name string, file []byte) {
					defer close(r.done)
					w.runTask(rctx, sess, k, name, r.rev, file)
				}(name, file)
			}
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		case resp, ok := <-wch:
			if !ok || resp.Err() != nil {
				wch = nil
			}
		}
	}
}
