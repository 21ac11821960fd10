package dtx

import (
	"context"
	"errors"
	"time"
)

// recoveryLoop claims due transactions in batches, by lease, and drives
// them: transactions whose coordinator crashed, retries after a backoff,
// prepared TCCs past their timeout and prepared messages to back-check.
func (c *Coordinator) recoveryLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.cfg.PollInterval)
	defer t.Stop()
	for {
		n := c.recoverOnce()
		if n == c.cfg.ClaimBatch && c.ctx.Err() == nil {
			continue // more are due
		}
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// recoverOnce claims one batch, limited to the free driver slots, and
// returns how many it claimed.
func (c *Coordinator) recoverOnce() int {
	free := cap(c.slots) - len(c.slots)
	if free > c.cfg.ClaimBatch {
		free = c.cfg.ClaimBatch
	}
	if free <= 0 {
		return 0
	}
	token := c.newToken()
	now := time.Now().UTC()
	if sl, ok := c.store.(SessionLeases); ok {
		if n, err := sl.ReleaseDeadOwners(c.ctx, now); err != nil {
			if !errors.Is(err, context.Canceled) {
				c.log.Error("dtx: releasing the leases of ended coordinators", "err", err)
			}
		} else if n > 0 {
			c.log.Info("dtx: resuming the transactions of a coordinator whose store session ended", "transactions", n)
		}
	}
	claimed, err := c.store.Claim(c.ctx, token, now, now.Add(c.cfg.Lease), free)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			c.log.Error("dtx: recovery claim", "err", err)
		}
		return 0
	}
	c.metrics.Claimed.Add(float64(len(claimed)))
	for _, g := range claimed {
		c.slots <- struct{}{}
		c.wg.Add(1)
		c.working.Add(1)
		go func(g *Global) {
			defer c.wg.Done()
			defer c.working.Add(-1)
			defer func() { <-c.slots }()
			_, branches, err := c.store.Get(c.ctx, g.Gid)
			if err != nil {
				c.log.Error("dtx: recovery load", "gid", g.Gid, "err", err)
				return
			}
			// Get may show a newer owner if the claim was lost meanwhile;
			// the fenced writes of the driver then simply fail.
			r := &run{c: c, g: g, branches: branches, token: token, saved: g.Status}
			_ = c.drive(c.ctx, r)
		}(g)
	}
	return len(claimed)
}

// purgeLoop removes finished transactions older than the retention time.
func (c *Coordinator) purgeLoop() {
	defer c.wg.Done()
	if c.cfg.Retention == 0 {
		return
	}
	t := time.NewTicker(c.cfg.PurgeInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		c.PurgeOnce(c.ctx)
	}
}

// PurgeOnce removes every finished transaction past the retention time.
func (c *Coordinator) PurgeOnce(ctx context.Context) int {
	total := 0
	for ctx.Err() == nil {
		n, err := c.store.Purge(ctx, time.Now().UTC().Add(-c.cfg.Retention), 500)
		if err != nil {
			c.log.Error("dtx: purge", "err", err)
			break
		}
		total += n
		c.metrics.Purged.Add(float64(n))
		if n < 500 {
			break
		}
	}
	return total
}
