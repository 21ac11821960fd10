package dtx

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Trace is the latency breakdown of one submit: a few monotonic
// timestamps, from the request read to the answer written, that the
// coordinator sums per phase into sluice_dtx_saga_phase_seconds_total. It
// answers where a saga's time goes between the client and the business
// services (the queue for the store's synced write, the write itself, the
// wake-up of the goroutine that waited for it, the branch calls, the gaps
// between them) at the cost of about a dozen clock reads per saga.
//
// The API that reads a submit makes one (NewTrace), passes it in the
// context (WithTrace) and hands it back once the answer is written
// (Coordinator.ObserveTrace). Only sagas driven to their end within the
// request, stored exactly twice (the submit and the outcome) and whose
// actions ran one at a time are summed: that is the shape the phases
// name; other transactions leave no figures. A Trace is used by one
// goroutine at a time: the request's, which drives the saga.
type Trace struct {
	read  time.Time
	n     int
	bad   bool
	marks [traceMarks]traceMark
}

type traceMark struct {
	kind int
	at   time.Time
}

// Room for two commits (six marks each) and four branch calls.
const traceMarks = 20

const (
	markEnqueue    = iota // a mutation handed to the committer
	markApplyStart        // its store transaction started (the synced write)
	markApplyEnd          // the store transaction returned: durable
	markDurable           // the caller that waited for it runs again
	markBranchStart
	markBranchEnd
	markWaitStart // its batch's leader waiting for company (the commit wait), from
	markWaitEnd   // when both it and the wait had begun, to the wait's end
)

// The phases, in a saga's order; a phase is the time between two marks.
const (
	phaseRequest         = iota // request read -> the submit handed to the committer
	phaseSubmitQueue            // -> its store transaction starts, but for the commit wait: the one in flight
	phaseSubmitWait             // the leader's wait for company (--commit-wait)
	phaseSubmitWrite            // -> the store transaction returned
	phaseSubmitWakeup           // -> the submit's goroutine runs again
	phaseToFirstBranch          // -> the first action is called
	phaseBranchCalls            // every action call, start to answer
	phaseBetweenBranches        // one action's answer -> the next call
	phaseToFinalCommit          // the last answer -> the outcome handed to the committer
	phaseFinalQueue             // as the submit's, for the outcome
	phaseFinalWait
	phaseFinalWrite
	phaseFinalWakeup
	phaseAnswer // the outcome durable -> the answer written
	numPhases
)

var phaseNames = [numPhases]string{
	"request", "submit_commit_queue", "submit_commit_wait", "submit_commit_write", "submit_commit_wakeup",
	"to_first_branch", "branch_calls", "between_branches", "to_final_commit",
	"final_commit_queue", "final_commit_wait", "final_commit_write", "final_commit_wakeup", "answer",
}

var tracePool = sync.Pool{New: func() any { return new(Trace) }}

// NewTrace starts a trace at read, when the request was read.
func NewTrace(read time.Time) *Trace {
	t := tracePool.Get().(*Trace)
	t.read, t.n, t.bad = read, 0, false
	return t
}

type traceKey struct{}

// WithTrace returns ctx carrying t.
func WithTrace(ctx context.Context, t *Trace) context.Context {
	return context.WithValue(ctx, traceKey{}, t)
}

func traceFrom(ctx context.Context) *Trace {
	t, _ := ctx.Value(traceKey{}).(*Trace)
	return t
}

// mark records one event (t may be nil: no trace).
func (t *Trace) mark(kind int, at time.Time) {
	if t == nil {
		return
	}
	if t.n == len(t.marks) {
		t.bad = true
		return
	}
	t.marks[t.n] = traceMark{kind, at}
	t.n++
}

// spoil drops the trace from the figures (a shape the phases do not name).
func (t *Trace) spoil() {
	if t != nil {
		t.bad = true
	}
}

// phases splits read -> answered into the phases; ok is false for a
// transaction of another shape.
func (t *Trace) phases(answered time.Time) (out [numPhases]time.Duration, ok bool) {
	if t.bad || t.n == 0 {
		return out, false
	}
	commits, prev, prevKind := 0, t.read, -1 // commits: store commits begun
	for i := 0; i < t.n; i++ {
		m := t.marks[i]
		var p int
		switch {
		case m.kind == markEnqueue && prevKind == -1:
			p = phaseRequest
		case m.kind == markEnqueue && prevKind == markBranchEnd && commits == 1:
			p = phaseToFinalCommit
		case m.kind == markApplyStart && (prevKind == markEnqueue || prevKind == markWaitEnd),
			m.kind == markWaitStart && prevKind == markEnqueue:
			p = phaseSubmitQueue
		case m.kind == markWaitEnd && prevKind == markWaitStart:
			p = phaseSubmitWait
		case m.kind == markApplyEnd && prevKind == markApplyStart:
			p = phaseSubmitWrite
		case m.kind == markDurable && prevKind == markApplyEnd:
			p = phaseSubmitWakeup
		case m.kind == markBranchStart && prevKind == markDurable && commits == 1:
			p = phaseToFirstBranch
		case m.kind == markBranchStart && prevKind == markBranchEnd:
			p = phaseBetweenBranches
		case m.kind == markBranchEnd && prevKind == markBranchStart:
			p = phaseBranchCalls
		default:
			return out, false
		}
		if m.kind == markEnqueue {
			commits++
		}
		if commits == 2 && p >= phaseSubmitQueue && p <= phaseSubmitWakeup {
			p += phaseFinalQueue - phaseSubmitQueue
		}
		out[p] += m.at.Sub(prev)
		prev, prevKind = m.at, m.kind
	}
	if commits != 2 || prevKind != markDurable {
		return out, false
	}
	out[phaseAnswer] = answered.Sub(prev)
	return out, true
}

// ObserveTrace adds t's phases, up to answered (when the answer was
// written), to the metrics, and recycles t.
func (c *Coordinator) ObserveTrace(t *Trace, answered time.Time) {
	if t == nil {
		return
	}
	if ph, ok := t.phases(answered); ok {
		m := c.metrics
		for i, d := range ph {
			m.phases[i].Add(d.Seconds())
		}
		m.SagaTime.Observe(answered.Sub(t.read).Seconds())
	}
	tracePool.Put(t)
}

func newPhaseCounters() (*prometheus.CounterVec, [numPhases]prometheus.Counter) {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_dtx_saga_phase_seconds_total",
		Help: "Time of wait_result sagas (stored twice, actions one at a time) from the submit read to the answer written, by phase; divide by sluice_dtx_saga_request_seconds_count for the time per saga."},
		[]string{"phase"})
	var cs [numPhases]prometheus.Counter
	for i, n := range phaseNames {
		cs[i] = v.WithLabelValues(n)
	}
	return v, cs
}
