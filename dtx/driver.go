package dtx

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluice-db/sluice/dtx/internal/wire"
)

// run is one attempt at driving one transaction, by the holder of its lease.
// Every write it makes is fenced by the lease token, so a coordinator that
// lost the lease cannot change the transaction any more.
type run struct {
	c        *Coordinator
	g        *Global
	branches []Branch
	token    string
	saved    string         // status as last stored
	dirty    map[int]bool   // branch indexes changed since the last save
	errs     map[int]string // last error per branch, for the stuck mark
	progress bool           // some branch succeeded in this attempt
	// immediate counts the saga actions called again at once in this
	// attempt under the transaction's retry_limit (dtm's RetryCount).
	immediate int
}

// driveNew drives a transaction this process just created or moved, either
// before returning (wait) or in the background.
func (c *Coordinator) driveNew(ctx context.Context, g *Global, branches []Branch, token string, wait bool) error {
	r := &run{c: c, g: g.Clone(), branches: branches, token: token, saved: g.Status}
	if !wait {
		c.wg.Add(1)
		c.working.Add(1)
		go func() {
			defer c.wg.Done()
			defer c.working.Add(-1)
			c.hooks.asyncStart()
			c.drive(c.ctx, r)
		}()
		return nil
	}
	// The client may hang up; the transaction goes on regardless, and stops
	// only with the coordinator.
	dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()
	defer cancel()
	err := c.drive(dctx, r)
	if err != nil {
		return err
	}
	// dtm answers a wait_result request that did not end in success with
	// 409 and the rollback reason. A saga still running (its retries go
	// on) is 409 "wait result not return success" too, while TCC and
	// messages pass a branch's ONGOING on as 425.
	switch r.g.Status {
	case StatusSucceed:
		return nil
	case StatusFailed, StatusAborting:
		if r.g.RollbackReason != "" {
			return failureMessage(r.g.RollbackReason)
		}
		return fmt.Errorf("transaction %s: %w", r.g.Status, ErrFailure)
	default:
		if r.g.Stuck != "" {
			return fmt.Errorf("stuck: %s %w", r.g.Stuck, ErrFailure)
		}
		if r.g.TransType == TypeSaga {
			return fmt.Errorf("wait result not return success (transaction %s is %s and will be retried) %w", r.g.Gid, r.g.Status, ErrFailure)
		}
		return fmt.Errorf("transaction %s is %s and will be retried: %w", r.g.Gid, r.g.Status, ErrOngoing)
	}
}

// beforeTimeout reports whether a prepared TCC or message is looked at
// before its timeout_to_fail (recovery claims it at the timeout, but
// resetNextCronTime brings it up earlier); if so it is put back until then,
// untouched, as dtm leaves it.
func (r *run) beforeTimeout(ctx context.Context) (bool, error) {
	due := r.g.CreateTime.Add(r.c.timeoutToFail(r.g))
	if !r.c.now().Before(due) {
		return false, nil
	}
	r.g.NextCronTime, r.g.LeaseUntil = due, time.Time{}
	return true, r.save(ctx)
}

// failureMessage is dtm's form of a failure with a message: the message,
// a space and FAILURE (dtmcli.ErrorMessage2Error), so a client that looks
// for the business's own words finds them unchanged.
func failureMessage(msg string) error {
	return fmt.Errorf("%s %w", strings.TrimSuffix(msg, " "+ResultFailure), ErrFailure)
}

// drive runs the transaction's state machine once.
func (c *Coordinator) drive(ctx context.Context, r *run) error {
	if _, busy := c.active.LoadOrStore(r.g.Gid, struct{}{}); busy {
		return nil // the other driver in this process holds a newer lease
	}
	defer c.active.Delete(r.g.Gid)
	defer c.noteProcessed(r.g.Gid)
	r.dirty, r.errs = map[int]bool{}, map[int]string{}
	var err error
	switch r.g.TransType {
	case TypeSaga:
		err = r.saga(ctx)
	case TypeTCC, TypeXA:
		err = r.tcc(ctx)
	case TypeMsg:
		err = r.msg(ctx)
	case TypeWorkflow:
		err = r.workflow(ctx)
	default:
		err = fmt.Errorf("unknown trans_type %q", r.g.TransType)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		if errors.Is(err, ErrConflict) {
			c.log.Info("dtx: transaction taken over", "gid", r.g.Gid, "reason", err)
		} else {
			c.log.Error("dtx: drive", "gid", r.g.Gid, "err", err)
		}
	}
	return err
}

// setBranch records a branch's new status in the run's branches and in the
// transaction's own copy of the statuses; both are stored by the next save.
func (r *run) setBranch(i int, status string) {
	b := &r.branches[i]
	b.Status, b.FinishTime = status, time.Now().UTC()
	r.dirty[i] = true
	if r.g.BranchStatus == nil {
		r.g.BranchStatus = map[string]BranchState{}
	}
	r.g.BranchStatus[BranchKey(b.BranchID, b.Op)] = BranchState{Status: b.Status, FinishTime: b.FinishTime}
}

// save stores the transaction row and every changed branch in one mutation.
func (r *run) save(ctx context.Context) error {
	now := time.Now().UTC()
	r.g.UpdateTime = now
	m := &Mutation{Gid: r.g.Gid, Global: r.g.Clone(), IfStatus: []string{r.saved}, IfOwner: r.token}
	for i := range r.dirty {
		b := r.branches[i]
		m.BranchUpdates = append(m.BranchUpdates, BranchUpdate{BranchID: b.BranchID, Op: b.Op, Status: b.Status, FinishTime: b.FinishTime})
	}
	if err := r.c.commit.do(ctx, m); err != nil {
		return err
	}
	r.saved = r.g.Status
	r.dirty = map[int]bool{}
	return nil
}

// setStatus moves the transaction to status and stores it.
func (r *run) setStatus(ctx context.Context, status, reason string) error {
	r.g.Status = status
	if reason != "" {
		r.g.RollbackReason = reason
	}
	now := time.Now().UTC()
	r.g.Retries = 0
	if r.g.Finished() {
		r.c.finish(r.g, now)
		r.g.Owner = r.token
	} else {
		r.g.NextCronTime = now.Add(r.c.retryInterval(r.g))
	}
	if err := r.save(ctx); err != nil {
		return err
	}
	if r.g.Finished() {
		r.c.metrics.Transactions.WithLabelValues(r.g.TransType, r.g.Status).Inc()
	}
	return nil
}

// keepLease renews the lease when less than one request timeout plus a
// margin is left, so that a slow transaction is never claimed by another
// coordinator while this one is calling a branch.
func (r *run) keepLease(ctx context.Context) error {
	need := r.c.requestTimeout(r.g) + r.c.cfg.Lease/3
	if time.Until(r.g.LeaseUntil) > need {
		return nil
	}
	r.g.LeaseUntil = time.Now().UTC().Add(r.c.cfg.Lease + r.c.requestTimeout(r.g))
	return r.save(ctx)
}

// retryLater stores the outcome of an attempt that did not finish: the
// lease is released and recovery tries again after a backoff, unless the
// retry limit is exceeded, when the branch is marked stuck and alerted.
// ongoing means a branch asked to be asked again (no backoff, no count).
func (r *run) retryLater(ctx context.Context, failed int, ongoing bool) error {
	now := time.Now().UTC()
	if r.progress {
		r.g.Retries = 0
	}
	interval := r.c.retryInterval(r.g)
	if !ongoing {
		// As dtm's cronBackoff: the first failure already doubles the
		// interval (retry_interval 150 s retries after 300 s).
		r.g.Retries++
		for i := 0; i < r.g.Retries && interval < r.c.cfg.MaxBackoff; i++ {
			interval *= 2
		}
		if interval > r.c.cfg.MaxBackoff {
			interval = r.c.cfg.MaxBackoff
		}
	}
	r.g.NextCronTime = now.Add(interval)
	r.g.LeaseUntil = time.Time{}
	if !ongoing && failed >= 0 && r.c.cfg.AlertWebhook != "" && r.g.Retries >= r.c.cfg.AlertRetryLimit {
		r.c.alert(ctx, r.g, r.branches[failed].URL, r.errs[failed], r.g.Retries)
	}
	if !ongoing && r.g.Retries > r.retryLimit() {
		what, op := "query_prepared "+r.g.QueryPrepared, "query_prepared"
		if failed >= 0 {
			b := r.branches[failed]
			what, op = fmt.Sprintf("branch %s %s %s", b.BranchID, b.Op, b.URL), b.Op
		}
		r.g.Stuck = fmt.Sprintf("%s failed %d times: %s", what, r.g.Retries, r.errs[failed])
		r.g.NextCronTime = time.Time{}
		r.c.metrics.Stuck.WithLabelValues(r.g.TransType, op).Inc()
		r.c.log.Error("dtx: branch exceeded the retry limit; the transaction is stuck until reset",
			"gid", r.g.Gid, "status", r.g.Status, "stuck", r.g.Stuck)
	}
	return r.save(ctx)
}

func (r *run) retryLimit() int {
	if r.g.Options.RetryLimit > 0 {
		return int(r.g.Options.RetryLimit)
	}
	return r.c.cfg.RetryLimit
}

// outcome of one branch call.
type outcome struct {
	idx    int
	result string // ResultSuccess, ResultFailure, ResultOngoing or "" for an error
	err    error
}

// callBranch calls branch i and records the result in memory; the caller saves.
func (r *run) callBranch(ctx context.Context, i int) outcome {
	b := r.branches[i]
	tr := traceFrom(ctx)
	if tr != nil && b.URL == "" {
		tr.spoil() // not a call: the phases would mislead
	}
	tr.mark(markBranchStart, time.Now())
	res, err := r.c.callURL(ctx, r.g, b.URL, b.BranchID, b.Op, b.BinData)
	tr.mark(markBranchEnd, time.Now())
	return r.record(i, res, err)
}

// callURL makes a branch request the way dtm does and classifies the answer.
func (c *Coordinator) callURL(ctx context.Context, g *Global, uri, branchID, op string, body []byte) (string, error) {
	if uri == "" {
		return ResultSuccess, nil
	}
	start := time.Now()
	res, err := c.doCall(ctx, g, uri, branchID, op, body)
	label := res
	if label == "" {
		label = "error"
	}
	c.metrics.observeBranch(g.TransType, op, label, time.Since(start))
	return res, err
}

func (c *Coordinator) doCall(ctx context.Context, g *Global, uri, branchID, op string, body []byte) (string, error) {
	a, err := c.caller.Call(ctx, &wire.Call{
		URL: uri, Protocol: g.Protocol, Gid: g.Gid, TransType: g.TransType, BranchID: branchID, Op: op,
		Body: body, Headers: g.Options.BranchHeaders, Timeout: c.requestTimeout(g),
	})
	if err != nil {
		return "", err
	}
	if a.Outcome == ResultFailure {
		return ResultFailure, failureMessage(a.Message)
	}
	return a.Outcome, nil
}

// checkReachable refuses branch URLs whose hosts the host policy denies
// (--branch-hosts), and those whose hosts do not accept a connection when
// the configuration asks for the probe.
func (c *Coordinator) checkReachable(ctx context.Context, protocol string, urls []string) error {
	for _, s := range urls {
		if err := c.caller.Check(ctx, s, protocol, c.cfg.CheckBranchURLs); err != nil {
			return fmt.Errorf("%w: %v", ErrBadRequest, err)
		}
	}
	return nil
}

// runParallel calls the given branches concurrently and returns their outcomes.
func (r *run) runParallel(ctx context.Context, idx []int) []outcome {
	if len(idx) == 1 {
		return []outcome{r.callBranch(ctx, idx[0])}
	}
	// callBranch writes to the run's maps: calls run concurrently, results
	// are recorded one at a time. The trace names sequential calls only.
	traceFrom(ctx).spoil()
	type raw struct {
		i   int
		res string
		err error
	}
	ch := make(chan raw, len(idx))
	for _, i := range idx {
		b := r.branches[i]
		go func(i int, b Branch) {
			res, err := r.c.callURL(ctx, r.g, b.URL, b.BranchID, b.Op, b.BinData)
			ch <- raw{i, res, err}
		}(i, b)
	}
	out := make([]outcome, 0, len(idx))
	for range idx {
		x := <-ch
		out = append(out, r.record(x.i, x.res, x.err))
	}
	return out
}

// record applies one call result to the run: SUCCESS (and FAILURE for a
// saga action) changes the branch, anything else is an error to retry.
func (r *run) record(i int, res string, err error) outcome {
	b := &r.branches[i]
	o := outcome{idx: i, result: res, err: err}
	switch {
	case res == ResultSuccess:
		r.setBranch(i, StatusSucceed)
		r.progress = true
	case res == ResultFailure && r.g.TransType == TypeSaga && b.Op == OpAction:
		r.setBranch(i, StatusFailed)
		if err != nil {
			r.errs[i] = err.Error()
		}
	default:
		if err == nil {
			err = fmt.Errorf("branch returned %s", res)
			o.err = err
		}
		r.errs[i] = err.Error()
		r.c.metrics.Retries.WithLabelValues(r.g.TransType, b.Op).Inc()
	}
	return o
}
