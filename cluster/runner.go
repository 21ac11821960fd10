package cluster

import (
	"context"
	"crypto/sha1"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/sluice-db/sluice/internal/backoff"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/task"
)

// OwnerLockName is the target-side lock (GET_LOCK) the worker running a
// task holds for as long as any of its connections may write: a new owner
// takes it before it starts, so it waits for a predecessor that etcd has
// already given up on but that still runs (cut off from etcd, not from the
// target) until that one has stopped.
func OwnerLockName(taskName string) string {
	h := sha1.Sum([]byte(taskName))
	return fmt.Sprintf("sluice.owner.%x", h[:8])
}

// Published is a task's status as the owner publishes it in etcd.
type Published struct {
	Worker  string    `json:"worker"`
	Token   int64     `json:"token"`
	Stage   string    `json:"stage"`
	Note    string    `json:"note,omitempty"`
	Error   string    `json:"error,omitempty"`
	Updated time.Time `json:"updated"`
	// Replicate is the task's replicate.Status while it runs.
	Replicate any `json:"replicate,omitempty"`
}

// runTask holds one task on this worker until ctx ends: it takes the
// task's etcd mutex (waiting for the previous owner's key to go: its
// lease ends or it unlocks), checks in one transaction that it still holds
// the mutex and the assignment and records its fencing token, takes the
// target-side owner lock, and runs the task, again after failures.
func (w *Worker) runTask(ctx context.Context, sess *concurrency.Session, k *keeper, name string, rev int64, file []byte) {
	c := w.cfg.Cluster
	pub := func(p Published) {
		p.Worker, p.Updated = w.cfg.Name, time.Now().UTC()
		b, _ := json.Marshal(p)
		pctx, cancel := context.WithTimeout(ctx, c.TTL/3)
		_, _ = w.store.cli.Put(pctx, c.key("status", name), string(b), clientv3.WithLease(sess.Lease()))
		cancel()
	}
	m := concurrency.NewMutex(sess, c.key("owner", name))
	pub(Published{Stage: "waiting", Note: "waiting for the previous owner's etcd lock"})
	if err := w.lock(ctx, m, c.key("owner", name)+"/"); err != nil {
		return
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.Background(), c.TTL/3)
		_ = m.Unlock(uctx)
		cancel()
	}()
	token := m.Header().Revision
	cfg, err := task.Parse(file)
	if err != nil {
		pub(Published{Token: token, Stage: "failed", Error: oneLine(err)})
		w.log.Info(fmt.Sprintf("task %s: %v", name, oneLine(err)))
		<-ctx.Done()
		return
	}
	cfg.Dir = filepath.Join(w.cfg.Dir, name)
	bo := backoff.New(w.cfg.RetryMin, w.cfg.RetryMax)
	for ctx.Err() == nil {
		// The fencing token is recorded only while this worker still owns
		// the mutex, the assignment and the same task file, in one etcd
		// transaction: a worker that lost any of them starts nothing.
		f, _ := json.Marshal(Fence{Worker: w.cfg.Name, Token: token, Lease: int64(sess.Lease()), Since: time.Now().UTC()})
		resp, err := w.store.cli.Txn(ctx).If(m.IsOwner(),
			clientv3.Compare(clientv3.Value(c.key("assign", name)), "=", w.cfg.Name),
			clientv3.Compare(clientv3.ModRevision(c.key("tasks", name)), "=", rev)).
			Then(clientv3.OpPut(c.key("fence", name), string(f))).Commit()
		if err != nil || !resp.Succeeded {
			if ctx.Err() == nil && err == nil {
				w.log.Info(fmt.Sprintf("task %s: no longer this worker's (token %d); not starting", name, token))
				<-ctx.Done()
			}
			return
		}
		began := time.Now()
		w.log.Info(fmt.Sprintf("task %s: starting with fencing token %d", name, token))
		err = w.runOnce(ctx, k, cfg, resp.Header.ClusterId, token, pub)
		if ctx.Err() != nil {
			w.log.Info(fmt.Sprintf("task %s: stopped", name))
			return
		}
		if time.Since(began) > time.Minute {
			bo.Reset()
		}
		wait := bo.Next()
		w.log.Info(fmt.Sprintf("task %s: %s; running it again in %s", name, oneLine(err), wait.Round(time.Millisecond)))
		pub(Published{Token: token, Stage: "retrying", Error: oneLine(err)})
		if !backoff.Sleep(ctx, wait) {
			return
		}
	}
}

// lock takes the mutex. Mutex.Lock is not used: when its wait is cancelled
// it cleans up with the client's own context, which never ends, so a
// worker whose etcd is gone would hang there instead of stopping. TryLock
// uses ctx for everything; between tries the worker watches the prefix for
// the holder's key to go (a second at most, in case the watch misses it).
func (w *Worker) lock(ctx context.Context, m *concurrency.Mutex, pfx string) error {
	for {
		err := m.TryLock(ctx)
		if err == nil || !errors.Is(err, concurrency.ErrLocked) {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		for resp := range w.store.cli.Watch(clientv3.WithRequireLeader(wctx), pfx, clientv3.WithPrefix(), clientv3.WithFilterPut()) {
			if len(resp.Events) > 0 {
				break
			}
		}
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// runOnce takes the target-side owner lock and runs the task until ctx
// ends, the task fails, the lease may be lost or the lock's session ends.
func (w *Worker) runOnce(ctx context.Context, k *keeper, cfg *task.Config, clusterID uint64, token int64, pub func(Published)) error {
	if cfg.HasSink() {
		// Kafka fences by itself: the sink's transactional id is stable per
		// task, so the new owner's producer bumps its epoch and the old
		// one's next commit fails (docs/manual/kafka.md).
		if k.ValidFor() <= 0 {
			return errLeaseLost
		}
		return w.runWhileOwner(ctx, k, cfg, token, pub)
	}
	db, err := dbconn.Open(ctx, "target", cfg.Target, dbconn.Options{MaxOpen: 1})
	if err != nil {
		return err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return dbconn.Classify(err, "target", cfg.Target)
	}
	defer conn.Close()
	lock := OwnerLockName(cfg.Name)
	said := false
	for {
		var got sql.NullInt64
		if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 1)", lock).Scan(&got); err != nil {
			return dbconn.Classify(err, "target", cfg.Target)
		}
		if got.Int64 == 1 {
			break
		}
		if !said {
			said = true
			var holder sql.NullInt64
			_ = conn.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", lock).Scan(&holder)
			note := fmt.Sprintf("waiting for target session %d of the previous owner to end", holder.Int64)
			w.log.Info(fmt.Sprintf("task %s: %s", cfg.Name, note))
			pub(Published{Token: token, Stage: "waiting", Note: note})
		}
	}
	// Released when the session ends, too; this is for a clean stop.
	defer conn.ExecContext(context.Background(), "SELECT RELEASE_LOCK(?)", lock) //nolint:errcheck
	if k.ValidFor() <= 0 {
		return errLeaseLost
	}
	if err := FenceTarget(ctx, conn, cfg.Name, clusterID, token, w.cfg.Name); err != nil {
		return err
	}
	return w.runWhileOwner(ctx, k, cfg, token, pub, func(ctx context.Context) error {
		// The lock's session is the target's proof of ownership: if it
		// ended (target restart, killed session), stop and take it again.
		var mine sql.NullInt64
		if err := conn.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?) = CONNECTION_ID()", lock).Scan(&mine); err != nil || mine.Int64 != 1 {
			return fmt.Errorf("the target-side owner lock was lost: %v", err)
		}
		return nil
	})
}

// runWhileOwner runs the task until ctx ends, it fails, the lease may be lost
// or check (every StatusEvery) fails; it publishes the task's status.
func (w *Worker) runWhileOwner(ctx context.Context, k *keeper, cfg *task.Config, token int64, pub func(Published), checks ...func(context.Context) error) error {
	var reg prometheus.Registerer
	if w.cfg.MetricsAddr != "" {
		reg = w.met.wrapped
	}
	r, err := w.cfg.Start(cfg, w.cfg.TaskOut, reg)
	if err != nil {
		return err
	}
	w.met.starts.WithLabelValues(cfg.Name).Inc()
	w.met.tasks.Inc()
	defer w.met.tasks.Dec()
	defer w.met.lag.DeleteLabelValues(cfg.Name)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var why error
	var mu sync.Mutex
	stopWith := func(err error) {
		mu.Lock()
		if why == nil {
			why = err
		}
		mu.Unlock()
		cancel()
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(w.cfg.StatusEvery)
		defer tick.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-k.Lost():
				stopWith(fmt.Errorf("%w: %v", errLeaseLost, k.Err()))
				return
			case <-tick.C:
			}
			for _, check := range checks {
				if err := check(rctx); err != nil {
					if rctx.Err() == nil {
						stopWith(err)
					}
					return
				}
			}
			if l, ok := r.(Lagger); ok {
				w.met.lag.WithLabelValues(cfg.Name).Set(l.LagSeconds())
			}
			pub(Published{Token: token, Stage: "running", Replicate: r.Status()})
		}
	}()
	err = r.Run(rctx)
	cancel()
	mu.Lock()
	defer mu.Unlock()
	if why != nil {
		return why
	}
	if err == nil && ctx.Err() == nil {
		err = errors.New("the task stopped by itself")
	}
	return err
}

func oneLine(err error) string {
	if err == nil {
		return ""
	}
	return strings.Join(strings.Fields(err.Error()), " ")
}
