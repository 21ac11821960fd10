package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-db/sluice"
)

// Checkpoint is what the offsets topic holds for a task: the source
// position after the last committed transaction, and the schema tracker
// state to decode from it.
type Checkpoint struct {
	Pos         sluice.Position
	SchemaState []byte
}

// offsetsRecord is the value of the "<task>" key in the offsets topic.
type offsetsRecord struct {
	Task     string          `json:"task"`
	Position sluice.Position `json:"position"`
	Txns     uint64          `json:"txns"`
	Updated  time.Time       `json:"updated"`
}

// schemaRecord is the value of the "<task>.schema" key: written only when
// the schema changes, as it may be large.
type schemaRecord struct {
	Position sluice.Position `json:"position"`
	State    []byte          `json:"state"`
}

// Stats are the sink's counters.
type Stats struct {
	Committed sluice.Position // the position of the last committed Kafka transaction
	Txns      uint64          // source transactions committed
	Events    uint64          // change events committed
	DDL       uint64
	KafkaTxns uint64
}

// Sink writes the stream to Kafka. Submit is called from one goroutine; a
// background committer ends Kafka transactions between source
// transactions. A commit runs in its own goroutine while Submit goes on
// encoding the next transactions into a staged buffer (commit.go). After
// any error the Sink is done: Close it and Open a new one, which resumes
// from the last committed position.
type Sink struct {
	cfg Config
	cl  *kgo.Client
	enc *encoder

	mu       sync.Mutex
	topics   map[string]bool
	inKafka  bool      // a Kafka transaction is open (begun in the client, or staged while a commit is in flight)
	inClient bool      // the client has a transaction open (BeginTransaction called, not ended)
	inSource bool      // between a source Begin and its Commit
	began    time.Time // when the open Kafka transaction began
	behind   bool      // the last source transaction is old: a backlog (commit.go's batchLimits)
	meta     txnMeta
	row      int
	last     sluice.Position // end of the last source transaction written
	batch    Stats           // counts of the open Kafka transaction
	state    []byte          // schema state to write with the next commit
	// The commit in flight (nil: none) and the records of the next Kafka
	// transaction built meanwhile, not yet produced (commit.go).
	flight      *flight
	staged      []*kgo.Record
	stagedBytes int
	// stats is written under mu and statsMu, read under either: Stats
	// must answer while a write holds mu waiting for a broker that is down.
	statsMu  sync.Mutex
	stats    Stats
	errMu    sync.Mutex
	firstErr error           // of a produced record (errMu: promises run on the client's goroutines)
	refused  map[string]bool // topics whose records failed with TOPIC_AUTHORIZATION_FAILED (errMu)
	w        watch           // the brokers' answers, for Waiting

	done    chan struct{}
	err     error
	errOnce sync.Once
	stop    chan struct{}
	kick    chan struct{} // a flight is done: the committer lands it
	// stopCtx ends with Close, so that a commit of the committer waiting
	// for a broker that is gone does not hold Close (and a shutdown) up.
	stopCtx    context.Context
	stopCancel context.CancelFunc
	wg         sync.WaitGroup
}

// New validates cfg.
func New(cfg Config) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Sink{cfg: cfg, enc: newEncoder(cfg), topics: map[string]bool{}, done: make(chan struct{}), stop: make(chan struct{}), kick: make(chan struct{}, 1)}
	s.stopCtx, s.stopCancel = context.WithCancel(context.Background())
	return s, nil
}

// Open connects, takes the task's transactional id over (fencing any older
// producer of the task and aborting its open transaction), and reads the
// last committed checkpoint (ok false: the task has none yet).
func (s *Sink) Open(ctx context.Context) (cp Checkpoint, ok bool, err error) {
	// The coordinator answers CONCURRENT_TRANSACTIONS while it still
	// completes the previous producer's commit or abort (it aborts a
	// killed producer's open transaction on this very call); franz-go
	// retries for a while, and a new client retries longer.
	for attempt, wait := 0, 200*time.Millisecond; ; attempt++ {
		if s.cl, err = s.newClient(); err != nil {
			return cp, false, s.brokerErr("connect", err)
		}
		_, _, err = s.cl.ProducerID(ctx)
		if err == nil {
			break
		}
		s.cl.Close()
		s.cl = nil
		if !errors.Is(err, kerr.ConcurrentTransactions) || attempt > 30 || ctx.Err() != nil {
			return cp, false, s.brokerErr("init the transactional producer "+s.cfg.TransactionalID(), err)
		}
		select {
		case <-ctx.Done():
			return cp, false, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
	if err := s.ensureTopic(ctx, s.cfg.OffsetsTopic(), 1, map[string]string{"cleanup.policy": "compact", "segment.bytes": "1048576"}); err != nil {
		return cp, false, err
	}
	cp, ok, err = s.readCheckpoint(ctx)
	if err != nil {
		return cp, false, err
	}
	s.last = cp.Pos
	s.statsMu.Lock()
	s.stats.Committed = cp.Pos
	s.statsMu.Unlock()
	s.wg.Add(1)
	go s.committer()
	return cp, ok, nil
}

func (s *Sink) newClient() (*kgo.Client, error) {
	return kgo.NewClient(append(s.connOpts(),
		kgo.TransactionalID(s.cfg.TransactionalID()),
		kgo.TransactionTimeout(s.cfg.TxnTimeout),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20),
		kgo.MaxBufferedRecords(20000),
		kgo.UnknownTopicRetries(2),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)), // Kafka's murmur2 on the key, as Java producers hash
		kgo.ProducerBatchCompression(s.compression()),
		kgo.WithHooks(&s.w),
	)...)
}

// compression is the codec of the record batches. franz-go would
// compress with snappy unless told; Kafka's own producer sends them as
// they are unless told, and the broker then need not decompress a batch
// to validate it.
func (s *Sink) compression() kgo.CompressionCodec {
	switch s.cfg.Compression {
	case "snappy":
		return kgo.SnappyCompression()
	case "lz4":
		return kgo.Lz4Compression()
	case "zstd":
		return kgo.ZstdCompression()
	case "gzip":
		return kgo.GzipCompression()
	}
	return kgo.NoCompression()
}

// readCheckpoint reads the offsets topic up to its last stable offset
// with read_committed and keeps the task's newest records. Control
// records are kept so that the end is recognised even when the topic ends
// with a commit marker.
func (s *Sink) readCheckpoint(ctx context.Context) (Checkpoint, bool, error) {
	var cp Checkpoint
	topic := s.cfg.OffsetsTopic()
	lreq := kmsg.NewPtrListOffsetsRequest()
	lreq.IsolationLevel = 1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition, lp.Timestamp = 0, -1
	lt.Partitions = append(lt.Partitions, lp)
	lreq.Topics = append(lreq.Topics, lt)
	var end int64 = -1
	for attempt := 0; ; attempt++ {
		lresp, perr := lreq.RequestWith(ctx, s.cl)
		if perr == nil {
			// A response without the partition must not read as an
			// empty topic: that would start the task over.
			perr = errors.New("the broker did not answer for partition 0")
			for _, t := range lresp.Topics {
				for _, p := range t.Partitions {
					if p.Partition == 0 {
						end, perr = p.Offset, errorForCode(p.ErrorCode)
					}
				}
			}
		}
		if perr == nil {
			break
		}
		// A topic just created is not known to every part of the broker
		// at once (UNKNOWN_TOPIC_OR_PARTITION, no leader yet): ask again.
		if attempt > 50 || ctx.Err() != nil {
			return cp, false, s.brokerErr("read the end of "+topic, perr)
		}
		select {
		case <-ctx.Done():
			return cp, false, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	if end <= 0 {
		return cp, false, nil
	}
	rd, err := kgo.NewClient(append(s.connOpts(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return cp, false, s.brokerErr("read "+topic, err)
	}
	defer rd.Close()
	var found bool
	key := s.cfg.Task
	for {
		fs := rd.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return cp, false, err
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return cp, false, s.brokerErr("read "+topic, ferr)
		}
		reached := false
		var bad error
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset+1 >= end {
				reached = true
			}
			if r.Attrs.IsControl() {
				return
			}
			switch string(r.Key) {
			case key:
				var o offsetsRecord
				if err := json.Unmarshal(r.Value, &o); err != nil {
					bad = fmt.Errorf("kafka sink: corrupt offsets record at %s offset %d: %w", topic, r.Offset, err)
					return
				}
				cp.Pos, found = o.Position, true
				s.statsMu.Lock()
				s.stats.Txns = o.Txns
				s.statsMu.Unlock()
			case key + ".schema":
				var sr schemaRecord
				if err := json.Unmarshal(r.Value, &sr); err != nil {
					bad = fmt.Errorf("kafka sink: corrupt schema record at %s offset %d: %w", topic, r.Offset, err)
					return
				}
				cp.SchemaState = sr.State
			}
		})
		if bad != nil {
			return cp, false, bad
		}
		if reached {
			return cp, found, nil
		}
	}
}

func errorForCode(code int16) error {
	if code == 0 {
		return nil
	}
	return kerr.ErrorForCode(code)
}

// Seed writes a new task's first checkpoint (its start position and
// schema) in a transaction of its own.
func (s *Sink) Seed(ctx context.Context, pos sluice.Position, state []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.beginLocked(); err != nil {
		return err
	}
	s.last, s.state = pos, state
	return s.commitLocked(ctx)
}

// beginLocked opens the next Kafka transaction. While a commit is in
// flight the client cannot begin one: the transaction is opened in the
// client when the commit lands (landLocked), and its records wait staged.
func (s *Sink) beginLocked() error {
	if s.inKafka {
		return nil
	}
	if s.flight == nil {
		if err := s.cl.BeginTransaction(); err != nil {
			return s.brokerErr("begin a transaction", err)
		}
		s.inClient = true
	}
	s.inKafka, s.began, s.batch = true, time.Now(), Stats{}
	return nil
}

// Submit hands one stream item to the sink. Items come in source order.
func (s *Sink) Submit(ctx context.Context, it sluice.StreamItem) error {
	if err := s.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.Err(); err != nil {
		return err // the committer failed while this Submit waited for mu
	}
	err := s.pollLocked(ctx)
	if err == nil {
		err = s.write(ctx, &it)
	}
	if err != nil {
		s.fail(err)
		return err
	}
	return nil
}

func (s *Sink) write(ctx context.Context, it *sluice.StreamItem) error {
	switch it.Kind {
	case sluice.ItemXAPrepare, sluice.ItemXACommit, sluice.ItemXARollback, sluice.ItemRollback:
		// ItemRollback: the rows already produced would have to be taken
		// back.
		return xaRefused(it)
	case sluice.ItemBegin:
		if it.XID != "" {
			// Publishing a prepared transaction's rows before its XA
			// COMMIT would publish rows that may be rolled back.
			return xaRefused(it)
		}
		if err := s.beginLocked(); err != nil {
			return err
		}
		s.inSource, s.row = true, 0
		s.meta = txnMeta{gtid: it.GTID, ts: it.Timestamp, start: s.last, server: gtidServer(it.GTID)}
	case sluice.ItemRows:
		if !s.inSource {
			return errors.New("kafka sink: rows outside a transaction")
		}
		now := time.Now()
		for i := range it.Changes {
			if err := s.produceChange(ctx, &it.Changes[i], now); err != nil {
				return err
			}
		}
	case sluice.ItemCommit:
		s.inSource = false
		s.last = it.End
		s.batch.Txns++
		ts := it.Timestamp
		if ts == 0 {
			ts = s.meta.ts
		}
		s.behind = catchingUp(ts, time.Now())
		if _, maxTxns := s.batchLimits(); s.batch.Txns >= maxTxns {
			return s.startCommitLocked(ctx)
		}
	case sluice.ItemDDL:
		if err := s.beginLocked(); err != nil {
			return err
		}
		s.meta = txnMeta{gtid: it.GTID, ts: it.Timestamp, start: s.last, server: gtidServer(it.GTID)}
		if err := s.produceDDL(ctx, it); err != nil {
			return err
		}
		s.last = it.End
		if it.SchemaState != nil {
			s.state = it.SchemaState
		}
		s.batch.Txns++
		s.batch.DDL++
		// A DDL commits at once: the schema state written with it must
		// never run ahead of the rows before it, nor behind those after.
		// (The rows after it wait staged for the next transaction.)
		return s.startCommitLocked(ctx)
	case sluice.ItemSavepoint:
		// The rows are produced as they come: a ROLLBACK TO (or a
		// ROLLBACK that ends a group) cannot take back the ones sent.
		// SAVEPOINT and RELEASE change nothing.
		if it.Savepoint.Op == sluice.SavepointRollback {
			return &sluice.Error{Op: "kafka sink: transaction " + it.GTID,
				Err:  fmt.Errorf("%w: %s undoes rows of the transaction, which the sink has produced", sluice.ErrUnsupportedEvent, it.Savepoint.SQL()),
				Hint: "produce this transaction's net changes by hand if consumers need them, then run sluice skip --config TASK --gtid " + it.GTID}
		}
	default:
		return fmt.Errorf("kafka sink: stream item of unknown kind %s (%d)", it.Kind, it.Kind)
	}
	return nil
}

func (s *Sink) produceChange(ctx context.Context, ch *sluice.RowChange, now time.Time) error {
	p := s.enc.plan(ch.Table)
	if err := s.ensureTopic(ctx, p.topic, s.cfg.Partitions, nil); err != nil {
		return err
	}
	keyRow := ch.After
	if ch.Kind == sluice.Delete {
		keyRow = ch.Before
	}
	var value []byte
	switch s.cfg.Format {
	case FormatCanalJSON:
		value = p.encoded(s.enc.canalValue(p.valueBuf(), ch, &s.meta, now))
	default:
		op := byte('c')
		switch ch.Kind {
		case sluice.Update:
			op = 'u'
		case sluice.Delete:
			op = 'd'
		}
		value = p.encoded(s.enc.debeziumValue(p.valueBuf(), ch, &s.meta, s.row, op, now))
	}
	if ch.Kind == sluice.Update && s.cfg.Format == FormatDebezium && s.keyChanged(ch) {
		// Debezium turns a primary key change into a delete of the old key,
		// its tombstone, and a create of the new key.
		del := *ch
		del.Kind, del.After = sluice.Delete, nil
		oldKey := s.enc.recordKey(ch.Table, ch.Before)
		s.produce(ctx, &kgo.Record{Topic: p.topic, Key: oldKey, Value: s.enc.debeziumValue(nil, &del, &s.meta, s.row, 'd', now)})
		s.produce(ctx, &kgo.Record{Topic: p.topic, Key: oldKey})
		ins := *ch
		ins.Kind, ins.Before = sluice.Insert, nil
		s.produce(ctx, &kgo.Record{Topic: p.topic, Key: s.enc.recordKey(ch.Table, ch.After), Value: s.enc.debeziumValue(nil, &ins, &s.meta, s.row, 'c', now)})
		s.row++
		s.batch.Events += 2
		return nil
	}
	key := s.enc.recordKey(ch.Table, keyRow)
	s.produce(ctx, &kgo.Record{Topic: p.topic, Key: key, Value: value})
	s.row++
	s.batch.Events++
	if ch.Kind == sluice.Delete && s.cfg.Format == FormatDebezium && key != nil {
		// tombstones.on.delete (Debezium's default): a null value lets a
		// compacted topic forget the key.
		s.produce(ctx, &kgo.Record{Topic: p.topic, Key: key})
	}
	return nil
}

// produce sends r in the open Kafka transaction, or stages it while a
// commit is in flight: a record produced then would join the transaction
// being committed.
func (s *Sink) produce(ctx context.Context, r *kgo.Record) {
	if s.flight != nil {
		s.staged = append(s.staged, r)
		s.stagedBytes += len(r.Key) + len(r.Value) + len(r.Topic) + recordOverhead
		return
	}
	s.startWork()
	s.cl.Produce(ctx, r, s.promise)
}

// keyChanged reports whether an update changes the primary key.
func (s *Sink) keyChanged(ch *sluice.RowChange) bool {
	for _, k := range ch.Table.PK {
		if k < len(ch.Before) && k < len(ch.After) && !sameKeyValue(ch.Before[k], ch.After[k]) {
			return true
		}
	}
	return false
}

// sameKeyValue compares two values of one key column as they print, with
// the decoder's usual types compared directly (fmt.Sprint cost two
// allocations per key column of every update).
func sameKeyValue(a, b any) bool {
	switch x := a.(type) {
	case int64:
		if y, ok := b.(int64); ok {
			return x == y
		}
	case uint64:
		if y, ok := b.(uint64); ok {
			return x == y
		}
	case int32:
		if y, ok := b.(int32); ok {
			return x == y
		}
	case string:
		if y, ok := b.(string); ok {
			return x == y
		}
	case []byte:
		if y, ok := b.([]byte); ok {
			return string(x) == string(y)
		}
	}
	return fmt.Sprint(a) == fmt.Sprint(b)
}

func (s *Sink) produceDDL(ctx context.Context, it *sluice.StreamItem) error {
	topic := s.cfg.TopicPrefix
	if err := s.ensureTopic(ctx, topic, 1, nil); err != nil {
		return err
	}
	db := it.Schema
	if db == "" && len(it.Tables) > 0 {
		db = it.Tables[0].Schema
	}
	key, value := s.enc.ddlRecord(it, &s.meta, db, time.Now())
	s.batch.Events++
	s.produce(ctx, &kgo.Record{Topic: topic, Key: key, Value: value})
	return nil
}

func (s *Sink) promise(r *kgo.Record, err error) {
	if err == nil {
		s.w.ack()
		return
	}
	s.errMu.Lock()
	if errors.Is(err, kerr.TopicAuthorizationFailed) {
		// franz-go fails every record of a refused AddPartitionsToTxn
		// with the refusal, the topics the sink may write too: which of
		// them is refused is asked of the broker (refusedTopic).
		if s.refused == nil {
			s.refused = map[string]bool{}
		}
		s.refused[r.Topic] = true
		err = s.authErr(r.Topic, "WRITE", err)
	}
	// A refusal names its topic and its fix: it wins over the errors of
	// the records that failed along with it (OPERATION_NOT_ATTEMPTED).
	if s.firstErr == nil || errors.Is(err, ErrNotAuthorized) && !errors.Is(s.firstErr, ErrNotAuthorized) {
		s.firstErr = err
	}
	s.errMu.Unlock()
}

func (s *Sink) produceFailed() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.firstErr
}

// produceErr names a failed write. UNKNOWN_TOPIC_OR_PARTITION here is not
// taken as a missing topic: a restarting broker answers it while it loads
// its logs. The sink restarts, and its next Open checks each topic again
// (ensureTopic), which tells a missing topic from a slow broker.
func (s *Sink) produceErr(ctx context.Context, err error) error {
	if errors.Is(err, ErrNotAuthorized) {
		s.errMu.Lock()
		refused := make([]string, 0, len(s.refused))
		for t := range s.refused {
			refused = append(refused, t)
		}
		s.errMu.Unlock()
		if len(refused) > 1 {
			if topic := s.refusedTopic(ctx, refused); topic != "" {
				return s.authErr(topic, "WRITE", kerr.TopicAuthorizationFailed)
			}
		}
	}
	return s.brokerErr("write", err)
}

func (s *Sink) fail(err error) {
	s.errOnce.Do(func() {
		s.err = err
		close(s.done)
	})
}

// Done is closed when the sink has failed; Err says why.
func (s *Sink) Done() <-chan struct{} { return s.done }

// Err is the error that stopped the sink, or nil.
func (s *Sink) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// Stats returns the counters of what was committed.
func (s *Sink) Stats() Stats {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	return s.stats
}

// Close stops the committer and closes the client. An open transaction is
// aborted (Flush first to commit it).
func (s *Sink) Close() error {
	select {
	case <-s.stop:
		return nil
	default:
		close(s.stop)
	}
	s.stopCancel() // a commit in flight ends (it fails) with stopCtx
	s.wg.Wait()
	if s.cl == nil {
		return nil
	}
	s.mu.Lock()
	s.abortLocked()
	s.mu.Unlock()
	s.cl.Close()
	return nil
}

// gtidServer is the server id in a MariaDB GTID (domain-server-seq), for
// source.server_id; 0 when it has none.
func gtidServer(g string) uint32 {
	parts := strings.Split(g, "-")
	if len(parts) != 3 {
		return 0
	}
	n, _ := strconv.ParseUint(parts[1], 10, 32)
	return uint32(n)
}

// xaRefused stops the sink at a two-phase XA transaction: its rows would
// have to be held until XA COMMIT, which the sink does not do.
func xaRefused(it *sluice.StreamItem) error {
	what := "two-phase XA transactions (XA PREPARE, then XA COMMIT) are"
	if it.Kind == sluice.ItemRollback {
		what = "transactions the source logged with ROLLBACK (an XA transaction rolled back after it changed a non-transactional table) are"
	}
	return &sluice.Error{Op: "kafka sink: replicate XA transaction " + it.XID + " (GTID " + it.GTID + ")",
		Err:  fmt.Errorf("%w: %s not supported by the Kafka sink", sluice.ErrConfig, what),
		Hint: "use XA COMMIT ... ONE PHASE or ordinary transactions on the source for the tables the sink reads, or exclude the tables; then resume after the transaction with sluice skip"}
}
