package dtx

import (
	"context"
	"sync"
	"time"
)

// committer group-commits mutations: callers block in do until their
// mutation is durable. A worker that finds another store transaction in
// flight does not start a small one beside it: it gathers what arrives
// until that transaction ends (or its batch is full), so that under load
// many transactions' changes share one fsync, while a lone change on an
// idle store is written at once. Workers beyond the first only add
// parallel commits when batches fill up. Nothing is acknowledged early.
type committer struct {
	store    Store
	ch       chan *pending
	maxBatch int
	metrics  *Metrics
	wg       sync.WaitGroup
	quit     chan struct{}

	mu       sync.Mutex
	inflight int
	ended    chan struct{} // closed (and replaced) whenever a store transaction ends
}

type pending struct {
	m    *Mutation
	done chan error
}

func newCommitter(store Store, workers, maxBatch int, m *Metrics) *committer {
	c := &committer{store: store, ch: make(chan *pending, maxBatch*workers), maxBatch: maxBatch, metrics: m,
		quit: make(chan struct{}), ended: make(chan struct{})}
	for i := 0; i < workers; i++ {
		c.wg.Add(1)
		go c.loop()
	}
	return c
}

// do applies one mutation and returns its own outcome.
func (c *committer) do(ctx context.Context, m *Mutation) error {
	p := &pending{m: m, done: make(chan error, 1)}
	select {
	case c.ch <- p:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.quit:
		return context.Canceled
	}
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		// The mutation may still be applied; callers treat this like a crash.
		return ctx.Err()
	}
}

// busy tells whether a store transaction is in flight, and returns the
// channel that is closed when one ends.
func (c *committer) busy() (bool, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inflight > 0, c.ended
}

func (c *committer) begin() {
	c.mu.Lock()
	c.inflight++
	c.mu.Unlock()
}

func (c *committer) end() {
	c.mu.Lock()
	c.inflight--
	close(c.ended)
	c.ended = make(chan struct{})
	c.mu.Unlock()
}

func (c *committer) loop() {
	defer c.wg.Done()
	batch := make([]*pending, 0, c.maxBatch)
	for {
		batch = batch[:0]
		select {
		case p := <-c.ch:
			batch = append(batch, p)
		case <-c.quit:
			return
		}
		// Wait for at most one store transaction to end, so no change
		// waits longer than one commit before its own starts.
		waited := false
	gather:
		for len(batch) < c.maxBatch {
			select {
			case p := <-c.ch:
				batch = append(batch, p)
				continue
			default:
			}
			if waited {
				break
			}
			busy, ended := c.busy()
			if !busy {
				break
			}
			select {
			case p := <-c.ch:
				batch = append(batch, p)
			case <-ended:
				waited = true
			case <-c.quit:
				break gather
			}
		}
		c.begin()
		muts := make([]*Mutation, len(batch))
		for i, p := range batch {
			muts[i] = p.m
		}
		start := time.Now()
		errs, err := c.store.Apply(context.Background(), muts)
		c.end()
		c.metrics.observeCommit(len(batch), time.Since(start), err)
		for i, p := range batch {
			if err != nil {
				p.done <- err
			} else {
				p.done <- errs[i]
			}
		}
	}
}

func (c *committer) close() {
	close(c.quit)
	c.wg.Wait()
	// Fail whatever is still queued so no caller waits forever.
	for {
		select {
		case p := <-c.ch:
			p.done <- context.Canceled
		default:
			return
		}
	}
}
