package replicate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
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
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/relay"
	"github.com/sluice-db/sluice/serve"

	"github.com/prometheus/client_golang/prometheus"
)

// Task runs one replication task. Run may be called once.
type Task struct {
	cfg Config
	log *slog.Logger

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
	// rates over the last status interval (rates.go)
	rates rateClock
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

// New validates cfg. Messages (start, retries, stop) go to cfg.Log.
func New(cfg Config) (*Task, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Task{cfg: cfg, log: cfg.logger(), stage: StageStarting}, nil
}

// logf and warnf log one message; its text is what users, the difftest and
// the tests read (cmd/sluice renders it with internal/logx).
func (t *Task) logf(format string, args ...any) { t.log.Info(fmt.Sprintf(format, args...)) }

func (t *Task) warnf(format string, args ...any) { t.log.Warn(fmt.Sprintf(format, args...)) }

// Run replicates until ctx ends (a clean stop returns nil) or a fatal error.
// start is the full copy's snapshot position for --mode all; nil means the
// checkpoint, or Config.Start for a task that has none.
func (t *Task) Run(ctx context.Context, start *sluice.Position) error {
	unlock, err := t.claim()
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
	t.stopped(t.Status(), err)
	return err
}

// claim begins a Run: the start time, and the task's dir and its lock.
func (t *Task) claim() (unlock func(), err error) {
	t.mu.Lock()
	t.started = time.Now()
	t.mu.Unlock()
	return prepareDir(t.cfg.Dir, t.cfg.Name) // taskdir.go
}

// stopped writes the last status of a run that ended with err.
func (t *Task) stopped(st Status, err error) {
	st.Stage = StageStopped
	if err != nil {
		st.Stage, st.Error = StageFailed, oneLine(err)
	}
	_ = WriteStatus(t.cfg.Dir, st)
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
	return t.seedStart(ctx, start, info, bcfg, "", "set incremental.gtid-set or incremental.binlog-file/binlog-pos in the task file, or run sluice migrate --mode all",
		func(want sluice.Position) error {
			state, err := seedSchema(ctx, t.cfg, db)
			if err != nil {
				return err
			}
			if err := a.Seed(ctx, want, state); err != nil {
				return dbconn.Classify(err, "target", t.cfg.Target)
			}
			return nil
		})
}

// seedStart starts a task that has no checkpoint: at start (the full
// copy's position), else at Config.Start, completed and checked against
// the source; seed stores it as the consumer's first checkpoint. where
// and hint complete the error when there is neither.
func (t *Task) seedStart(ctx context.Context, start *sluice.Position, info *binlog.Info, bcfg binlog.Config, where, hint string, seed func(sluice.Position) error) (sluice.Position, error) {
	want := t.cfg.Start
	if start != nil {
		want = *start
	}
	if want.File == "" && want.GTIDSet == "" {
		return want, &sluice.Error{Op: "start replication", Err: fmt.Errorf("%w: task %s has no checkpoint%s and no start position", sluice.ErrConfig, t.cfg.Name, where), Hint: hint}
	}
	want, err := resolveStart(ctx, want, info, bcfg, t.cfg.Source)
	if err != nil {
		return want, err
	}
	if err := seed(want); err != nil {
		return want, err
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
	t.rates.fill(&s)
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
