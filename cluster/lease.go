package cluster

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// keeper refreshes a lease on its own schedule and knows how long the
// lease is surely still valid on etcd's side.
//
// etcd renews a lease when a keepalive reaches it, so a keepalive sent at
// time T that succeeded keeps the lease at least until T+TTL, whatever the
// network did afterwards. The keeper remembers the send time of the last
// success and declares the lease lost at T+TTL/2: the worker then stops its
// tasks while etcd still counts the lease as alive, so no other worker can
// hold its tasks yet. clientv3's own keepalive (which concurrency.Session
// runs too) measures from the time the answer arrived, which is later than
// etcd's renewal, so it cannot give that guarantee.
type keeper struct {
	cli *clientv3.Client
	id  clientv3.LeaseID
	ttl time.Duration

	lost chan struct{}
	once sync.Once
	why  error

	mu   sync.Mutex
	last time.Time // send time of the last successful keepalive
}

func newKeeper(cli *clientv3.Client, id clientv3.LeaseID, ttl time.Duration, granted time.Time) *keeper {
	return &keeper{cli: cli, id: id, ttl: ttl, lost: make(chan struct{}), last: granted}
}

// Lost is closed once the lease may be gone.
func (k *keeper) Lost() <-chan struct{} { return k.lost }

// Err says why the lease was lost.
func (k *keeper) Err() error {
	select {
	case <-k.lost:
		return k.why
	default:
		return nil
	}
}

// ValidFor is how much longer the lease surely lives on etcd's side, less
// the safety half: <= 0 means the worker must not apply any more.
func (k *keeper) ValidFor() time.Duration {
	k.mu.Lock()
	defer k.mu.Unlock()
	return time.Until(k.last.Add(k.ttl / 2))
}

func (k *keeper) fail(err error) {
	k.once.Do(func() { k.why = err; close(k.lost) })
}

// run refreshes the lease every TTL/6 until ctx ends or the lease is lost.
func (k *keeper) run(ctx context.Context) {
	every := k.ttl / 6
	for {
		sent := time.Now()
		cctx, cancel := context.WithTimeout(ctx, every)
		resp, err := k.cli.KeepAliveOnce(cctx, k.id)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil && resp.TTL > 0:
			k.mu.Lock()
			k.last = sent
			k.mu.Unlock()
		case errors.Is(err, rpctypes.ErrLeaseNotFound) || err == nil:
			k.fail(errors.New("etcd says the lease has expired"))
			return
		}
		if k.ValidFor() <= 0 {
			k.fail(errors.New("no lease refresh reached etcd for half the lease TTL"))
			return
		}
		// Wake in time to notice the deadline even when keepalives hang.
		wait := time.Until(sent.Add(every))
		if v := k.ValidFor(); v < wait {
			wait = v
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(max(wait, 0)):
		}
	}
}
