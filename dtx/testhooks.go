package dtx

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// Test hooks let dtm's own test suite drive the coordinator the way it
// drives dtm in process (compat/dtmconf): dtm's tests run no background
// cron, wait for "transaction processed once" notifications, run the cron
// by hand with its clock moved forward (dtmsvr.CronTransOnce,
// NowForwardDuration, CronForwardDuration). They are off unless
// Config.TestHooks is set, which `sluice dtx serve --test-hooks` allows
// only on a loopback address.

// hooks is the state of the test hooks; nil when they are off.
type hooks struct {
	processed chan string  // gid after each drive pass, like dtm's TransProcessedTestChan
	skew      atomic.Int64 // CronOnce's move of the timeout clock, in ns
	cronSkew  atomic.Int64 // and of the delay clock
}

func newHooks(on bool) *hooks {
	if !on {
		return nil
	}
	return &hooks{processed: make(chan string, 4096)}
}

// asyncStart delays a background drive a little under the test hooks: some
// of dtm's tests read a transaction right after a plain submit and expect
// it still submitted, which holds for dtm (its in-process store answers
// before the first branch call ends) but not for a client going through
// HTTP to a faster driver. Without the hooks it does nothing.
func (h *hooks) asyncStart() {
	if h != nil {
		time.Sleep(100 * time.Millisecond)
	}
}

// noteProcessed reports the end of one drive pass of gid.
func (c *Coordinator) noteProcessed(gid string) {
	if c.hooks == nil {
		return
	}
	select {
	case c.hooks.processed <- gid:
	default:
		c.log.Error("dtx: test hooks: processed queue full; nobody reads it", "gid", gid)
	}
}

// Processed waits for the next drive pass to end and returns its gid.
func (c *Coordinator) Processed(ctx context.Context) (string, error) {
	if c.hooks == nil {
		return "", errHooksOff
	}
	select {
	case gid := <-c.hooks.processed:
		return gid, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// CronOnce claims one transaction that is due within cronForward and drives
// it once, with the clock used for timeouts moved nowForward ahead; it
// returns the gid, or "" when none is due (dtmsvr.CronTransOnce).
func (c *Coordinator) CronOnce(ctx context.Context, cronForward, nowForward time.Duration) (string, error) {
	if c.hooks == nil {
		return "", errHooksOff
	}
	token := c.newToken()
	now := time.Now().UTC().Add(cronForward)
	claimed, err := c.store.Claim(ctx, token, now, now.Add(c.cfg.Lease), 1)
	if err != nil || len(claimed) == 0 {
		return "", err
	}
	g := claimed[0]
	_, branches, err := c.store.Get(ctx, g.Gid)
	if err != nil {
		return "", err
	}
	c.hooks.skew.Store(int64(nowForward))
	c.hooks.cronSkew.Store(int64(cronForward))
	defer c.hooks.skew.Store(0)
	defer c.hooks.cronSkew.Store(0)
	r := &run{c: c, g: g, branches: branches, token: token, saved: g.Status}
	_ = c.drive(ctx, r)
	return g.Gid, nil
}

// now is the clock for timeouts: the wall clock, moved forward by CronOnce
// (dtm's NowForwardDuration).
func (c *Coordinator) now() time.Time {
	if c.hooks == nil {
		return time.Now()
	}
	return time.Now().Add(time.Duration(c.hooks.skew.Load()))
}

// cronNow is the clock for a message's delay: the wall clock, moved forward
// by CronOnce's cron window (dtm's needDelay uses CronForwardDuration).
func (c *Coordinator) cronNow() time.Time {
	if c.hooks == nil {
		return time.Now()
	}
	return time.Now().Add(time.Duration(c.hooks.cronSkew.Load()))
}

var errHooksOff = errors.New("test hooks are off (sluice dtx serve --test-hooks)")

// TestHooks reports whether the test hooks are on.
func (c *Coordinator) TestHooks() bool { return c.hooks != nil }
