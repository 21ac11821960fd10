package dtx

import (
	"context"
	"sync"
	"time"
)

// committer group-commits mutations: callers block in do until their
// mutation is durable. Nothing is acknowledged early.
//
// There is no committer goroutine: the caller that finds no store
// transaction in flight commits its own mutation at once (a lone change on
// an idle store pays no handoff), and callers that arrive meanwhile queue.
// When a store transaction ends, its leader wakes its followers with their
// results and makes the head of the queue the next leader, which commits
// everything queued behind it in one store transaction. So under load many
// transactions' changes share one fsync, and each commit costs one wake-up
// per follower instead of a handoff to a worker and one back: on a machine
// whose cores are saturated those wake-ups were a tenth of the
// coordinator's CPU. Leaders beyond the first (up to workers) only start
// when a full batch is waiting.
//
// Under load a leader first waits `wait` for more changes to join it (as
// MySQL's binlog_group_commit_sync_delay): each store commit is a synced
// write that costs the host CPU and disk time its business services
// share (about 130 µs of CPU per commit on the benchmark host, most of
// it in the kernel and in the wake-ups around the synced write). There,
// waiting 250 µs halved the commits and sped the sagas up 15 % at c=64,
// 600 µs gave 2.9 changes per commit and another 5-10 %, and 1.5 ms (the
// default) 4.7-5 changes per commit, 10 % less CPU per saga and 0-7 %
// more sagas. It waits only when changes have lately arrived often enough
// that at least a quarter of one is expected in the window, so an idle or
// lightly loaded store commits at once; only while waits gather company;
// only while the batch it holds up is under a sixth of the transactions
// in progress (and it stops waiting as soon as the batch reaches that);
// and only while the host's CPUs are at least 75 % busy. The
// wait trades latency for CPU and synced writes, which pays only while the
// host is saturated and the clients queue anyway: with few clients every
// saga waits, and they wait for each other; with CPU to spare (sagas
// without business SQL, 10 clients, the host 47 % busy) it only added
// latency and cost 25 % of the sagas. At 600 µs, before the last three
// conditions, one client's sagas per second halved (229 vs 470 at c=1),
// two clients' too (394 vs 694), and four clients lost 16 %; at six
// clients waiting still cost 5 %, at eight it gained 5 %.
type committer struct {
	store    Store
	maxBatch int
	workers  int
	wait     time.Duration
	metrics  *Metrics
	// inflight, when set, is how many transactions the coordinator is
	// working on (see shouldWait).
	inflight func() int64
	// hostLoad, when set, is how busy the host's CPUs are, 0..1.
	hostLoad func() float64

	mu      sync.Mutex
	queue   []*pending
	leaders int // callers leading a store transaction, or told to
	closed  bool
	idle    *sync.Cond // signalled when leaders drops to 0 after close
	last    time.Time  // previous arrival
	gap     float64    // moving average of the time between arrivals, ns
	company float64    // moving average of the changes that joined a wait
	skipped int        // waits skipped for want of company since the last one
	leads   int        // store transactions led, and how many of them waited
	waited  int
	// waker, while a leader waits for company, ends its wait early once
	// the batch is big enough (see enough).
	waker chan struct{}
}

// A pending mutation moves queued -> (leading ->) taken -> done.
const (
	pendQueued = iota
	pendLeading
	pendTaken
	pendDone
)

type pending struct {
	m     *Mutation
	err   error
	state int           // guarded by committer.mu
	wake  chan struct{} // buffered: done, or made leader
	// applied: when its store transaction started and returned, set by
	// the leader before the state becomes done (for the saga trace).
	applyStart, applyEnd time.Time
	// waitStart, waitEnd: the leader's wait for company before it (zero:
	// none).
	waitStart, waitEnd time.Time
}

func newCommitter(store Store, workers, maxBatch int, wait time.Duration, m *Metrics) *committer {
	c := &committer{store: store, maxBatch: max(maxBatch, 1), workers: max(workers, 1), wait: wait, metrics: m, company: 1}
	c.idle = sync.NewCond(&c.mu)
	return c
}

// canLead tells (under mu) whether a new leader may start.
func (c *committer) canLead() bool {
	return c.leaders == 0 || (c.leaders < c.workers && len(c.queue) >= c.maxBatch)
}

// do applies one mutation and returns its own outcome.
func (c *committer) do(ctx context.Context, m *Mutation) error {
	tr := traceFrom(ctx)
	if tr == nil {
		return c.do1(ctx, m, nil)
	}
	p := &pending{}
	enq := time.Now()
	tr.mark(markEnqueue, enq)
	err := c.do1(ctx, m, p)
	if err != nil || p.applyEnd.IsZero() {
		tr.spoil()
		return err
	}
	if p.waitEnd.After(enq) {
		// The part of its wait that the batch's leader spent waiting for
		// company (the commit wait), apart from the wait for the store
		// transaction in flight before it.
		tr.mark(markWaitStart, later(enq, p.waitStart))
		tr.mark(markWaitEnd, p.waitEnd)
	}
	tr.mark(markApplyStart, p.applyStart)
	tr.mark(markApplyEnd, p.applyEnd)
	tr.mark(markDurable, time.Now())
	return nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// do1 is do; p, when not nil, is the pending to use (its times are read
// by the trace).
func (c *committer) do1(ctx context.Context, m *Mutation, p *pending) error {
	if p == nil {
		p = &pending{}
	}
	p.m, p.wake = m, make(chan struct{}, 1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return context.Canceled
	}
	c.queue = append(c.queue, p)
	if c.wait > 0 {
		c.arrived(time.Now())
		if c.waker != nil && c.enough() {
			c.waker <- struct{}{} // buffered, and sent once: waker is cleared
			c.waker = nil
		}
	}
	if c.canLead() {
		c.leaders++
		p.state = pendLeading
		c.mu.Unlock()
		c.lead(p)
		return p.err
	}
	c.mu.Unlock()
	for {
		select {
		case <-p.wake:
		case <-ctx.Done():
			c.mu.Lock()
			switch p.state {
			case pendQueued:
				c.remove(p)
				c.mu.Unlock()
				return ctx.Err()
			case pendTaken:
				// In a store transaction now: it may still be applied;
				// callers treat this like a crash.
				c.mu.Unlock()
				return ctx.Err()
			}
			c.mu.Unlock()
			// Done, or made leader: a leader must lead even for a caller
			// that gave up, or the queue behind it would wait forever.
		}
		c.mu.Lock()
		st := p.state
		c.mu.Unlock()
		switch st {
		case pendDone:
			return p.err
		case pendLeading:
			c.lead(p)
			return p.err
		}
	}
}

// arrived updates (under mu) the average time between arrivals. A pause
// (capped at a second) weighs an eighth, so after one the store is seen
// as idle again at once.
func (c *committer) arrived(now time.Time) {
	if !c.last.IsZero() {
		g := float64(min(now.Sub(c.last), time.Second))
		if c.gap == 0 {
			c.gap = g
		} else {
			c.gap += (g - c.gap) / 8
		}
	}
	c.last = now
}

// underLoad tells (under mu) whether a wait could gather company: at least
// a quarter of an arrival is expected in the window (wait / gap >= 1/4)
// and the batch is not full already.
func (c *committer) underLoad() bool {
	return c.wait > 0 && c.gap > 0 && 4*float64(c.wait) >= c.gap && len(c.queue) < c.maxBatch
}

// shouldWait tells (under mu) whether a leader should wait for company:
// under load, while recent waits gathered half a change each on average
// (every 16th wait that this would skip is taken anyway, to notice company
// coming back), while the changes it would hold up (the queue, the
// leader included) are under a sixth of the transactions in progress, and
// while the host's CPUs are at least 75 % busy.
func (c *committer) shouldWait() bool {
	return c.underLoad() && (c.company >= 0.5 || c.skipped >= 15) && !c.enough() &&
		(c.hostLoad == nil || c.hostLoad() >= 0.75)
}

// enough tells (under mu) whether the queue is batch enough that a leader
// should not wait, or stop waiting: a full batch, or changes from a sixth
// of the transactions in progress. Ending the wait there, instead of
// always sleeping the whole window, keeps most of the batching and gives
// back most of the latency: with 10 clients a wait ended after about one
// more change instead of 1.5 ms, twice per saga.
func (c *committer) enough() bool {
	return len(c.queue) >= c.maxBatch || (c.inflight != nil && int64(6*len(c.queue)) >= c.inflight())
}

// remove drops p from the queue (under mu).
func (c *committer) remove(p *pending) {
	for i, q := range c.queue {
		if q == p {
			c.queue = append(c.queue[:i], c.queue[i+1:]...)
			return
		}
	}
}

// lead commits self and what is queued (up to a batch) in one store
// transaction, hands out the results, and passes the lead on.
func (c *committer) lead(self *pending) {
	c.mu.Lock()
	c.leads++
	var waitStart, waitEnd time.Time // the wait for company, if any
	switch {
	case c.shouldWait():
		c.skipped = 0
		c.waited++
		before := len(c.queue)
		wake := make(chan struct{}, 1)
		c.waker = wake
		c.mu.Unlock()
		waitStart = time.Now()
		t := time.NewTimer(c.wait)
		select {
		case <-wake:
		case <-t.C:
		}
		t.Stop()
		waitEnd = time.Now()
		c.mu.Lock()
		if c.waker == wake {
			c.waker = nil
		}
		c.company += (float64(len(c.queue)-before) - c.company) / 4
	case c.underLoad():
		c.skipped++
	}
	if c.closed {
		self.state, self.err = pendDone, context.Canceled
		c.remove(self)
		c.endLead()
		c.mu.Unlock()
		return
	}
	batch := make([]*pending, 0, min(len(c.queue), c.maxBatch))
	batch = append(batch, self)
	self.state = pendTaken
	rest := c.queue[:0]
	for _, q := range c.queue {
		switch {
		case q == self:
		case q.state == pendQueued && len(batch) < c.maxBatch:
			q.state = pendTaken
			batch = append(batch, q)
		default:
			rest = append(rest, q)
		}
	}
	clear(c.queue[len(rest):])
	c.queue = rest
	c.mu.Unlock()

	muts := make([]*Mutation, len(batch))
	for i, p := range batch {
		muts[i] = p.m
	}
	start := time.Now()
	errs, err := c.store.Apply(context.Background(), muts)
	end := time.Now()
	c.metrics.observeCommit(len(batch), end.Sub(start), err)

	c.mu.Lock()
	for i, p := range batch {
		p.state = pendDone
		p.applyStart, p.applyEnd = start, end
		p.waitStart, p.waitEnd = waitStart, waitEnd
		if err != nil {
			p.err = err
		} else {
			p.err = errs[i]
		}
		if p != self {
			p.wake <- struct{}{}
		}
	}
	c.endLead()
	c.mu.Unlock()
}

// endLead (under mu) retires one leader and makes the head of the queue
// the next one when a new store transaction may start.
func (c *committer) endLead() {
	c.leaders--
	if c.closed {
		if c.leaders == 0 {
			c.idle.Broadcast()
		}
		return
	}
	for _, q := range c.queue {
		if !c.canLead() {
			break
		}
		if q.state == pendQueued {
			q.state = pendLeading
			c.leaders++
			q.wake <- struct{}{}
		}
	}
}

// close fails what is queued and waits for the store transactions in
// flight; later calls to do fail at once.
func (c *committer) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	rest := c.queue[:0]
	for _, q := range c.queue {
		if q.state == pendQueued {
			q.state, q.err = pendDone, context.Canceled
			q.wake <- struct{}{}
			continue
		}
		rest = append(rest, q)
	}
	c.queue = rest
	for c.leaders > 0 {
		c.idle.Wait()
	}
}
