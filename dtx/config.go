package dtx

import (
	"fmt"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/dtx/internal/wire"
)

// Config tunes a Coordinator. Per-transaction options sent by the client
// (request_timeout, retry_interval, timeout_to_fail, retry_limit) override
// the matching defaults here.
type Config struct {
	// Instance names this coordinator in lease tokens and logs.
	Instance string
	// RequestTimeout bounds one branch call.
	RequestTimeout time.Duration
	// RetryInterval is the first retry delay; each further failure doubles
	// it, up to MaxBackoff.
	RetryInterval time.Duration
	MaxBackoff    time.Duration
	// RetryLimit is how many failed attempts a branch gets before it is
	// marked stuck (or, for a saga action, before the saga is rolled back).
	RetryLimit int
	// TimeoutToFail is how long a TCC stays prepared before it is aborted,
	// and how long a prepared message waits before its query-prepared check.
	TimeoutToFail time.Duration
	// Lease is how long a claim on a transaction lasts without renewal.
	Lease time.Duration
	// PollInterval is how often recovery looks for due transactions, and
	// ClaimBatch how many it claims at once.
	PollInterval time.Duration
	ClaimBatch   int
	// MaxDrivers bounds the transactions recovery drives at once.
	MaxDrivers int
	// Retention is how long finished transactions are kept; 0 keeps them forever.
	Retention     time.Duration
	PurgeInterval time.Duration
	// CommitBatch bounds the mutations group-committed in one store
	// transaction; CommitWorkers is how many store transactions may be in flight.
	CommitBatch   int
	CommitWorkers int
	// CommitWait is how long a commit waits for others to join it when
	// changes arrive often enough that one is likely to (under load; an
	// idle store commits at once), as MySQL's binlog_group_commit_sync_delay.
	// 0 commits at once always.
	CommitWait time.Duration
	// CheckBranchURLs makes prepare/submit/registerBranch refuse a branch URL
	// whose host does not accept TCP connections (400, nothing stored).
	CheckBranchURLs bool
	// BranchHosts are the hosts branch URLs may reach: CIDRs, addresses,
	// host names and *.domain patterns (see wire.HostPolicy). Empty: every
	// host but link-local addresses and the cloud metadata services.
	BranchHosts []string
	// NetHTTPClient calls plain-HTTP branches through net/http's Transport
	// instead of the hand-written keep-alive client (wire's branchClient),
	// and NoRawSyscalls has that client read and write through net.Conn
	// instead of raw system calls (internal/rawconn): off switches for the
	// hand-written I/O, to measure what each buys and to fall back on
	// (issue 31).
	NetHTTPClient bool
	NoRawSyscalls bool
	// AlertWebhook, when set, receives dtm's alert (a POST of {"gid",
	// "status", "branch", "error", "retry_count"}) each time a branch has
	// failed AlertRetryLimit times in a row or more, as dtm's AlertWebHook.
	AlertWebhook    string
	AlertRetryLimit int
	// TestHooks turns on the hooks dtm's own test suite needs (testhooks.go)
	// and turns off background recovery, which those tests run by hand.
	TestHooks bool
}

// DefaultConfig returns dtm's defaults where dtm has one.
func DefaultConfig() Config {
	return Config{
		Instance:        "sluice",
		RequestTimeout:  3 * time.Second,
		RetryInterval:   10 * time.Second,
		MaxBackoff:      10 * time.Minute,
		RetryLimit:      12,
		AlertRetryLimit: 3,
		TimeoutToFail:   35 * time.Second,
		Lease:           30 * time.Second,
		PollInterval:    time.Second,
		ClaimBatch:      64,
		MaxDrivers:      128,
		Retention:       7 * 24 * time.Hour,
		PurgeInterval:   time.Minute,
		CommitBatch:     256,
		CommitWorkers:   4,
		CommitWait:      1500 * time.Microsecond, // see committer
		CheckBranchURLs: true,
	}
}

// Validate reports the first unusable setting.
func (c Config) Validate() error {
	bad := func(what string) error {
		return sluice.Errorf(sluice.ErrConfig, "dtx config", "use a positive value", "%s", what)
	}
	switch {
	case c.Instance == "":
		return bad("instance name is empty")
	case c.RequestTimeout <= 0:
		return bad("request timeout must be positive")
	case c.RetryInterval <= 0 || c.MaxBackoff < c.RetryInterval:
		return bad("retry interval must be positive and not above max backoff")
	case c.RetryLimit <= 0:
		return bad("retry limit must be positive")
	case c.TimeoutToFail <= 0:
		return bad("timeout-to-fail must be positive")
	case c.Lease < 2*c.RequestTimeout:
		return bad(fmt.Sprintf("lease %v must be at least twice the request timeout %v", c.Lease, c.RequestTimeout))
	case c.PollInterval <= 0 || c.ClaimBatch <= 0 || c.MaxDrivers <= 0:
		return bad("poll interval, claim batch and max drivers must be positive")
	case c.Retention < 0 || c.PurgeInterval <= 0:
		return bad("retention must not be negative and purge interval must be positive")
	case c.CommitBatch <= 0 || c.CommitWorkers <= 0:
		return bad("commit batch and workers must be positive")
	case c.CommitWait < 0 || c.CommitWait > time.Second:
		return bad("commit wait must be between 0 and 1s")
	case c.AlertWebhook != "" && c.AlertRetryLimit <= 0:
		return bad("alert retry limit must be positive")
	}
	if _, err := wire.ParseHostPolicy(c.BranchHosts); err != nil {
		return sluice.Errorf(sluice.ErrConfig, "dtx config", "give CIDRs (10.0.0.0/8), addresses, host names or *.domain patterns", "%v", err)
	}
	if c.AlertWebhook != "" {
		if err := wire.CheckURL(c.AlertWebhook, wire.HTTP); err != nil {
			return sluice.Errorf(sluice.ErrConfig, "dtx config", "give an http or https URL", "alert webhook: %v", err)
		}
	}
	return nil
}
