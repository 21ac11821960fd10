// Package stagetime accounts where the goroutines of a pipeline spend their
// wall time: for each stage, how long its goroutines lived and how much of
// that they waited on the stage before them (input), on the stage after
// them (output), or on something named (a target round trip, a commit
// turn). Work is what remains: the lifetime minus every wait.
//
// It is meant for hot paths: a stage reads the clock only around a wait
// that actually blocks (try the channel first, time the blocking receive),
// or once per batch or group, never per row. Work is never timed: it is
// the remainder, so it costs nothing.
//
// A nil *Clock does nothing, so that components time themselves only when
// their owner asks (replicate's tasks do; tests and sluice serve do not).
package stagetime

import (
	"sync"
	"time"
)

// State is what a stage's goroutine is doing when it is not working.
type State uint8

// The states. Each stage uses the ones that apply to it.
const (
	// WaitInput: waiting for the stage before it (an idle source, a relay
	// not yet published, an empty queue).
	WaitInput State = iota
	// WaitOutput: waiting for room in the stage after it (a full queue, a
	// worker with a full channel, all groups to commit before a DDL).
	WaitOutput
	// Flush: the relay writer's write to the file, fsync (relay-sync
	// commit) and publish to readers.
	Flush
	// WaitConflict: the scheduler holding a group whose writeset overlaps
	// the uncommitted groups of two workers.
	WaitConflict
	// Execute: round trips of row statements to the target, without the
	// COMMIT.
	Execute
	// ExecuteCommit: the group's last round trip when it carries the COMMIT
	// (its turn had come when its statements were sent): statements and
	// commit, the target's fsync included, in one round trip.
	ExecuteCommit
	// WaitTurn: a group executed, waiting for the earlier groups to commit
	// (source-order commit).
	WaitTurn
	// Commit: the COMMIT round trip after the turn came, the target's
	// fsync included.
	Commit
	numStates
)

var stateNames = [numStates]string{"wait_input", "wait_output", "flush", "wait_conflict", "execute", "execute_commit", "wait_turn", "commit"}

// String is the state's name in metrics and status.
func (s State) String() string { return stateNames[s] }

// WorkState is the name of the remainder: lifetime minus every wait.
const WorkState = "work"

// epoch makes times small monotonic integers (time.Since reads the
// monotonic clock).
var epoch = time.Now()

func mono() int64 { return int64(time.Since(epoch)) }

// span sums intervals, the finished ones and those in progress: these as
// their count and the sum of their start times, so that a snapshot counts
// a wait (or a goroutine's life) still going on up to now. A worker idle at
// the end of a run has waited all that time, not worked.
type span struct {
	done   int64 // ns
	starts int64 // sum of the start times of those in progress (mono)
	open   int64
}

func (s *span) begin(t int64) { s.starts += t; s.open++ }
func (s *span) end(t0, t int64) {
	s.starts -= t0
	s.open--
	s.done += t - t0
}
func (s *span) at(now int64) int64 { return s.done + s.open*now - s.starts }

// Clock accounts one stage's goroutines. Its methods are called once per
// goroutine, per wait that blocks, or per group: a mutex is cheap there,
// and it keeps the spans of a snapshot consistent.
type Clock struct {
	mu    sync.Mutex
	life  span
	waits [numStates]span
	most  int64 // the most goroutines that ran at once
}

// Begin is called by a goroutine of the stage when it starts; End, with
// Begin's result, when it ends.
func (c *Clock) Begin() int64 {
	if c == nil {
		return 0
	}
	t := mono()
	c.mu.Lock()
	c.life.begin(t)
	c.most = max(c.most, c.life.open)
	c.mu.Unlock()
	return t
}

// End ends a goroutine begun at t0.
func (c *Clock) End(t0 int64) {
	if c == nil {
		return
	}
	t := mono()
	c.mu.Lock()
	c.life.end(t0, t)
	c.mu.Unlock()
}

// Enter starts a wait in state s; Leave, with Enter's result, ends it.
func (c *Clock) Enter(s State) int64 {
	if c == nil {
		return 0
	}
	t := mono()
	c.mu.Lock()
	c.waits[s].begin(t)
	c.mu.Unlock()
	return t
}

// Leave ends a wait in state s entered at t0.
func (c *Clock) Leave(s State, t0 int64) {
	if c == nil {
		return
	}
	t := mono()
	c.mu.Lock()
	c.waits[s].end(t0, t)
	c.mu.Unlock()
}

// Times is a snapshot of a clock, in seconds.
type Times struct {
	// Goroutines is the most goroutines of the stage that ran at once;
	// Lifetime the sum of their lifetimes so far.
	Goroutines int
	Lifetime   float64
	// Seconds by state: every wait the stage entered, and "work", the
	// lifetime minus the waits.
	Seconds map[string]float64
}

// Snapshot reads the clock. Work is always there; states the stage never
// entered are left out.
func (c *Clock) Snapshot() Times {
	c.mu.Lock()
	now := mono()
	life := c.life.at(now)
	t := Times{Goroutines: int(c.most), Lifetime: float64(life) / 1e9, Seconds: map[string]float64{}}
	var waits int64
	for s := range c.waits {
		w := &c.waits[s]
		if w.done > 0 || w.open > 0 {
			v := w.at(now)
			t.Seconds[State(s).String()] = float64(v) / 1e9
			waits += v
		}
	}
	c.mu.Unlock()
	// Waits lie inside the lifetimes, but for the fetch stage, whose socket
	// reads happen on go-mysql's goroutine, which may overlap its hand-off
	// wait by a few events.
	t.Seconds[WorkState] = float64(max(life-waits, 0)) / 1e9
	return t
}
