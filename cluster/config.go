// Package cluster runs replication tasks on several sluice workers that
// coordinate through etcd, the way DM's workers coordinate through
// dm-master's etcd. Nothing here is a consensus protocol of its own: etcd
// keeps the state, leases say who is alive, and etcd's concurrency package
// (Session, Mutex) says who holds a task.
//
// Keys, under Config.Prefix (default /sluice):
//
//	tasks/<task>          the task file (YAML), as given to `sluice task add`
//	assign/<task>         the worker that should run the task
//	workers/<worker>      a live worker (bound to its lease)
//	owner/<task>/<lease>  concurrency.Mutex: the worker that runs the task
//	fence/<task>          the owner's fencing token (its mutex revision)
//	status/<task>         the owner's last replicate status (bound to its lease)
//
// See docs/manual/cluster.md for why two workers never apply one task at
// once, even when a worker is cut off from etcd.
package cluster

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluice-db/sluice"
)

// Config is how to reach etcd and the timing of leases.
type Config struct {
	// Endpoints are etcd client URLs (http://127.0.0.1:2379).
	Endpoints []string
	// Prefix is the root of sluice's keys; clusters that share an etcd use
	// different prefixes.
	Prefix string
	// DialTimeout bounds connecting to etcd at start.
	DialTimeout time.Duration
	// TTL is the worker's lease: a dead worker's tasks move after at most
	// about TTL plus a second or two. A worker that could not refresh its
	// lease for TTL/2 stops its tasks on its own (before the lease can have
	// expired on etcd's side).
	TTL time.Duration
}

// DefaultConfig returns a config for the given endpoints.
func DefaultConfig(endpoints ...string) Config {
	return Config{Endpoints: endpoints, Prefix: "/sluice", DialTimeout: 5 * time.Second, TTL: 6 * time.Second}
}

// Validate checks the config.
func (c Config) Validate() error {
	bad := func(msg, hint string) error {
		return &sluice.Error{Op: "cluster", Err: fmt.Errorf("%w: %s", sluice.ErrConfig, msg), Hint: hint}
	}
	if len(c.Endpoints) == 0 {
		return bad("no etcd endpoint", "pass --etcd http://HOST:2379 (comma-separated for several)")
	}
	for _, e := range c.Endpoints {
		if !strings.HasPrefix(e, "http://") && !strings.HasPrefix(e, "https://") && strings.Contains(e, "://") {
			return bad("etcd endpoint "+e+" is not an http(s) URL", "use --etcd http://HOST:PORT")
		}
	}
	if !strings.HasPrefix(c.Prefix, "/") || strings.HasSuffix(c.Prefix, "/") {
		return bad("prefix "+c.Prefix+" must start and not end with /", "use e.g. /sluice")
	}
	if c.TTL < 2*time.Second {
		return bad(fmt.Sprintf("lease TTL %s is under 2s", c.TTL), "use --ttl 2s or more (etcd leases count in seconds)")
	}
	if c.DialTimeout <= 0 {
		return bad("dial timeout must be positive", "use DefaultConfig")
	}
	return nil
}

// ValidName reports whether s can name a task or a worker in a key.
func ValidName(s string) bool {
	return s != "" && !strings.ContainsAny(s, "/\\ \t\n") && len(s) <= 128
}

func (c Config) key(kind, name string) string { return c.Prefix + "/" + kind + "/" + name }
