package dtx

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"
)

// reachability remembers which branch hosts accepted a TCP connection
// recently, so that submit can refuse an unreachable URL before anything is
// stored, at the cost of one dial per host every reachableTTL.
type reachability struct {
	mu sync.Mutex
	ok map[string]time.Time
}

const reachableTTL = 30 * time.Second

func newReachability() *reachability { return &reachability{ok: map[string]time.Time{}} }

func (c *Coordinator) checkReachable(ctx context.Context, urls []string) error {
	if !c.cfg.CheckBranchURLs {
		return nil
	}
	for _, s := range urls {
		u, err := branchURLs.get(s)
		if err != nil {
			return fmt.Errorf("%w: bad URL %q", ErrBadRequest, s)
		}
		host := u.Host
		if u.Port() == "" {
			port := "80"
			if u.Scheme == "https" {
				port = "443"
			}
			host = net.JoinHostPort(u.Hostname(), port)
		}
		if err := c.urls.check(ctx, host); err != nil {
			return fmt.Errorf("%w: branch URL %s is unreachable: %v", ErrBadRequest, s, err)
		}
	}
	return nil
}

func (r *reachability) check(ctx context.Context, host string) error {
	r.mu.Lock()
	t, ok := r.ok[host]
	r.mu.Unlock()
	if ok && time.Since(t) < reachableTTL {
		return nil
	}
	d := net.Dialer{Timeout: 2 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return err
	}
	conn.Close()
	r.mu.Lock()
	r.ok[host] = time.Now()
	r.mu.Unlock()
	return nil
}
