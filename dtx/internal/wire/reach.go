package wire

import (
	"context"
	"net"
	"sync"
	"time"
)

// reachability remembers which branch hosts accepted a TCP connection
// recently, so that submit can refuse an unreachable URL before anything is
// stored, at the cost of one dial per host every reachableTTL.
type reachability struct {
	policy *HostPolicy
	mu     sync.Mutex
	ok     map[string]time.Time
}

const reachableTTL = 30 * time.Second

func newReachability(p *HostPolicy) *reachability {
	return &reachability{policy: p, ok: map[string]time.Time{}}
}

func (r *reachability) check(ctx context.Context, host string) error {
	r.mu.Lock()
	t, ok := r.ok[host]
	r.mu.Unlock()
	if ok && time.Since(t) < reachableTTL {
		return nil
	}
	d := net.Dialer{Timeout: 2 * time.Second}
	conn, err := r.policy.DialContext(ctx, &d, "tcp", host)
	if err != nil {
		return err
	}
	conn.Close()
	r.mu.Lock()
	r.ok[host] = time.Now()
	r.mu.Unlock()
	return nil
}
