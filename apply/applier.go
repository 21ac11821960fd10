package apply

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/stagetime"
)

// txn is one source transaction held for scheduling.
type txn struct {
	ts      uint32
	gtid    string
	end     sluice.Position
	changes []sluice.RowChange
	bytes   int
	// savepoints are the live savepoints of a held transaction (savepoint.go).
	savepoints []savepointAt
	// xid is set for a prepared XA transaction's prepare group (xa.go).
	xid string
}

// unit is a group of consecutive source transactions applied as one target
// transaction by one worker.
type unit struct {
	seq    uint64 // commit order, 1-based within this run
	worker int
	txns   []*txn
	keys   []uint64
	bytes  int
	rows   int
	// compacted is set by the worker when it applied net row changes.
	compacted bool
	// conflicted: counted in Stats.Conflicts (it overlapped the groups of
	// two workers, or RelaxedOrder's window was full, when it was to go).
	conflicted bool
	// barrier: a change in it makes the target cascade through a foreign
	// key, so it conflicts with every other group (fkeys.go).
	barrier bool
	// nontx: its one source transaction changes a non-transactional
	// target table (nontx.go); it is marked before it runs
	// (nontxreplay.go).
	nontx bool
}

// Stats are the applier's counters.
type Stats struct {
	Applied   sluice.Position // the position after the last committed source transaction
	Txns      uint64          // source transactions committed
	Rows      uint64          // row changes committed
	Commits   uint64          // target transactions committed
	DDL       uint64
	LastTime  uint32 // source timestamp of the last committed transaction, for lag
	InFlight  int    // target transactions executing or waiting to commit
	Conflicts uint64 // groups that had to wait because they conflicted with two workers
	// Queued is the stream items submitted and not yet taken by the
	// scheduler.
	Queued int
	// Chained counts groups that overlapped the uncommitted groups of one
	// worker and were queued behind them on it: a chain of such groups
	// runs on that worker alone, one after another. Grown counts groups
	// that grew past the group limit because dispatching them would have
	// waited (chain.go).
	Chained uint64
	Grown   uint64
	// MaxInFlight is the most target transactions that were executing or
	// waiting to commit at once: how much parallelism the writesets allowed.
	MaxInFlight int
	// Compacted counts target transactions applied as net row changes.
	Compacted uint64
	// OutOfOrder counts groups committed before an earlier group
	// (RelaxedOrder only).
	OutOfOrder uint64
	// GroupLimit is the current group size limit (Batch, grown up to
	// MaxBatch while target commits are slow).
	GroupLimit int
	// SkipRanges is how many groups the previous run committed past its
	// low-water mark (found at Start); Skipped counts the source
	// transactions this run skipped because they were in them.
	SkipRanges int
	Skipped    uint64
	// LockYields counts groups rolled back and run again because they held
	// a lock that a group earlier in commit order waited for (lockwait.go).
	LockYields uint64
	// MissingRows counts the rows that UPDATEs and DELETEs of committed
	// transactions did not find on the target (OnMissingRow skip).
	MissingRows uint64
}

// Applier applies a decoded stream to the target. Submit is called by one
// goroutine; Stats, Flush and Close may be called from any goroutine.
type Applier struct {
	cfg       Config
	db        *sql.DB
	ckptTable string
	tables    sync.Map // *sluice.Table -> *tableInfo
	weights   weightTables

	in      chan sluice.StreamItem
	flushes chan chan error
	// progress is nudged when a worker takes a group or a group commits:
	// what a scheduler holding a group that would wait waits for
	// (chain.go).
	progress chan struct{}
	done     chan struct{}
	// over is Done's channel: closed once an error stops the applier or
	// its scheduler ends, whichever comes first (overOnce).
	over     chan struct{}
	overOnce sync.Once
	stop     chan struct{}
	wg       sync.WaitGroup
	workers  []*worker
	serial   *sql.Conn

	mu         sync.Mutex
	cond       *sync.Cond
	owner      map[uint64]*unit
	lastSeq    uint64
	nextCommit uint64
	baseSeq    uint64
	pending    string // position of a DDL that may have run before a crash
	// nontxPending: the end positions of non-transactional groups that
	// may have run in part before a crash (nontxreplay.go); nil once one
	// was replayed (which clears every mark).
	nontxPending []string
	startPos     sluice.Position // the checkpoint at Start: anything at or before it is applied already
	err          error
	stats        Stats
	// ahead are groups committed past the low-water mark (nextCommit-1),
	// by seq: possible only with RelaxedOrder.
	ahead map[uint64]aheadUnit

	// uncommitted counts each worker's dispatched groups not yet
	// committed; barrierU is the barrier group not yet committed, if any
	// (fkeys.go, conflicts).
	uncommitted []int
	barrierU    *unit
	fkIdx       *fkIndex // the scheduler's (fkeys.go, readFKs)
	// persisted is the highest low-water mark (seq) written to a
	// checkpoint row; idle workers write the current one when it lags.
	persisted uint64
	// inherited are the ranges an earlier run committed past the
	// checkpoint; immutable after Start.
	inherited []txnRange

	metaReady  atomic.Bool
	groupLimit atomic.Int64
	commitRTT  atomic.Int64 // moving average of COMMIT round trips, ns
	rtt        time.Duration

	started   atomic.Bool
	closeOnce sync.Once
	closeErr  error

	clocks  Clocks
	xaReady bool // apply_xa exists (xa.go; the scheduler goroutine's)
	// valuesOK: the target takes table value constructors; tidb: the
	// target is TiDB (tidbddl.go). Both set in Start (tvc.go), read-only
	// after.
	valuesOK bool
	tidb     bool
}

// New returns an applier writing to db, which must accept multi-statement
// batches (open it with OpenTarget or TargetConfig) and allow at least
// Workers+2 connections (PoolSize gives what it uses). Call Start before
// Submit.
func New(cfg Config, db *sql.DB) (*Applier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &Applier{
		cfg:       cfg,
		db:        db,
		ckptTable: sluice.QuoteIdent(cfg.MetaSchema) + ".apply_checkpoint",
		in:        make(chan sluice.StreamItem, cfg.Queue),
		flushes:   make(chan chan error),
		progress:  make(chan struct{}, 1),
		done:      make(chan struct{}),
		over:      make(chan struct{}),
		stop:      make(chan struct{}),
		owner:     map[uint64]*unit{},
		ahead:     map[uint64]aheadUnit{},
	}
	a.cond = sync.NewCond(&a.mu)
	a.groupLimit.Store(int64(cfg.Batch))
	return a, nil
}

// Start creates the checkpoint tables if needed, opens the worker
// connections and starts applying. The stream submitted next must begin
// right after the position Checkpoint returns.
func (a *Applier) Start(ctx context.Context) error {
	if !a.started.CompareAndSwap(false, true) {
		return errors.New("applier already started")
	}
	if err := a.ensureMeta(ctx); err != nil {
		return err
	}
	var err error
	if a.serial, err = a.openConn(ctx); err != nil {
		return err
	}
	if err := a.fence(ctx, a.serial, serialWorker); err != nil {
		a.closeConns()
		return err
	}
	// The round trip is measured on the serial connection while the
	// worker connections are opened and fenced, in parallel: with a
	// distant target, one after another would cost several round trips
	// each before the first transaction is applied.
	probed := make(chan error, 1)
	go func() {
		err := a.probeRTT(ctx, a.serial)
		if err == nil {
			err = a.readTarget(ctx)
		}
		probed <- err
	}()
	conns := make([]*sql.Conn, a.cfg.Workers)
	ids := make([]uint64, a.cfg.Workers)
	errs := make([]error, a.cfg.Workers)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := a.openConn(ctx)
			if err == nil {
				if err = a.fence(ctx, c, i); err != nil {
					c.Close()
					c = nil
				} else if ids[i], err = connectionID(ctx, c); err != nil {
					// c stays a worker, so closeConns releases its lock.
					err = fmt.Errorf("read the worker session id: %w", err)
				}
			}
			conns[i], errs[i] = c, err
		}(i)
	}
	wg.Wait()
	if err := <-probed; err != nil {
		errs = append(errs, err)
	}
	for i, c := range conns {
		if c != nil {
			a.workers = append(a.workers, &worker{a: a, id: i, conn: c, connID: ids[i], ch: make(chan *unit, 2)})
		}
	}
	for _, err := range errs {
		if err != nil {
			a.closeConns()
			return err
		}
	}
	if err := a.fenceOld(ctx); err != nil {
		a.closeConns()
		return err
	}
	// Only now, with every earlier session gone, is the checkpoint final.
	r, err := a.readCheckpoint(ctx)
	if err != nil {
		a.closeConns()
		return err
	}
	a.baseSeq, a.pending, a.stats.Applied = r.seq, r.pending, r.pos
	a.nontxPending = r.nontx
	a.startPos, a.inherited = r.pos, r.done
	a.stats.SkipRanges = len(r.done)
	a.nextCommit = 1
	for _, w := range a.workers {
		a.wg.Add(1)
		go func(w *worker) {
			defer a.wg.Done()
			w.run()
		}(w)
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer a.overOnce.Do(func() { close(a.over) })
		defer close(a.done)
		a.schedule()
	}()
	if !a.cfg.RelaxedOrder && len(a.workers) > 1 {
		// Groups that commit out of order never wait for a turn while
		// holding locks, so only ordered commit needs the monitor.
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			a.lockMonitor()
		}()
	}
	return nil
}

func (a *Applier) openConn(ctx context.Context) (*sql.Conn, error) {
	c, err := a.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("open target connection: %w", err)
	}
	// READ COMMITTED avoids gap locks between workers that touch different
	// rows; rowSQLMode makes every value the target cannot store as given
	// an error. Foreign keys are checked, as a MariaDB replica checks them:
	// the source does not binlog what its cascades change, so the target
	// must run them itself (fkeys.go); a rows event from a source session
	// without the checks turns them off for its rows (batch.go, fkFor).
	// CHECK constraints are not checked again: the source checked them, or
	// its session turned them off, and a replica stores what the source
	// stored either way (issue 29, N13). The variable is MariaDB's (10.2.1
	// on), hence the versioned comment, which other servers skip.
	_, err = c.ExecContext(ctx, fmt.Sprintf("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED; "+
		"SET SESSION sql_mode='%s', foreign_key_checks=1, /*M!100201 check_constraint_checks=0, */"+
		"innodb_lock_wait_timeout=%d, time_zone='+00:00', autocommit=1", rowSQLMode, int(a.cfg.LockWaitTimeout/time.Second)))
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("set up target session: %w", err)
	}
	return c, nil
}

// closeConns hands the connections back to the pool. They may live on in
// it, so their fence locks are released first: a later applier on the same
// pool must not find its own worker locks held by an idle session.
// The target session's sql_mode for row changes. STRICT_ALL_TABLES turns
// every truncation or conversion of a value into an error (notes remain;
// batch.go checks for them). NO_AUTO_VALUE_ON_ZERO keeps explicit zero ids.
// Nothing rejects a value the source may hold: no NO_ZERO_DATE or
// NO_ZERO_IN_DATE, because a source without them stores zero dates, which
// the binlog then carries; ERROR_FOR_DIVISION_BY_ZERO would only matter
// for expressions, and row changes carry values.
const rowSQLMode = "STRICT_ALL_TABLES,NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION"

// ddlSQLMode is the mode DDL runs in (applyDDL).
const ddlSQLMode = "NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION"

// addMissing counts rows that committed transactions did not find
// (on-missing-row: skip).
func (a *Applier) addMissing(n int) {
	if n == 0 {
		return
	}
	a.mu.Lock()
	a.stats.MissingRows += uint64(n)
	a.mu.Unlock()
}

func (a *Applier) closeConns() {
	release := func(c *sql.Conn, worker int) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = c.ExecContext(ctx, "ROLLBACK")
		_, _ = c.ExecContext(ctx, "DO RELEASE_LOCK(?)", a.lockName(worker))
		c.Close()
	}
	if a.serial != nil {
		release(a.serial, serialWorker)
	}
	for _, w := range a.workers {
		release(w.conn, w.id)
	}
}

// Submit queues one stream item. It blocks while the queue is full, and
// returns the applier's error once it has failed: the caller then stops
// and restarts from Checkpoint.
func (a *Applier) Submit(ctx context.Context, it sluice.StreamItem) error {
	if err := a.Err(); err != nil {
		return err
	}
	select {
	case a.in <- it:
		return nil
	default:
	}
	// The queue is full: the caller waits for the applier, timed.
	t0 := a.clocks.Submit.Enter(stagetime.WaitOutput)
	defer a.clocks.Submit.Leave(stagetime.WaitOutput, t0)
	select {
	case a.in <- it:
		return nil
	case <-a.done:
		if err := a.Err(); err != nil {
			return err
		}
		return errors.New("applier closed")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Flush waits until every item submitted before it that completes a
// transaction is committed on the target.
func (a *Applier) Flush(ctx context.Context) error {
	ch := make(chan error, 1)
	select {
	case a.flushes <- ch:
	case <-a.done:
		return a.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Done is closed when the applier has stopped for good: an error stopped
// it (Err says which), or it was closed. As context.Context's Done, it
// lets a caller wait on the applier beside other events instead of
// polling Err.
func (a *Applier) Done() <-chan struct{} { return a.over }

// Err is the error that stopped the applier, if any.
func (a *Applier) Err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// Stats returns a snapshot of the counters.
func (a *Applier) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.stats
	s.InFlight = int(a.lastSeq + 1 - a.nextCommit)
	s.GroupLimit = int(a.groupLimit.Load())
	s.Queued = len(a.in)
	return s
}

// Close stops the applier. Transactions not yet committed are rolled back
// by the server when their connections close; the checkpoint covers
// exactly what was committed.
func (a *Applier) Close() error {
	a.closeOnce.Do(func() {
		if !a.started.Load() {
			return
		}
		a.fail(errClosed)
		close(a.stop)
		a.wg.Wait()
		a.closeConns()
		if err := a.Err(); err != nil && !errors.Is(err, errClosed) {
			a.closeErr = err
		}
	})
	return a.closeErr
}

var errClosed = errors.New("applier closed")

// fail records the first error and wakes everyone waiting.
func (a *Applier) fail(err error) {
	err = tidbLimit(err)
	a.mu.Lock()
	if a.err == nil {
		a.err = err
	}
	a.cond.Broadcast()
	a.mu.Unlock()
	a.overOnce.Do(func() { close(a.over) })
}

// barrier waits until every dispatched unit has committed.
func (a *Applier) barrier() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for a.err == nil && a.nextCommit <= a.lastSeq {
		a.cond.Wait()
	}
	return a.err
}

// waitTurn blocks until seq may commit.
func (a *Applier) waitTurn(seq uint64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for a.err == nil && a.nextCommit != seq {
		a.cond.Wait()
	}
	return a.err
}

// aheadUnit is a group committed past the low-water mark.
type aheadUnit struct {
	end sluice.Position
	ts  uint32
}

// committed records that group seq committed: u, or a serial transaction
// (u nil). The low-water mark (nextCommit-1, stats.Applied) moves over
// every group committed without a gap.
func (a *Applier) committed(seq uint64, u *unit, end sluice.Position, txns, rows int, ts uint32) {
	a.mu.Lock()
	if u != nil && u.compacted {
		a.stats.Compacted++
	}
	if u != nil {
		for _, k := range u.keys {
			if a.owner[k] == u {
				delete(a.owner, k)
			}
		}
		a.uncommitted[u.worker]--
		if a.barrierU == u {
			a.barrierU = nil
		}
	}
	if seq == a.nextCommit {
		a.nextCommit++
		a.stats.Applied = end
		if ts != 0 {
			a.stats.LastTime = ts
		}
		for {
			n, ok := a.ahead[a.nextCommit]
			if !ok {
				break
			}
			delete(a.ahead, a.nextCommit)
			a.nextCommit++
			a.stats.Applied = n.end
			if n.ts != 0 {
				a.stats.LastTime = n.ts
			}
		}
	} else {
		a.ahead[seq] = aheadUnit{end: end, ts: ts}
		a.stats.OutOfOrder++
	}
	a.stats.Txns += uint64(txns)
	a.stats.Rows += uint64(rows)
	a.stats.Commits++
	a.cond.Broadcast()
	a.mu.Unlock()
	a.nudge()
}

// nudge tells a scheduler holding a group that would wait that something
// moved (chain.go).
func (a *Applier) nudge() {
	select {
	case a.progress <- struct{}{}:
	default:
	}
}
