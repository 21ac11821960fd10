package dtx

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-db/sluice/dtx/internal/wire"
	"github.com/sluice-db/sluice/internal/procstat"
)

// Coordinator drives global transactions. It is safe for concurrent use.
type Coordinator struct {
	cfg     Config
	store   Store
	commit  *committer
	caller  wire.Caller
	metrics *Metrics
	log     *slog.Logger

	instance string // unique per process, prefix of every lease token
	seq      atomic.Uint64

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	active sync.Map // gid -> struct{}: driven by this process right now
	// working counts the API calls and background drives in progress: the
	// transactions this process is working on, for the commit wait.
	working atomic.Int64
	cpu     HostLoad
	slots   chan struct{}
	hooks   *hooks
}

// New builds a coordinator on store. reg receives the metrics (nil: none).
// Branches are called through the wire transport and the host's load read
// from /proc/stat, unless opts say otherwise.
func New(cfg Config, store Store, reg prometheus.Registerer, log *slog.Logger, opts ...Option) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	policy, err := wire.ParseHostPolicy(cfg.BranchHosts)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	m := NewMetrics(reg)
	ctx, cancel := context.WithCancel(context.Background())
	c := &Coordinator{
		cfg:      cfg,
		store:    store,
		commit:   newCommitter(store, cfg.CommitWorkers, cfg.CommitBatch, cfg.CommitWait, m),
		cpu:      procstat.NewBusy(),
		metrics:  m,
		log:      log,
		instance: cfg.Instance + "-" + hex.EncodeToString(rnd[:]),
		ctx:      ctx,
		cancel:   cancel,
		slots:    make(chan struct{}, cfg.MaxDrivers),
		hooks:    newHooks(cfg.TestHooks),
	}
	for _, o := range opts {
		o(c)
	}
	if c.caller == nil {
		c.caller = wire.New(policy, wire.Options{NetHTTP: cfg.NetHTTPClient, NoRawSyscalls: cfg.NoRawSyscalls})
	}
	c.commit.inflight = c.working.Load
	c.commit.hostLoad = c.cpu.Load
	return c, nil
}

// Metrics returns the coordinator's metric series.
func (c *Coordinator) Metrics() *Metrics { return c.metrics }

// LeaseResetter is implemented by stores that only one process can open
// (bolt): every lease found at start-up belonged to a dead process.
type LeaseResetter interface {
	ResetLeases(ctx context.Context) error
}

// SessionLeases is implemented by stores that several coordinators share
// and that see whether a coordinator's session with them has ended (mysql:
// a named lock its connection holds). A coordinator registers at Start
// under its incarnation, the prefix of all its lease tokens; recovery
// releases the leases of owners whose session ended, so that a killed
// coordinator's transactions resume at once rather than after --lease.
type SessionLeases interface {
	RegisterOwner(ctx context.Context, incarnation string) error
	ReleaseDeadOwners(ctx context.Context, now time.Time) (int, error)
}

// Start launches recovery and retention. Close stops them.
func (c *Coordinator) Start() error {
	if lr, ok := c.store.(LeaseResetter); ok {
		if err := lr.ResetLeases(c.ctx); err != nil {
			return fmt.Errorf("reset leases: %w", err)
		}
	}
	if sl, ok := c.store.(SessionLeases); ok {
		if err := sl.RegisterOwner(c.ctx, c.instance); err != nil {
			return fmt.Errorf("register as a lease owner: %w", err)
		}
	}
	c.wg.Add(3)
	if c.hooks == nil {
		go c.recoveryLoop()
	} else {
		c.wg.Done() // dtm's tests run the cron themselves (CronOnce)
	}
	go c.purgeLoop()
	go func() {
		defer c.wg.Done()
		c.cpu.Run(c.ctx.Done(), 250*time.Millisecond)
	}()
	return nil
}

// Close stops recovery and every transaction this process is driving; their
// leases lapse and another coordinator (or this one restarted) resumes them.
func (c *Coordinator) Close() error {
	c.cancel()
	c.wg.Wait()
	c.commit.close()
	if cl, ok := c.caller.(interface{ Close() }); ok {
		cl.Close()
	}
	return nil
}

func (c *Coordinator) newToken() string {
	return c.instance + "-" + strconv.FormatUint(c.seq.Add(1), 36)
}

// NewGid returns a fresh global transaction id.
func (c *Coordinator) NewGid() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Prepare stores a TCC or message transaction as prepared.
func (c *Coordinator) Prepare(ctx context.Context, r *Request) error {
	c.working.Add(1)
	defer c.working.Add(-1)
	switch r.TransType {
	case TypeSaga:
		return fmt.Errorf("%w: a saga is submitted directly, it has no prepare phase", ErrBadRequest)
	case TypeWorkflow:
		return fmt.Errorf("%w: a workflow begins with prepareWorkflow, not prepare", ErrBadRequest)
	}
	if err := c.checkReachable(ctx, r.Protocol, r.branchURLs()); err != nil {
		return err
	}
	if err := c.expandTopics(ctx, r); err != nil {
		return err
	}
	g := r.global(StatusPrepared)
	now := time.Now().UTC()
	g.CreateTime, g.UpdateTime = now, now
	g.NextCronTime = now.Add(c.timeoutToFail(g))
	err := c.commit.do(ctx, &Mutation{Gid: g.Gid, Create: true, Global: g, NewBranches: GenBranches(g)})
	if errors.Is(err, ErrExists) {
		cur, _, gerr := c.store.Get(ctx, g.Gid)
		if gerr != nil {
			return gerr
		}
		if cur.Status != StatusPrepared {
			return fmt.Errorf("current status '%s', cannot prepare: %w", cur.Status, ErrFailure)
		}
		return nil
	}
	return err
}

// Submit stores a saga or message as submitted (or moves a prepared TCC or
// message to submitted) and drives it; with wait_result it returns once the
// transaction has finished or must be retried later.
func (c *Coordinator) Submit(ctx context.Context, r *Request) error {
	c.working.Add(1)
	defer c.working.Add(-1)
	if err := c.checkReachable(ctx, r.Protocol, r.branchURLs()); err != nil {
		return err
	}
	if r.TransType == TypeWorkflow {
		return c.submitWorkflow(ctx, r)
	}
	token := c.newToken()
	now := time.Now().UTC()
	var g *Global
	var branches []Branch
	if !Registered(r.TransType) {
		if err := c.expandTopics(ctx, r); err != nil {
			return err
		}
		g = r.global(StatusSubmitted)
		g.CreateTime, g.UpdateTime = now, now
		g.Owner, g.LeaseUntil = token, now.Add(c.cfg.Lease)
		g.NextCronTime = now.Add(c.retryInterval(g))
		branches = GenBranches(g)
		err := c.commit.do(ctx, &Mutation{Gid: g.Gid, Create: true, Global: g, NewBranches: branches})
		if err == nil {
			return c.driveNew(ctx, g, branches, token, r.WaitResult)
		}
		if !errors.Is(err, ErrExists) {
			return err
		}
	}
	// The gid exists: a prepared TCC or message moves to submitted.
	cur, _, err := c.store.Get(ctx, r.Gid)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return fmt.Errorf("no transaction with gid %s was prepared: %w", r.Gid, ErrFailure)
		}
		return err
	}
	switch cur.Status {
	case StatusSubmitted:
		// A retried submit: like dtm, drive it again now, unless a driver
		// holds it at the moment.
		if cur.Owner != "" && cur.LeaseUntil.After(now) {
			return nil
		}
		return c.retake(ctx, cur, token, r.WaitResult)
	case StatusPrepared:
	default:
		return fmt.Errorf("current status '%s', cannot submit: %w", cur.Status, ErrFailure)
	}
	return c.transition(ctx, cur, StatusSubmitted, "", token, r.WaitResult)
}

// Abort rolls back a prepared TCC, or fails a prepared message.
func (c *Coordinator) Abort(ctx context.Context, r *Request) error {
	c.working.Add(1)
	defer c.working.Add(-1)
	cur, _, err := c.store.Get(ctx, r.Gid)
	if err != nil {
		return err
	}
	token := c.newToken()
	if cur.TransType == TypeMsg && cur.Status == StatusPrepared {
		return c.transition(ctx, cur, StatusFailed, r.RollbackReason, token, true)
	}
	if !Registered(cur.TransType) || (cur.Status != StatusPrepared && cur.Status != StatusAborting) {
		return fmt.Errorf("trans type '%s' with status '%s' cannot be aborted: %w", cur.TransType, cur.Status, ErrFailure)
	}
	return c.transition(ctx, cur, StatusAborting, r.RollbackReason, token, r.WaitResult)
}

// retake takes the lease of an unfinished transaction nobody drives (its
// owner unchanged since cur was read) and drives it.
func (c *Coordinator) retake(ctx context.Context, cur *Global, token string, wait bool) error {
	now := time.Now().UTC()
	g := cur.Clone()
	g.UpdateTime, g.Owner, g.LeaseUntil = now, token, now.Add(c.cfg.Lease)
	g.NextCronTime = now.Add(c.retryInterval(g))
	err := c.commit.do(ctx, &Mutation{Gid: g.Gid, Global: g, IfStatus: []string{cur.Status}, IfOwner: cur.Owner})
	if errors.Is(err, ErrConflict) {
		return nil // another driver took it meanwhile
	}
	if err != nil {
		return err
	}
	_, branches, err := c.store.Get(ctx, g.Gid)
	if err != nil {
		return err
	}
	return c.driveNew(ctx, g, branches, token, wait)
}

// transition moves a stored transaction to status on behalf of an API call,
// taking its lease, and drives it.
func (c *Coordinator) transition(ctx context.Context, cur *Global, status, reason, token string, wait bool) error {
	from := cur.Status
	now := time.Now().UTC()
	g := cur.Clone()
	g.Status, g.UpdateTime = status, now
	if reason != "" {
		g.RollbackReason = reason
	}
	g.Owner, g.LeaseUntil = token, now.Add(c.cfg.Lease)
	g.NextCronTime = now.Add(c.retryInterval(g))
	if g.Finished() {
		c.finish(g, now)
	}
	err := c.commit.do(ctx, &Mutation{Gid: g.Gid, Global: g, IfStatus: []string{from}})
	if err != nil {
		if errors.Is(err, ErrConflict) {
			return fmt.Errorf("%v, cannot move it to '%s': %w", err, status, ErrFailure)
		}
		return err
	}
	if g.Finished() {
		c.metrics.Transactions.WithLabelValues(g.TransType, g.Status).Inc()
		return nil
	}
	// Branches registered before the transition are all there now: no
	// registerBranch can succeed once the status left prepared.
	_, branches, err := c.store.Get(ctx, g.Gid)
	if err != nil {
		return err
	}
	return c.driveNew(ctx, g, branches, token, wait)
}

// RegisterBranch adds a TCC branch (its confirm and cancel URLs) to a
// prepared transaction. fields is dtm's registerBranch body.
func (c *Coordinator) RegisterBranch(ctx context.Context, fields map[string]string) error {
	c.working.Add(1)
	defer c.working.Add(-1)
	gid, bid := escape(fields["gid"]), fields["branch_id"]
	switch {
	case gid == "":
		return fmt.Errorf("%w: gid is empty", ErrBadRequest)
	case bid == "":
		return fmt.Errorf("%w: branch_id is empty", ErrBadRequest)
	case fields["trans_type"] == TypeWorkflow:
		return c.registerWorkflowStep(ctx, gid, bid, fields)
	case !Registered(fields["trans_type"]):
		return fmt.Errorf("%w: unsupported trans_type %q for registerBranch (want tcc, xa or workflow)", ErrBadRequest, fields["trans_type"])
	}
	// The gRPC API says so in protocol; dtm's HTTP and JSON-RPC clients
	// register http URLs.
	protocol := wire.HTTP
	if fields["protocol"] == wire.GRPC {
		protocol = wire.GRPC
	}
	var urls []string
	for _, op := range []string{OpConfirm, OpCancel, "url"} {
		if u := fields[op]; u != "" {
			if err := wire.CheckURL(u, protocol); err != nil {
				return fmt.Errorf("%w: %s: %v", ErrBadRequest, op, err)
			}
			urls = append(urls, u)
		}
	}
	if err := c.checkReachable(ctx, protocol, urls); err != nil {
		return err
	}
	nb := tccBranches(gid, bid, fields["data"], fields[OpConfirm], fields[OpCancel])
	if fields["trans_type"] == TypeXA {
		nb = xaBranches(gid, bid, fields["data"], fields["url"])
	}
	m := &Mutation{Gid: gid, NewBranches: nb, IfStatus: []string{StatusPrepared}}
	err := c.commit.do(ctx, m)
	if errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
		return fmt.Errorf("no transaction with gid %s and status prepared: %w", gid, ErrFailure)
	}
	return err
}

// Query returns a transaction and its branches.
func (c *Coordinator) Query(ctx context.Context, gid string) (*Global, []Branch, error) {
	return c.store.Get(ctx, gid)
}

// List pages through stored transactions.
func (c *Coordinator) List(ctx context.Context, after string, limit int, status, transType string) ([]*Global, error) {
	return c.store.List(ctx, after, limit, status, transType)
}

// ForceStop marks an unfinished transaction failed without running anything
// more; the driver that held it loses its lease.
func (c *Coordinator) ForceStop(ctx context.Context, gid string) error {
	cur, _, err := c.store.Get(ctx, gid)
	if err != nil {
		return err
	}
	if cur.Finished() {
		return fmt.Errorf("transaction is already %s: %w", cur.Status, ErrFailure)
	}
	return c.transition(ctx, cur, StatusFailed, "force stopped", c.newToken(), true)
}

// ResetNextCronTime makes recovery retry a transaction now, clearing its
// retry count and a stuck mark (after an operator fixed the branch).
func (c *Coordinator) ResetNextCronTime(ctx context.Context, gid string) error {
	cur, _, err := c.store.Get(ctx, gid)
	if err != nil {
		return err
	}
	if cur.Finished() {
		return nil // dtm answers 200: a finished transaction has nothing to retry
	}
	g := cur.Clone()
	now := time.Now().UTC()
	g.NextCronTime, g.Retries, g.Stuck, g.UpdateTime = now, 0, "", now
	g.Owner, g.LeaseUntil = "", time.Time{}
	return c.commit.do(ctx, &Mutation{Gid: gid, Global: g, IfStatus: []string{cur.Status}, IfOwner: cur.Owner})
}

func (c *Coordinator) timeoutToFail(g *Global) time.Duration {
	if g.Options.TimeoutToFail > 0 {
		return time.Duration(g.Options.TimeoutToFail) * time.Second
	}
	return c.cfg.TimeoutToFail
}

func (c *Coordinator) retryInterval(g *Global) time.Duration {
	if g.Options.RetryInterval > 0 {
		return time.Duration(g.Options.RetryInterval) * time.Second
	}
	return c.cfg.RetryInterval
}

func (c *Coordinator) requestTimeout(g *Global) time.Duration {
	if g.Options.RequestTimeout > 0 {
		return time.Duration(g.Options.RequestTimeout) * time.Second
	}
	return c.cfg.RequestTimeout
}

func (c *Coordinator) finish(g *Global, now time.Time) {
	if g.Status == StatusSucceed {
		g.FinishTime = now
	} else {
		g.RollbackTime = now
		g.FinishTime = now
	}
	g.NextCronTime, g.LeaseUntil = time.Time{}, time.Time{}
}

// Log is the coordinator's logger, for the transports in front of it.
func (c *Coordinator) Log() *slog.Logger {
	if c == nil || c.log == nil {
		return slog.Default()
	}
	return c.log
}
