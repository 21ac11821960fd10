package replicate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/binlog"
	"github.com/sluice-db/sluice/internal/dbconn"
	"github.com/sluice-db/sluice/relay"
	"github.com/sluice-db/sluice/schema"
	"github.com/sluice-db/sluice/sink/kafka"
	"github.com/sluice-db/sluice/task"
)

// SinkTask replicates a source into the Kafka sink instead of a target
// database: the binlog reader feeds the relay as for any task, and a relay
// reader feeds the decoder and the sink. The checkpoint lives in Kafka,
// committed in the same Kafka transaction as the events.
type SinkTask struct {
	t    *Task // the relay half (fetch) and the task's settings
	kcfg kafka.Config
	// Snapshot makes a task without a checkpoint start with the initial
	// snapshot (migrate --mode all) instead of a start position.
	Snapshot bool

	mu   sync.Mutex
	sink *kafka.Sink
	base kafka.Stats
	met  *metrics // nil until run registers them; counts errors (countError)
	// Since when the sink waits on Kafka (zero: it does not), and when
	// that was last said in the log. A wait spans restarts of the sink:
	// one that cannot reach the brokers at its start waits as well.
	waitMu              sync.Mutex
	waitSince, waitSaid time.Time
}

// Waits on Kafka shorter than kafkaWaitReport are normal (a leader
// election, a slow fsync) and go unmentioned; a longer one is logged, and
// again every kafkaWaitRepeat while it lasts.
const (
	kafkaWaitReport = 5 * time.Second
	kafkaWaitRepeat = 30 * time.Second
)

// SinkFromTask maps a task file with sink: {kafka: ...} to the two configs.
func SinkFromTask(tc *task.Config) (Config, kafka.Config, error) {
	rc, err := FromTask(tc)
	if err != nil {
		return rc, kafka.Config{}, err
	}
	ks := tc.Sink.Kafka
	if ks == nil {
		return rc, kafka.Config{}, &sluice.Error{Op: "task file", Err: fmt.Errorf("%w: no sink.kafka", sluice.ErrConfig), Hint: "add sink: {kafka: {brokers: [host:port], topic-prefix: P}}"}
	}
	kc := kafka.DefaultConfig(tc.Name)
	kc.Brokers, kc.TopicPrefix = ks.Brokers, ks.TopicPrefix
	if ks.Format != "" {
		kc.Format = ks.Format
	}
	kc.Schema = ks.Schema
	if ks.DecimalHandling != "" {
		kc.DecimalHandling = ks.DecimalHandling
	}
	if ks.CreateTopics != nil {
		kc.CreateTopics = *ks.CreateTopics
	}
	kc.Compression = ks.Compression
	if ks.Partitions > 0 {
		kc.Partitions = ks.Partitions
	}
	if a := ks.SASL; a != nil {
		kc.SASL = &kafka.SASL{Mechanism: a.Mechanism, User: a.User, Password: kafka.Secret(a.Password)}
		if kc.SASL.Mechanism == "" {
			kc.SASL.Mechanism = kafka.SASLPlain
		}
	}
	if t := ks.TLS; t != nil && t.Mode != "disabled" {
		tt := *t
		if tt.Mode == "" {
			tt.Mode = "verify-identity"
		}
		// No host: franz-go names each broker it dials (ServerName).
		cfg, _, err := dbconn.TLSConfig(sluice.Endpoint{TLS: tt}, "sink.kafka")
		if err != nil {
			return rc, kc, err
		}
		kc.TLS = cfg
	}
	return rc, kc, kc.Validate()
}

// NewSinkTask validates the configs. Messages go to cfg.Log.
func NewSinkTask(cfg Config, kcfg kafka.Config) (*SinkTask, error) {
	t, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if err := kcfg.Validate(); err != nil {
		return nil, err
	}
	return &SinkTask{t: t, kcfg: kcfg}, nil
}

// Run replicates until ctx ends (a clean stop returns nil) or a fatal
// error. start is the snapshot position for a task without a checkpoint
// (nil: Config.Start).
func (s *SinkTask) Run(ctx context.Context, start *sluice.Position) error {
	unlock, err := s.t.claim()
	if err != nil {
		return err
	}
	defer unlock()
	err = s.run(ctx, start)
	s.t.stopped(s.Status(), err)
	return err
}

func (s *SinkTask) run(ctx context.Context, start *sluice.Position) error {
	t := s.t
	// The metrics come first: a snapshot (migrate --mode all) shows its
	// stage while it runs.
	m, _, err := s.startMetrics() // the start line says where (t.metOn)
	if err != nil {
		return err
	}
	defer func() {
		s.mu.Lock()
		s.met = nil
		s.mu.Unlock()
		m.close()
	}()
	return t.pipeline(ctx, s, start, m)
}

func (s *SinkTask) begin(ctx context.Context, start *sluice.Position, info *binlog.Info, bcfg binlog.Config) (sluice.Position, func(), error) {
	pos, err := s.startPosition(ctx, start, info, bcfg)
	return pos, nil, err
}

func (s *SinkTask) dest() string {
	return fmt.Sprintf("kafka sink %v topic prefix %s", s.kcfg.Brokers, s.kcfg.TopicPrefix)
}

func (s *SinkTask) beside(*relay.Log, *metrics) (func(), error) { return nil, nil }

// startPosition opens the sink once to read the checkpoint from Kafka, and
// seeds it for a new task: the start position and the source's schema.
func (s *SinkTask) startPosition(ctx context.Context, start *sluice.Position, info *binlog.Info, bcfg binlog.Config) (sluice.Position, error) {
	t := s.t
	kc := s.kcfg
	if s.Snapshot {
		kc.TxnTimeout = kc.SnapshotTimeout
	}
	sk, err := kafka.New(kc)
	if err != nil {
		return sluice.Position{}, err
	}
	defer sk.Close()
	cp, ok, err := sk.Open(ctx)
	if err != nil {
		return cp.Pos, err
	}
	if ok {
		cp.Pos.Flavor = info.Flavor
		return cp.Pos, nil
	}
	if s.Snapshot {
		return s.snapshotInto(ctx, sk, info.Flavor)
	}
	return t.seedStart(ctx, start, info, bcfg, " in Kafka", "set incremental.gtid-set or incremental.binlog-file/binlog-pos in the task file",
		func(want sluice.Position) error {
			state, err := seedFromSource(ctx, t.cfg)
			if err != nil {
				return err
			}
			return sk.Seed(ctx, want, state)
		})
}

// seedFromSource is the schema tracker state of a new sink task: the
// selected source tables as they are now. A sink task has no target whose
// tables show the schema at the start position, so a table altered between
// the start position and now is decoded with its newer definition until
// the binlog's own DDL catches up (column names come from the events'
// full row metadata either way).
func seedFromSource(ctx context.Context, cfg Config) ([]byte, error) {
	src, err := dbconn.Open(ctx, "source", cfg.Source, dbconn.Options{MaxOpen: 1})
	if err != nil {
		return nil, err
	}
	defer src.Close()
	refs, err := schema.ListTables(ctx, src, cfg.Decode.Selected)
	if err != nil {
		return nil, dbconn.Classify(err, "source", cfg.Source)
	}
	tracker := schema.NewTracker()
	for _, ref := range refs {
		tb, err := schema.Inspect(ctx, src, ref)
		if errors.Is(err, sluice.ErrUnknownTable) {
			continue
		}
		if err != nil {
			return nil, dbconn.Classify(err, "source", cfg.Source)
		}
		tb.Ref = ref
		tracker.Put(tb)
	}
	return tracker.Snapshot()
}

// restarting: the sink runs again from its checkpoint after a failure
// Kafka or the network may heal (a broker restart, a lost connection).
// Errors the user must fix stop the task (fatal).
func (s *SinkTask) restarting(err error, wait time.Duration) {
	s.countError(err)
	if kafka.Unreachable(err) {
		// The brokers are down or unreachable: the same wait as one
		// inside a running sink, said the same way (and not once per
		// restart).
		s.waiting(time.Now(), time.Time{}, err)
		return
	}
	s.t.setStage(StageRetrying, err)
	s.t.warnf("kafka sink stopped (%v); restarting from the checkpoint in Kafka in %s", oneLine(err), wait)
}

func (s *SinkTask) fatal(err error) bool { return fatalSinkErr(err) }

// report is the status loop's status: it says first whether the sink
// waits on Kafka.
func (s *SinkTask) report() Status {
	s.checkWaiting()
	return s.Status()
}

// fatalSinkErr: errors a retry cannot fix.
func fatalSinkErr(err error) bool {
	return errors.Is(err, kafka.ErrUnknownTopic) || errors.Is(err, kafka.ErrNotAuthorized) || errors.Is(err, kafka.ErrNotAuthenticated) || errors.Is(err, kafka.ErrFenced) ||
		errors.Is(err, sluice.ErrConfig) || errors.Is(err, sluice.ErrUnsupportedDDL) || errors.Is(err, sluice.ErrSchemaMismatch) ||
		errors.Is(err, sluice.ErrBinlogFormat)
}

// open readies a sink at its checkpoint in Kafka.
func (s *SinkTask) open(ctx context.Context, rlog *relay.Log) (_ *session, err error) {
	t := s.t
	sk, err := kafka.New(s.kcfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			sk.Close()
			s.retire(sk)
		}
	}()
	cp, ok, err := sk.Open(ctx)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errors.New("replicate: the checkpoint disappeared from the Kafka offsets topic " + s.kcfg.OffsetsTopic())
	}
	pos := cp.Pos
	pos.Flavor = t.cfg.Decode.Flavor
	t.mu.Lock()
	t.pending = t.pending[:0] // what this sink writes, from its checkpoint
	t.mu.Unlock()
	dec, r, err := openDecoder(ctx, rlog, t.cfg.Decode, pos, cp.SchemaState)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.sink = sk
	s.mu.Unlock()
	t.setRead(pos)
	return &session{c: sk, dec: dec, r: r, retire: func() { s.retire(sk) }}, nil
}

func (s *SinkTask) retire(sk *kafka.Sink) {
	st := sk.Stats()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sink == sk {
		s.sink = nil
	}
	if st.Committed.File != "" {
		s.base.Committed = st.Committed
	}
	s.base.Txns = max(s.base.Txns, st.Txns)
	s.base.Events += st.Events
	s.base.DDL += st.DDL
	s.base.KafkaTxns += st.KafkaTxns
}

// Status is a snapshot of the task; Applied is the position committed to
// Kafka, Txns the source transactions committed since the task began.
func (s *SinkTask) Status() Status {
	t := s.t
	now := time.Now()
	s.mu.Lock()
	st := Status{Task: t.cfg.Name, PID: os.Getpid(), Updated: now.UTC(),
		Restarts: int(t.restarts.Load()), Events: t.events.Load(), Applied: s.base.Committed, Txns: s.base.Txns, Rows: s.base.Events, DDL: s.base.DDL,
		KafkaTxns: s.base.KafkaTxns}
	if s.sink != nil {
		k := s.sink.Stats()
		if k.Committed.File != "" {
			st.Applied = k.Committed
		}
		st.Txns = max(st.Txns, k.Txns)
		st.Rows += k.Events
		st.DDL += k.DDL
		st.KafkaTxns += k.KafkaTxns
	}
	s.mu.Unlock()
	t.mu.Lock()
	st.Stage, st.Error = t.stage, t.lastErr
	st.Started, st.MetricsAddr = t.started.UTC(), t.metAddr
	t.relaySourceLocked(now, &st)
	t.mu.Unlock()
	t.rates.fill(&st)
	return st
}

// checkWaiting tells, in the log and the status, that the sink has been
// waiting on Kafka (a broker down, unreachable): the task does not fail
// for it, franz-go retries, and the user should know why nothing moves.
func (s *SinkTask) checkWaiting() {
	s.mu.Lock()
	sk := s.sink
	s.mu.Unlock()
	if sk == nil {
		return // between two runs of the sink: the retry loop reports
	}
	since, cause := sk.Waiting()
	now := time.Now()
	s.waitMu.Lock()
	ongoing := !s.waitSince.IsZero()
	s.waitMu.Unlock()
	if !since.IsZero() {
		// A short wait is normal, unless it continues one already said
		// (the sink restarted while the brokers were away).
		if ongoing || now.Sub(since) >= kafkaWaitReport {
			s.waiting(now, since, cause)
		}
		return
	}
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	if !s.waitSince.IsZero() {
		s.t.logf("kafka sink: brokers %v answer again after %s", s.kcfg.Brokers, now.Sub(s.waitSince).Round(time.Second))
		s.waitSince = time.Time{}
		s.t.setStage(StageRunning, nil)
	}
}

// waiting records a wait on Kafka that began at since (zero: now, or
// when the current wait began), logs it now and then, and puts it in the
// status.
func (s *SinkTask) waiting(now, since time.Time, cause error) {
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	first := s.waitSince.IsZero()
	switch {
	case first && since.IsZero():
		s.waitSince = now
	case first || (!since.IsZero() && since.Before(s.waitSince)):
		s.waitSince = since
	}
	err := fmt.Errorf("kafka sink: no answer from brokers %v for %s (%v); still retrying, nothing is lost",
		s.kcfg.Brokers, now.Sub(s.waitSince).Round(time.Second), oneLine(cause))
	if first || now.Sub(s.waitSaid) >= kafkaWaitRepeat {
		s.t.warnf("%v", err)
		s.waitSaid = now
	}
	s.t.setStage(StageRetrying, err)
}
