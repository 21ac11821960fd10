package kafka

import (
	"context"
	"encoding/json"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-db/sluice"
)

// Commits. Ending a Kafka transaction costs the producer's flush (every
// record of it acknowledged by the broker) and EndTransaction (the
// coordinator writes the commit and its markers): on the busy bench
// machine about 225 ms per commit of ~6,000 events, during which a sink
// that waited for it decoded and encoded nothing. So a commit runs in a
// goroutine of its own (a flight), and Submit goes on meanwhile. The
// records it builds cannot be produced yet: a franz-go client has one
// transaction at a time, and a record produced before EndTransaction
// returns would join the transaction being committed. They wait staged,
// bounded in bytes, and are produced when the commit lands, in the next
// transaction.
//
// Exactly-once is unchanged: a Kafka transaction still holds whole
// source transactions and, in the offsets topic, the position after
// them; one commit at most is in flight; a flight that fails aborts its
// transaction and fails the sink, the staged records are dropped, and the
// next Open resumes from the last committed position.

const (
	// maxStagedBytes bounds what waits staged during a commit; past it
	// Submit waits for the commit. 32 MiB holds well over one commit's time
	// of events at the bench's rate (~700 bytes an event), and keeps a
	// huge source transaction from growing the staged buffer unbounded.
	maxStagedBytes = 32 << 20
	// recordOverhead is a record's memory beyond its key, value and topic
	// (the kgo.Record struct, the slice slot), for the staged bound.
	recordOverhead = 200
)

// A Kafka transaction's commit costs about the same whatever it holds,
// so while the sink works through a backlog it commits five times less
// often: 500 ms or 10,000 source transactions by default instead of
// 100 ms or 2,000 (on bench-kafka's backlog, busy machine: median
// 1.19x the events/s of the build before, noisy; docs/benchmarks/kafka.md). A
// source transaction older than catchUpAge is taken for a backlog: its
// events are late already, and waiting 400 ms more for their commit does
// not matter; a source that is caught up keeps the short interval, and
// the short delay.
const (
	catchUpAge    = 2 * time.Second // MariaDB's timestamps have a resolution of one second
	catchUpFactor = 5
)

// catchingUp says whether a source transaction of time ts (unix seconds)
// is part of a backlog at now.
func catchingUp(ts uint32, now time.Time) bool {
	return ts != 0 && now.Sub(time.Unix(int64(ts), 0)) > catchUpAge
}

// batchLimits bounds the open Kafka transaction: it is committed this
// long after it began, or after this many source transactions.
func (s *Sink) batchLimits() (time.Duration, uint64) {
	interval, txns := s.cfg.CommitInterval, uint64(s.cfg.MaxBatchTxns)
	if s.behind {
		return catchUpFactor * interval, catchUpFactor * txns
	}
	return interval, txns
}

// flight is a commit in progress.
type flight struct {
	done chan struct{}
	// Set before done is closed.
	err   error
	write bool // err is a record's write failure (not EndTransaction's)
	// What the commit makes durable, for the stats when it lands.
	last  sluice.Position
	batch Stats
}

// startCommitLocked writes the position and starts ending the open Kafka
// transaction; landLocked finishes it. It runs only between source
// transactions, and first lands the commit in flight, if any.
func (s *Sink) startCommitLocked(ctx context.Context) error {
	if err := s.landLocked(ctx, true); err != nil {
		return err
	}
	if !s.inKafka {
		return nil
	}
	o := offsetsRecord{Task: s.cfg.Task, Position: s.last, Txns: s.stats.Txns + s.batch.Txns, Updated: time.Now().UTC()}
	b, _ := json.Marshal(o)
	s.produce(ctx, &kgo.Record{Topic: s.cfg.OffsetsTopic(), Key: []byte(s.cfg.Task), Value: b})
	if s.state != nil {
		sb, _ := json.Marshal(schemaRecord{Position: s.last, State: s.state})
		s.produce(ctx, &kgo.Record{Topic: s.cfg.OffsetsTopic(), Key: []byte(s.cfg.Task + ".schema"), Value: sb})
	}
	f := &flight{done: make(chan struct{}), last: s.last, batch: s.batch}
	// The client's transaction is the flight's now: it ends it, or aborts
	// it on failure.
	s.flight, s.inKafka, s.inClient, s.state, s.batch = f, false, false, nil, Stats{}
	s.startWork()
	s.w.committing.Store(true)
	s.wg.Add(1)
	go s.fly(f)
	return nil
}

// fly flushes and commits the transaction. Nothing else uses the client's
// transaction meanwhile (produce stages). It uses stopCtx, not a Submit's
// context: the commit outlives the Submit that started it, and Close must
// not wait for a broker that is gone.
func (s *Sink) fly(f *flight) {
	defer s.wg.Done()
	err := s.cl.Flush(s.stopCtx)
	if err == nil {
		err = s.produceFailed()
	}
	if err != nil {
		f.write = true
	} else if err = s.cl.EndTransaction(s.stopCtx, kgo.TryCommit); err == nil {
		s.w.ack()
	}
	if err != nil {
		// Nothing of the transaction becomes visible to read_committed
		// consumers. Errors are ignored: the sink fails with err, and the
		// next Open fences and aborts whatever is left.
		actx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = s.cl.AbortBufferedRecords(actx)
		_ = s.cl.EndTransaction(actx, kgo.TryAbort)
		cancel()
	}
	f.err = err
	s.w.committing.Store(false)
	close(f.done)
	// The committer lands it if Submit does not come first (an idle source).
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// landLocked finishes the commit in flight, waiting for it if wait (else
// only if it is done): the stats move on, and the next transaction
// begins in the client with the records staged meanwhile.
func (s *Sink) landLocked(ctx context.Context, wait bool) error {
	f := s.flight
	if f == nil {
		return nil
	}
	if wait {
		select {
		case <-f.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	} else {
		select {
		case <-f.done:
		default:
			return nil
		}
	}
	s.flight = nil
	if f.err != nil {
		s.inKafka, s.staged, s.stagedBytes = false, nil, 0
		if f.write {
			return s.produceErr(ctx, f.err)
		}
		return s.brokerErr("commit a transaction", f.err)
	}
	s.statsMu.Lock()
	s.stats.Committed = f.last
	s.stats.Txns += f.batch.Txns
	s.stats.Events += f.batch.Events
	s.stats.DDL += f.batch.DDL
	s.stats.KafkaTxns++
	s.statsMu.Unlock()
	staged := s.staged
	s.staged, s.stagedBytes = nil, 0
	if !s.inKafka {
		return nil
	}
	if err := s.cl.BeginTransaction(); err != nil {
		return s.brokerErr("begin a transaction", err)
	}
	s.inClient = true
	for _, r := range staged {
		s.startWork()
		s.cl.Produce(ctx, r, s.promise)
	}
	return nil
}

// pollLocked lands a commit that is done, and waits for the one in
// flight once the staged records reach their bound.
func (s *Sink) pollLocked(ctx context.Context) error {
	return s.landLocked(ctx, s.stagedBytes >= maxStagedBytes)
}

// commitLocked commits the open Kafka transaction and waits for it.
func (s *Sink) commitLocked(ctx context.Context) error {
	if err := s.startCommitLocked(ctx); err != nil {
		return err
	}
	return s.landLocked(ctx, true)
}

// abortLocked gives the open transaction up; nothing of it becomes visible
// to read_committed consumers. Errors are ignored: the sink is failing
// already, and the next Open fences and aborts whatever is left. A commit
// in flight is not touched (it owns the client's transaction): land it
// first.
func (s *Sink) abortLocked() {
	s.inKafka, s.staged, s.stagedBytes = false, nil, 0
	if !s.inClient {
		return
	}
	s.inClient = false
	actx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.cl.AbortBufferedRecords(actx)
	_ = s.cl.EndTransaction(actx, kgo.TryAbort)
}

// committer ends the open Kafka transaction CommitInterval after it began,
// between source transactions, so that an idle or slow source still has
// its transactions visible soon; and lands a commit that finished while
// Submit was not called.
func (s *Sink) committer() {
	defer s.wg.Done()
	tick := time.NewTicker(s.cfg.CommitInterval / 2)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		case <-s.kick:
		}
		s.mu.Lock()
		err := s.landLocked(s.stopCtx, false)
		interval, _ := s.batchLimits()
		if err == nil && s.flight == nil && s.inKafka && !s.inSource && s.batch.Txns > 0 && time.Since(s.began) >= interval {
			err = s.startCommitLocked(s.stopCtx)
		}
		s.mu.Unlock()
		if err != nil {
			s.fail(err)
			return
		}
	}
}

// Flush commits everything written up to the last complete source
// transaction (a clean stop), and waits for it.
func (s *Sink) Flush(ctx context.Context) error {
	if err := s.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.landLocked(ctx, true)
	if err == nil && s.inSource {
		// A source transaction is half written: it must not commit, and
		// nothing after the last commit is lost by aborting it (the next
		// run starts from the committed position).
		s.abortLocked()
		return nil
	}
	if err == nil {
		err = s.commitLocked(ctx)
	}
	if err != nil {
		s.fail(err)
		return err
	}
	return nil
}
