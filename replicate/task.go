package replicate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/apply"
	"github.com/sluice-db/sluice/binlog"
	"github.com/sluice-db/sluice/decode"
	"github.com/sluice-db/sluice/internal/backoff"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/relay"
	"github.com/sluice-db/sluice/schema"
	"github.com/sluice-db/sluice/serve"

	"github.com/prometheus/client_golang/prometheus"
)

// Task runs one replication task. Run may be called once.
type Task struct {
	cfg Config
	log io.Writer

	events   atomic.Uint64
	restarts atomic.Int64

	mu      sync.Mutex
	stage   string
	lastErr string
	started time.Time
	writer  *relay.Writer
	breader *binlog.Reader
	rlog    *relay.Log
	applier *apply.Applier
	base    apply.Stats // counters of appliers that were replaced
	pending []pendingTxn
	// read is the end of the last relay event the apply loop decoded. Events
	// that are no transaction (rotate, format description, Gtid_list,
	// binlog checkpoint) move it but never the applied checkpoint, so lag
	// compares the source with it, not with the checkpoint.
	read    sluice.Position
	metAddr string
	met     *metrics // counts errors (setStage)
	// srv is the binlog service of a task with serve:, while it runs.
	srv     *serve.Server
	srvAddr string
	// Pause and Resume: a paused task has stopped reading and applying
	// (its run context cancelled) until resumed.
	runCancel context.CancelFunc
	handles   *handler      // sluice skip / replace of this run
	paused    chan struct{} // non-nil while paused; closed by Resume
	prevAt    time.Time
	prevEvts  uint64
	prevTxns  uint64
	// clocks time the pipeline's stages (stages.go).
	clocks pipelineClocks
	// metOn says where the metrics are served, for the start line.
	metOn string
	// pausedAt and pausedLag: when the task was paused and its lag then
	// (pausestatus.go).
	pausedAt  time.Time
	pausedLag float64
	// own is the server id that marks the task's own writes when its
	// target is its source (ownwrites.go); 0 otherwise.
	own uint32
}

type pendingTxn struct {
	end sluice.Position
	ts  uint32
}

// New validates cfg. Messages (start, retries, stop) go to out.
func New(cfg Config, out io.Writer) (*Task, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if out == nil {
		out = io.Discard
	}
	return &Task{cfg: cfg, log: out, stage: StageStarting}, nil
}

func (t *Task) logf(format string, args ...any) {
	fmt.Fprintf(t.log, "%s replicate %s: %s\n", time.Now().UTC().Format("2006-01-02T15:04:05Z"), t.cfg.Name, fmt.Sprintf(format, args...))
}

// Run replicates until ctx ends (a clean stop returns nil) or a fatal error.
// start is the full copy's snapshot position for --mode all; nil means the
// checkpoint, or Config.Start for a task that has none.
func (t *Task) Run(ctx context.Context, start *sluice.Position) error {
	t.mu.Lock()
	t.started = time.Now()
	t.mu.Unlock()
	unlock, err := prepareDir(t.cfg.Dir, t.cfg.Name) // taskdir.go
	if err != nil {
		return err
	}
	defer unlock()
	// The metrics outlive each run: a paused task keeps serving them
	// (pausestatus.go), so its alerts see it paused, not gone.
	m, err := t.openMetrics()
	if err != nil {
		return err
	}
	defer m.close()
	for {
		rctx, cancel := context.WithCancel(ctx)
		t.mu.Lock()
		t.runCancel = cancel
		t.mu.Unlock()
		err = t.run(rctx, start, m)
		cancel()
		t.mu.Lock()
		resumed := t.paused
		t.mu.Unlock()
		if resumed == nil || ctx.Err() != nil {
			break
		}
		// Paused: the reader and the applier stopped as on a clean stop,
		// with everything applied checkpointed; a resume runs again from
		// the checkpoint, as a restart would.
		if err != nil && !errors.Is(err, context.Canceled) {
			break
		}
		err = nil
		if t.whilePaused(ctx, resumed, m) { // pausestatus.go
			t.logf("resumed")
			continue
		}
		break
	}
	st := t.Status()
	st.Stage = StageStopped
	if err != nil {
		st.Stage, st.Error = StageFailed, oneLine(err)
	}
	_ = WriteStatus(t.cfg.Dir, st)
	return err
}

func (t *Task) run(ctx context.Context, start *sluice.Position, m *metrics) error {
	bcfg := t.cfg.Binlog
	bcfg.Source = t.cfg.Source
	if bcfg.Notify == nil {
		bcfg.Notify = t.logf
	}
	info, err := binlog.Check(ctx, bcfg)
	if err != nil {
		return err
	}
	flavor := info.Flavor
	bcfg.Flavor = flavor
	bcfg.ServerTLS = info.TLS
	t.cfg.Relay.Flavor, t.cfg.Decode.Flavor = flavor, flavor
	own, err := t.markOwnWrites(ctx, bcfg.ServerID) // ownwrites.go
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.own = own
	t.mu.Unlock()

	db, err := apply.OpenTarget(ctx, t.cfg.Target, t.cfg.Apply.Workers)
	if err != nil {
		return err
	}
	defer db.Close()
	// Before the binlog dump: a live process that runs this task from
	// another dir holds its fence on the target, and a dump with the same
	// server-id would cut that process's dump off again and again.
	if err := waitFence(ctx, db, t.cfg.Name, 2*time.Minute); err != nil {
		return err
	}
	pos, err := t.startPosition(ctx, db, start, info, bcfg)
	if err != nil {
		return err
	}
	rlog, err := relay.Open(t.cfg.Relay)
	if err != nil {
		return err
	}
	defer rlog.Close()
	if !rlog.Has(pos) {
		// The relay does not hold the checkpoint (first run, or the relay
		// was lost): fetch again from the checkpoint's file.
		if err := binlog.CheckPosition(info, pos, t.cfg.Source); err != nil {
			return err
		}
		if err := rlog.Reset(); err != nil {
			return err
		}
	}
	rlog.SetApplied(pos)
	t.mu.Lock()
	t.rlog = rlog
	t.mu.Unlock()

	t.mu.Lock()
	metOn := t.metOn
	t.mu.Unlock()
	t.logf("source %s (%s), target %s, from %s; relay in %s; metrics on %s", t.cfg.Source, flavor, t.cfg.Target, pos, t.cfg.Relay.Dir, metOn)
	if t.cfg.Serve != nil {
		// The applier's checkpoint and the readers of the dumps both hold
		// relay files (relay.Log.Purge), so serving needs no purge of its own.
		srv, ln, err := listenServe(t.cfg.Serve, t.cfg.Source, rlog, t.log, t.logf)
		if err != nil {
			return err
		}
		t.logf("serving the relay log on %s", ln.Addr())
		if t.cfg.ServeReady != nil {
			t.cfg.ServeReady(ln.Addr().String())
		}
		t.serving(srv, ln.Addr().String(), m)
		stop := startServe(srv, ln)
		defer func() {
			t.serving(nil, "", nil)
			if err := stop(); err != nil {
				t.logf("serve: %v", err)
			}
		}()
	}

	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	wg.Add(3)
	go func() { defer wg.Done(); errs <- t.fetch(rctx, rlog, bcfg, pos) }()
	go func() { defer wg.Done(); errs <- t.applyLoop(rctx, rlog, db) }()
	go func() { defer wg.Done(); t.statusLoop(rctx, m); errs <- nil }()
	var first error
	for i := 0; i < 3; i++ {
		err := <-errs
		if err != nil && !errors.Is(err, context.Canceled) && first == nil {
			first = err
		}
		cancel()
	}
	wg.Wait()
	if first == nil {
		t.logf("stopped at %s", t.Status().Applied)
	}
	return first
}

// startPosition returns the checkpoint, seeding it first for a new task.
func (t *Task) startPosition(ctx context.Context, db *sql.DB, start *sluice.Position, info *binlog.Info, bcfg binlog.Config) (sluice.Position, error) {
	a, err := apply.New(t.cfg.Apply, db)
	if err != nil {
		return sluice.Position{}, err
	}
	pos, ok, err := a.Checkpoint(ctx)
	if err != nil {
		return pos, dbconn.Classify(err, "target", t.cfg.Target)
	}
	if ok {
		pos.Flavor = info.Flavor
		return pos, nil
	}
	want := t.cfg.Start
	if start != nil {
		want = *start
	}
	if want.File == "" && want.GTIDSet == "" {
		return pos, &sluice.Error{Op: "start replication", Err: fmt.Errorf("%w: task %s has no checkpoint and no start position", sluice.ErrConfig, t.cfg.Name),
			Hint: "set incremental.gtid-set or incremental.binlog-file/binlog-pos in the task file, or run sluice migrate --mode all"}
	}
	if want, err = resolveStart(ctx, want, info, bcfg, t.cfg.Source); err != nil {
		return pos, err
	}
	state, err := seedSchema(ctx, t.cfg, db)
	if err != nil {
		return pos, err
	}
	if err := a.Seed(ctx, want, state); err != nil {
		return pos, dbconn.Classify(err, "target", t.cfg.Target)
	}
	t.logf("new task: starts at %s", want)
	return want, nil
}

// resolveStart completes a start position a task file gives (a GTID set,
// or a file and offset) with the other half, and checks that the source
// still has it.
func resolveStart(ctx context.Context, want sluice.Position, info *binlog.Info, bcfg binlog.Config, src sluice.Endpoint) (sluice.Position, error) {
	want.Flavor = info.Flavor
	if want.File == "" {
		p, err := binlog.ResolveGTID(ctx, bcfg, want.GTIDSet)
		if err != nil {
			return want, err
		}
		want.File, want.Pos = p.File, p.Pos
	} else if want.GTIDSet == "" && info.Flavor == "mariadb" {
		g, err := gtidAt(ctx, src, want)
		if err != nil {
			return want, err
		}
		want.GTIDSet = g
	}
	if want.Pos < 4 {
		want.Pos = 4
	}
	return want, binlog.CheckPosition(info, want, src)
}

// gtidAt asks a MariaDB source for the GTID position at a file/offset, so
// the checkpoint can be read by GTID as well.
func gtidAt(ctx context.Context, src sluice.Endpoint, p sluice.Position) (string, error) {
	db, err := dbconn.Open(ctx, "source", src, dbconn.Options{MaxOpen: 1})
	if err != nil {
		return "", err
	}
	defer db.Close()
	var g sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT BINLOG_GTID_POS(?, ?)", p.File, p.Pos).Scan(&g); err != nil {
		return "", dbconn.Classify(err, "source", src)
	}
	return g.String, nil
}

// fetch copies the source's binlog into the relay. The binlog reader
// reconnects by itself; what reaches here is fatal.
func (t *Task) fetch(ctx context.Context, rlog *relay.Log, bcfg binlog.Config, pos sluice.Position) error {
	w, err := rlog.NewWriter()
	if err != nil {
		return err
	}
	defer w.Close()
	br, err := binlog.NewReader(bcfg)
	if err != nil {
		return err
	}
	defer br.Close()
	br.SetClock(&t.clocks.fetch)
	w.SetClock(&t.clocks.relayWrite)
	if err := br.Start(ctx, w.Resume(pos)); err != nil {
		return err
	}
	t.mu.Lock()
	t.writer, t.breader = w, br
	t.mu.Unlock()
	err = w.Run(ctx, br)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// applyLoop applies the relay from the checkpoint, restarting from the
// checkpoint after transient failures (target restarts, lost connections).
func (t *Task) applyLoop(ctx context.Context, rlog *relay.Log, db *sql.DB) error {
	return t.cfg.retryLoop(ctx, func() error { return t.applyOnce(ctx, rlog, db) },
		func(err error) bool { return !retryable(err) },
		func(err error, wait time.Duration) {
			t.restarts.Add(1)
			t.setStage(StageRetrying, err)
			t.logf("%s", retryNote(err, wait.String())) // readonly.go
		})
}

// openDecoder readies a decoder at a checkpoint, with the schema state
// saved with it, and a relay reader there (on a first run it waits until
// the writer has stored the start).
func openDecoder(ctx context.Context, rlog *relay.Log, dcfg decode.Config, pos sluice.Position, state []byte) (*decode.Decoder, *relay.Reader, error) {
	tracker := schema.NewTracker()
	if state != nil {
		if err := tracker.Restore(state); err != nil {
			return nil, nil, err
		}
	}
	dcfg.GTIDPos = pos.GTIDSet
	dec, err := decode.New(dcfg, tracker)
	if err != nil {
		return nil, nil, err
	}
	if err := rlog.WaitFor(ctx, pos); err != nil {
		return nil, nil, err
	}
	r, err := rlog.NewReader(pos, decode.NewParser(dcfg.Flavor))
	if err != nil {
		return nil, nil, err
	}
	r.SkipComments() // the decoder ignores them
	return dec, r, nil
}

// retryLoop runs once until ctx ends (nil) or it fails in a way fatal says
// no retry fixes. Between tries it calls onRetry and waits by
// internal/backoff: RetryMin, doubled each time up to RetryMax, with
// jitter, and RetryMin again after a run that lasted a minute.
func (c Config) retryLoop(ctx context.Context, once func() error, fatal func(error) bool, onRetry func(err error, wait time.Duration)) error {
	bo := backoff.New(c.RetryMin, c.RetryMax)
	for {
		began := time.Now()
		err := once()
		if ctx.Err() != nil {
			return nil
		}
		if fatal(err) {
			return err
		}
		if time.Since(began) > time.Minute {
			bo.Reset()
		}
		wait := bo.Next().Round(time.Millisecond)
		onRetry(err, wait)
		if !backoff.Sleep(ctx, wait) {
			return nil
		}
	}
}

func (t *Task) applyOnce(ctx context.Context, rlog *relay.Log, plain *sql.DB) (err error) {
	if err := waitFence(ctx, plain, t.cfg.Name, 2*time.Minute); err != nil {
		return err
	}
	db, err := openFenced(ctx, t.cfg.Target, t.cfg.Name, t.cfg.Apply.Workers)
	if err != nil {
		return err
	}
	defer db.Close()
	acfg := t.cfg.Apply
	if acfg.Notify == nil {
		acfg.Notify = t.logf
	}
	a, err := apply.New(acfg, db)
	if err != nil {
		return err
	}
	pos, ok, err := a.Checkpoint(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("replicate: the checkpoint disappeared from the target")
	}
	sf, err := copyFilter(ctx, db, t.cfg.Apply.MetaSchema, t.cfg.Name)
	if err != nil {
		return err
	}
	state, err := a.SchemaState(ctx)
	if err != nil {
		return err
	}
	dcfg := t.cfg.Decode
	hs, err := ReadHandles(t.cfg.Dir)
	if err != nil {
		return err
	}
	if len(hs) > 0 && dcfg.Handle == nil {
		h := &handler{dir: t.cfg.Dir, hs: hs, log: t.logf}
		dcfg.Handle = h.handle
		t.mu.Lock()
		t.handles = h
		t.mu.Unlock()
	}
	dec, r, err := openDecoder(ctx, rlog, dcfg, pos, state)
	if err != nil {
		return err
	}
	defer r.Close()
	r.SetClock(&t.clocks.decode)
	a.SetClocks(t.clocks.applier())
	if err := a.Start(ctx); err != nil {
		return err
	}
	t.setApplier(a, pos)
	defer func() {
		if ctx.Err() != nil && err == nil || errors.Is(err, context.Canceled) {
			// Clean stop: commit what was submitted, so a restart has less to redo.
			fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_ = a.Flush(fctx)
			cancel()
		}
		if cerr := a.Close(); err == nil && ctx.Err() == nil {
			err = cerr
		}
		t.retireApplier(a)
	}()
	t.setStage(StageRunning, nil)
	// The reader waits while the source is idle; an applier that fails
	// meanwhile must still stop the loop, or the task would look running
	// with its last transactions unapplied.
	rctx, stopRead := context.WithCancel(ctx)
	var watch sync.WaitGroup
	watch.Add(1)
	go func() {
		defer watch.Done()
		select {
		case <-rctx.Done():
		case <-a.Done():
			stopRead()
		}
	}()
	defer watch.Wait()
	defer stopRead()
	defer t.clocks.decode.End(t.clocks.decode.Begin())
	t.mu.Lock()
	own := ownWrites{id: t.own}
	t.mu.Unlock()
	for {
		ev, p, err := r.Next(rctx)
		if err != nil {
			if aerr := a.Err(); aerr != nil && ctx.Err() == nil {
				return aerr
			}
			return err
		}
		t.events.Add(1)
		t.setRead(p)
		if !own.keep(ev) {
			continue
		}
		items, err := dec.Feed(ev, p)
		if err != nil {
			// Pause: everything before the failing event is applied.
			if ferr := a.Flush(ctx); ferr != nil {
				return ferr
			}
			return err
		}
		for i := range items {
			it := items[i]
			if sf != nil {
				keep, err := sf.Item(&it, p)
				if err != nil {
					if ferr := a.Flush(ctx); ferr != nil {
						return ferr
					}
					return err
				}
				if !keep {
					continue
				}
			}
			if it.Kind.EndsTxn() {
				t.addPending(it.End, it.Timestamp)
			}
			if err := a.Submit(ctx, it); err != nil {
				return err
			}
		}
	}
}

// retryable: failures of the target connection or server, which a restart
// from the checkpoint fixes. Anything else (a DDL the decoder refuses, a
// duplicate key that means the target was changed by hand) stops the task.
func retryable(err error) bool {
	if err == nil {
		return false
	}
	if dbconn.IsRetryable(err) || errors.Is(err, sluice.ErrUnreachable) || errors.Is(err, mysql.ErrInvalidConn) || targetReadOnly(err) {
		return true
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1927 || me.Number == 1053 || me.Number == 2013 || me.Number == 2006
	}
	msg := err.Error()
	for _, s := range []string{"bad connection", "invalid connection", "connection refused", "broken pipe", "connection reset", "i/o timeout", "EOF"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

func (t *Task) setStage(stage string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stage = stage
	t.lastErr = ""
	if err != nil {
		t.lastErr = oneLine(err)
		if t.met != nil {
			t.met.countError(err)
		}
	}
}

func (t *Task) setApplier(a *apply.Applier, pos sluice.Position) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.applier = a
	t.pending = t.pending[:0]
	t.read = pos
	if t.base.Applied.File == "" {
		t.base.Applied = pos
	}
}

// retireApplier folds a closed applier's counters into the totals.
func (t *Task) retireApplier(a *apply.Applier) {
	s := a.Stats()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.applier == a {
		t.applier = nil
	}
	t.base.Txns += s.Txns
	t.base.Rows += s.Rows
	t.base.DDL += s.DDL
	t.base.MissingRows += s.MissingRows
	if s.Applied.File != "" {
		t.base.Applied = s.Applied
	}
}

func (t *Task) setRead(p sluice.Position) {
	t.mu.Lock()
	t.read = p
	t.mu.Unlock()
}

func (t *Task) addPending(end sluice.Position, ts uint32) {
	t.mu.Lock()
	t.pending = append(t.pending, pendingTxn{end: end, ts: ts})
	t.mu.Unlock()
}

// before reports whether a is strictly before b in the binlog.
func before(a, b sluice.Position) bool { return a.Compare(b) < 0 }

// Status returns a snapshot of the task.
func (t *Task) Status() Status {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	s := Status{Task: t.cfg.Name, Stage: t.stage, PID: os.Getpid(), Updated: now.UTC(), Started: t.started.UTC(),
		Error: t.lastErr, MetricsAddr: t.metAddr, Restarts: int(t.restarts.Load()), Events: t.events.Load()}
	s.Applied, s.Txns, s.Rows, s.DDL = t.base.Applied, t.base.Txns, t.base.Rows, t.base.DDL
	s.MissingRows = t.base.MissingRows
	if t.applier != nil {
		as := t.applier.Stats()
		if as.Applied.File != "" {
			s.Applied = as.Applied
		}
		s.Txns += as.Txns
		s.Rows += as.Rows
		s.DDL += as.DDL
		s.MissingRows += as.MissingRows
		s.Apply = &ApplyStatus{Commits: as.Commits, Compacted: as.Compacted, Conflicts: as.Conflicts, Chained: as.Chained, Grown: as.Grown, InFlight: as.InFlight,
			MaxInFlight: as.MaxInFlight, GroupLimit: as.GroupLimit, LockYields: as.LockYields, Stages: t.clocks.stageTimes()}
	}
	if t.rlog != nil {
		if t.handles != nil {
			s.Skipped, s.Replaced = t.handles.used()
		}
	}
	t.relaySourceLocked(now, &s)
	if lag, ok := t.pausedLagLocked(now); ok {
		s.LagSeconds = lag
	}
	if t.srv != nil {
		s.Serve = &ServeStatus{Addr: t.srvAddr, Replicas: t.srv.Stats()}
	}
	if !t.prevAt.IsZero() {
		if d := now.Sub(t.prevAt).Seconds(); d > 0.2 {
			s.EventsPerSec = float64(s.Events-t.prevEvts) / d
			s.TxnsPerSec = float64(s.Txns-t.prevTxns) / d
		}
	}
	return s
}

// relaySourceLocked fills in what a task with a target and a Kafka sink
// task have alike: the relay log and its disk, the source's position and
// reconnections, and the lag of s.Applied. t.mu is held.
func (t *Task) relaySourceLocked(now time.Time, s *Status) {
	if t.rlog != nil {
		s.Relay = t.rlog.End()
		files := t.rlog.Files()
		s.RelayFiles = len(files)
		for _, f := range files {
			if st, err := os.Stat(filepath.Join(t.rlog.Dir(), f)); err == nil {
				// Disk used, not the apparent size: the head of a relay
				// that started mid-file is a hole (relay/head.go).
				if sys, ok := st.Sys().(*syscall.Stat_t); ok {
					s.RelayBytes += min(st.Size(), sys.Blocks*512)
				} else {
					s.RelayBytes += st.Size()
				}
			}
		}
		var fs syscall.Statfs_t
		if syscall.Statfs(t.rlog.Dir(), &fs) == nil {
			s.DiskFree, s.DiskSize = fs.Bavail*uint64(fs.Bsize), fs.Blocks*uint64(fs.Bsize)
		}
	}
	var lastTS uint32
	if t.writer != nil {
		s.Source, _, lastTS, _ = t.writer.SourceStatus()
	}
	if t.breader != nil {
		s.Reconnects, _ = t.breader.Reconnects()
	}
	if s.Source.File == "" || before(s.Source, s.Relay) {
		s.Source = s.Relay
	}
	// Lag: the oldest submitted transaction not yet applied; with none, the
	// source is either caught up (heartbeats say where it is) or ahead of
	// what was read. Caught up is judged by what was read, not by the
	// checkpoint: after a rotate on an idle source the checkpoint stays in
	// the old file while the source moves on without a transaction.
	i := 0
	for i < len(t.pending) && !before(s.Applied, t.pending[i].end) {
		i++
	}
	t.pending = t.pending[i:]
	switch {
	case len(t.pending) > 0:
		s.LagSeconds = lagSince(now, t.pending[0].ts)
	case before(t.read, s.Source) && before(s.Applied, s.Source) && lastTS != 0:
		s.LagSeconds = lagSince(now, lastTS)
	}
}

// statusLoop refreshes status.json, the metrics and the relay's applied
// position (which lets it purge).
func (t *Task) statusLoop(ctx context.Context, m *metrics) {
	tick := time.NewTicker(t.cfg.StatusEvery)
	defer tick.Stop()
	for {
		s := t.Status()
		t.mu.Lock()
		// Rates over the last interval.
		t.prevAt, t.prevEvts, t.prevTxns = time.Now(), s.Events, s.Txns
		rl := t.rlog
		t.mu.Unlock()
		if rl != nil && s.Applied.File != "" {
			rl.SetApplied(s.Applied)
		}
		m.update(s)
		_ = WriteStatus(t.cfg.Dir, s)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// serving records the binlog service the task runs (nil when it stops)
// and adds its metrics to the task's.
func (t *Task) serving(srv *serve.Server, addr string, m *metrics) {
	if srv != nil && m != nil {
		// The service's collectors carry no task label of their own; a
		// clash cannot happen after newMetrics registered the task's.
		if err := m.registerWith(prometheus.WrapRegistererWith(prometheus.Labels{"task": t.cfg.Name}, m.reg), srv.Collectors()...); err != nil {
			t.logf("binlog service metrics: %v", err)
		}
	}
	t.mu.Lock()
	t.srv, t.srvAddr = srv, addr
	t.mu.Unlock()
}

func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// Pause stops reading and applying until Resume, keeping the process (and
// the task lock). It reports false when the task is paused already.
func (t *Task) Pause() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.paused != nil || t.runCancel == nil {
		return false
	}
	t.paused = make(chan struct{})
	t.runCancel()
	return true
}

// Resume continues a paused task from its checkpoint. It reports false
// when the task is not paused.
func (t *Task) Resume() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.paused == nil {
		return false
	}
	close(t.paused)
	t.paused = nil
	return true
}
