package kafka

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A broker that is down does not fail the sink: franz-go buffers the
// records and retries them, and a commit waits for the coordinator, for as
// long as the Kafka transaction may stay open (TxnTimeout; after that the
// coordinator aborts it and the sink restarts from its checkpoint). What
// a user needs meanwhile is to see that the sink is waiting, and why: the
// watch below tells how long writes have been outstanding without any
// answer from Kafka, and the last connection error.

// watch follows the broker's answers to the sink's writes.
type watch struct {
	// lastAck is when Kafka last acknowledged a write (a record, a
	// commit), or when outstanding work began after an idle time: it is
	// the start of the current wait whenever work is outstanding.
	lastAck    atomic.Int64 // unix nanoseconds
	committing atomic.Bool
	mu         sync.Mutex
	dialErr    error
	dialErrAt  time.Time
}

func (w *watch) ack() { w.lastAck.Store(time.Now().UnixNano()) }

// OnBrokerConnect is franz-go's HookBrokerConnect: it keeps the last dial
// error, the usual reason of a wait (connection refused, timeout).
func (w *watch) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		return
	}
	w.mu.Lock()
	w.dialErr, w.dialErrAt = err, time.Now()
	w.mu.Unlock()
}

// startWork restarts the wait's clock when work begins after an idle
// time, so that a write after an hour without one is not taken for an
// hour of waiting.
func (s *Sink) startWork() {
	// Within a second of an answer the clock is fresh enough: this runs
	// for every record, and the client's count takes its lock.
	if time.Now().UnixNano()-s.w.lastAck.Load() < int64(time.Second) {
		return
	}
	if !s.w.committing.Load() && s.cl.BufferedProduceRecords() == 0 {
		s.w.ack()
	}
}

// ErrNoAnswer is the cause of a wait when no connection failed: the
// brokers accept connections but do not answer the writes.
var ErrNoAnswer = errors.New("the brokers do not answer")

// Waiting reports since when the sink has had writes or a commit
// outstanding without any answer from Kafka (zero: it is not waiting),
// and the likely cause: the last failed connection during the wait.
func (s *Sink) Waiting() (since time.Time, cause error) {
	if s.cl == nil {
		return time.Time{}, nil
	}
	if !s.w.committing.Load() && s.cl.BufferedProduceRecords() == 0 {
		return time.Time{}, nil
	}
	since = time.Unix(0, s.w.lastAck.Load())
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	if s.w.dialErr != nil && !s.w.dialErrAt.Before(since) {
		return since, s.w.dialErr
	}
	return since, ErrNoAnswer
}

// Unreachable tells whether err is Kafka not answering (a refused or
// failed connection, a timeout, no answer): a wait the task rides out and
// reports as such, not a failure of the sink.
func Unreachable(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, ErrNoAnswer)
}
