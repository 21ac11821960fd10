package replicate

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-db/sluice/apply"
	"github.com/sluice-db/sluice/internal/stagetime"
)

// Stages of the replication pipeline, in stream order, each one goroutine
// or (worker) one per worker. Where each spends its wall time answers what
// bounds the task's throughput (docs/benchmarks/replication.md, the worker
// sweep): the stage that works (or waits on the target) while the others
// wait on it.
//
//   - fetch: the source connection (go-mysql's reader) and the hand-off to
//     the relay writer. wait_input: socket reads waiting for the source's
//     bytes, and the backoff between reconnects; wait_output: the queue to
//     the relay writer is full.
//   - relay_write: the relay writer. wait_input: nothing from the source
//     ready; flush: the write to the file, fsync under relay-sync commit,
//     and the publish to readers (every 20 ms or 4 MB while events come,
//     and whenever the source has nothing more ready).
//   - decode: the apply loop: reads the relay, decodes, filters, submits.
//     wait_input: the relay has nothing published past it; wait_output: the
//     applier's queue is full.
//   - schedule: groups transactions, computes writesets, dispatches.
//     wait_input: its queue is empty; wait_conflict: a group overlaps two
//     workers' uncommitted groups; wait_output: the chosen worker's channel
//     is full, or every group must commit first (a DDL, a flush).
//   - worker: executes and commits groups. wait_input: no group for it;
//     execute: round trips of statements; execute_commit: the last round
//     trip of a group whose turn had come, statements and COMMIT together;
//     wait_turn: executed, waiting for the earlier groups to commit; commit:
//     the COMMIT round trip once its turn came. Work is building the SQL.
//
// Every stage has work: its goroutines' lifetimes minus all the waits.
var stageNames = []string{"fetch", "relay_write", "decode", "schedule", "worker"}

// pipelineClocks are a task's stage clocks. They live as long as the Task,
// so the totals run on across applier restarts, like its counters.
type pipelineClocks struct {
	fetch, relayWrite, decode, schedule, worker stagetime.Clock
}

func (p *pipelineClocks) byName() map[string]*stagetime.Clock {
	return map[string]*stagetime.Clock{"fetch": &p.fetch, "relay_write": &p.relayWrite, "decode": &p.decode,
		"schedule": &p.schedule, "worker": &p.worker}
}

func (p *pipelineClocks) applier() apply.Clocks {
	return apply.Clocks{Submit: &p.decode, Schedule: &p.schedule, Worker: &p.worker}
}

// StageTime is one stage's time since the task started (status --json,
// apply.stages): Seconds by state (work, and each wait the stage entered),
// which add up to its goroutines' lifetimes; Goroutines is the most of them
// that ran at once.
type StageTime struct {
	Goroutines int                `json:"goroutines"`
	Seconds    map[string]float64 `json:"seconds"`
}

// stageTimes reads the clocks.
func (p *pipelineClocks) stageTimes() map[string]StageTime {
	out := make(map[string]StageTime, len(stageNames))
	for name, c := range p.byName() {
		t := c.Snapshot()
		out[name] = StageTime{Goroutines: t.Goroutines, Seconds: t.Seconds}
	}
	return out
}

// stageCollector exports the clocks as
// sluice_replication_stage_seconds_total{stage,state}, read when scraped.
type stageCollector struct {
	p    *pipelineClocks
	desc *prometheus.Desc
}

func newStageCollector(task string, p *pipelineClocks) *stageCollector {
	return &stageCollector{p: p, desc: prometheus.NewDesc("sluice_replication_stage_seconds_total",
		"wall seconds the pipeline stage's goroutines spent in each state since the task started: work, or waiting on input, output, the target (see docs/manual/replication.md)",
		[]string{"stage", "state"}, prometheus.Labels{"task": task})}
}

func (c *stageCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *stageCollector) Collect(ch chan<- prometheus.Metric) {
	times := c.p.stageTimes()
	for _, stage := range stageNames {
		secs := times[stage].Seconds
		states := make([]string, 0, len(secs))
		for s := range secs {
			states = append(states, s)
		}
		sort.Strings(states)
		for _, s := range states {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, secs[s], stage, s)
		}
	}
}
