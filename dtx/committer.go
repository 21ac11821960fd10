package dtx

import (
	"context"
	"sync"
	"time"
)

// committer group-commits mutations: callers block in do until their
// mutation is durable, and every worker applies whatever has queued up while
// the previous store transaction was being fsync'd. This is how many
// transactions share one fsync without acknowledging anything early.
type committer struct {
	store    Store
	ch       chan *pending
	maxBatch int
	metrics  *Metrics
	wg       sync.WaitGroup
	quit     chan struct{}
}

type pending struct {
	m    *Mutation
	done chan error
}

func newCommitter(store Store, workers, maxBatch int, m *Metrics) *committer {
	c := &committer{store: store, ch: make(chan *pending, maxBatch*workers), maxBatch: maxBatch, metrics: m, quit: make(chan struct{})}
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
	fill:
		for len(batch) < c.maxBatch {
			select {
			case p := <-c.ch:
				batch = append(batch, p)
			default:
				break fill
			}
		}
		muts := make([]*Mutation, len(batch))
		for i, p := range batch {
			muts[i] = p.m
		}
		start := time.Now()
		errs, err := c.store.Apply(context.Background(), muts)
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
