package dtx

import (
	"context"
	"fmt"
	"time"
)

// saga drives a saga: actions in order (or as their branch orders allow),
// and on a FAILURE, timeout or exhausted retry limit the compensations of
// every attempted action, in reverse order.
func (r *run) saga(ctx context.Context) error {
	sc, err := parseSagaCustom(r.g.CustomData, len(r.g.Steps))
	if err != nil {
		return err
	}
	n := len(r.branches) / 2
	if r.g.Status == StatusSubmitted && r.sagaTimedOut() {
		if err := r.setStatus(ctx, StatusAborting, fmt.Sprintf("Timeout after %d seconds", r.g.Options.TimeoutToFail)); err != nil {
			return err
		}
	}
	if r.g.Status == StatusSubmitted {
		done, err := r.sagaActions(ctx, sc, n)
		if err != nil || done {
			return err
		}
	}
	if r.g.Status == StatusAborting {
		return r.sagaCompensate(ctx, sc, n)
	}
	return nil
}

func (r *run) sagaTimedOut() bool {
	t := r.g.Options.TimeoutToFail
	return t > 0 && r.c.now().Sub(r.g.CreateTime) >= time.Duration(t)*time.Second
}

// readyActions are the actions whose turn has come: the first unfinished
// one for a sequential saga, every one whose predecessors succeeded for a
// concurrent one.
func (r *run) readyActions(sc *sagaCustom, n int, tried map[int]bool) []int {
	var ready []int
	for s := 0; s < n; s++ {
		a := r.branches[2*s+1]
		if a.Status == StatusSucceed {
			continue
		}
		if !sc.Concurrent {
			if a.Status == StatusPrepared && !tried[s] {
				ready = append(ready, 2*s+1)
			}
			break
		}
		if a.Status != StatusPrepared || tried[s] {
			continue
		}
		ok := true
		for _, p := range sc.Orders[s] {
			if r.branches[2*p+1].Status != StatusSucceed {
				ok = false
			}
		}
		if ok {
			ready = append(ready, 2*s+1)
		}
	}
	return ready
}

// sagaActions runs actions until all succeeded (done), one failed (the saga
// moves to aborting) or an error leaves the rest for a retry (done).
func (r *run) sagaActions(ctx context.Context, sc *sagaCustom, n int) (bool, error) {
	tried := map[int]bool{}
	errIdx, ongoing, failed, overLimit := -1, false, false, false
	limit := int(r.g.Options.RetryLimit)
	for !failed && errIdx < 0 && !overLimit {
		if err := r.keepLease(ctx); err != nil {
			return true, err
		}
		ready := r.readyActions(sc, n, tried)
		if len(ready) == 0 {
			break
		}
		for _, o := range r.runParallel(ctx, ready) {
			switch {
			case o.result == ResultSuccess:
			case r.branches[o.idx].Status == StatusFailed:
				failed = true
			case limit > 0 && r.immediate < limit:
				// dtm: with a retry_limit, an action that errors or answers
				// ONGOING is called again at once, up to the limit, so a
				// wait_result submit returns the final result.
				r.immediate++
			case limit > 0:
				tried[o.idx/2] = true
				overLimit = true
			default:
				tried[o.idx/2] = true
				if errIdx < 0 || o.result != ResultOngoing {
					errIdx, ongoing = o.idx, o.result == ResultOngoing
				}
			}
		}
	}
	allDone := true
	for s := 0; s < n; s++ {
		if r.branches[2*s+1].Status != StatusSucceed {
			allDone = false
		}
	}
	switch {
	case allDone:
		return true, r.setStatus(ctx, StatusSucceed, "")
	case failed:
		reason := ""
		for s := 0; s < n; s++ {
			a := r.branches[2*s+1]
			if msg := r.errs[2*s+1]; a.Status == StatusFailed && msg != "" && reason == "" {
				// dtm's form, with the business's message.
				reason = fmt.Sprintf("url:%s return failed: %s", a.URL, msg)
			}
		}
		for s := 0; s < n && reason == ""; s++ {
			if a := r.branches[2*s+1]; a.Status == StatusFailed {
				reason = fmt.Sprintf("branch %s action %s returned FAILURE", a.BranchID, a.URL)
			}
		}
		return false, r.setStatus(ctx, StatusAborting, reason)
	case overLimit:
		return false, r.setStatus(ctx, StatusAborting, fmt.Sprintf("RetryCount is greater than RetryLimit, RetryLimit: %d", limit))
	case errIdx >= 0 && !ongoing && !r.progress && r.g.Retries+1 > r.retryLimit():
		// An action that keeps erroring is given up: roll the saga back.
		b := r.branches[errIdx]
		r.c.metrics.Stuck.WithLabelValues(r.g.TransType, b.Op).Inc()
		r.c.log.Error("dtx: saga action exceeded the retry limit; rolling back", "gid", r.g.Gid, "branch", b.BranchID, "url", b.URL, "err", r.errs[errIdx])
		return false, r.setStatus(ctx, StatusAborting, fmt.Sprintf("branch %s action %s exceeded the retry limit of %d: %s", b.BranchID, b.URL, r.retryLimit(), r.errs[errIdx]))
	default:
		return true, r.retryLater(ctx, errIdx, ongoing)
	}
}

// sagaCompensate runs the compensations of attempted actions, later steps
// first (for a concurrent saga: a step only after every step that waited for it).
//
// An action counts as attempted when it succeeded or failed, or when it is
// still prepared but its turn had come (readyActions): it may have been
// called without an answer, before a timeout, an error past the retry
// limit or a crash. Like dtm, the action's stored status stays prepared;
// the set is derived from the stored statuses, which do not change while
// the saga rolls back, so every pass and every coordinator after a crash
// finds the same set.
func (r *run) sagaCompensate(ctx context.Context, sc *sagaCustom, n int) error {
	mayHaveRun := map[int]bool{}
	for _, i := range r.readyActions(sc, n, nil) {
		mayHaveRun[i/2] = true
	}
	rolledBack := func(s int) bool {
		return r.branches[2*s].Status == StatusSucceed || (r.branches[2*s+1].Status == StatusPrepared && !mayHaveRun[s])
	}
	dependents := map[int][]int{}
	for k, pres := range sc.Orders {
		for _, p := range pres {
			dependents[p] = append(dependents[p], k)
		}
	}
	tried := map[int]bool{}
	errIdx, ongoing := -1, false
	for errIdx < 0 {
		if err := r.keepLease(ctx); err != nil {
			return err
		}
		var ready []int
		for s := n - 1; s >= 0; s-- {
			if rolledBack(s) || tried[s] {
				continue
			}
			ok := true
			if !sc.Concurrent {
				ok = s == n-1 || rolledBack(s+1)
			}
			for _, k := range dependents[s] {
				if !rolledBack(k) {
					ok = false
				}
			}
			if ok {
				ready = append(ready, 2*s)
				if !sc.Concurrent {
					break
				}
			}
		}
		if len(ready) == 0 {
			break
		}
		for _, o := range r.runParallel(ctx, ready) {
			if o.result != ResultSuccess {
				tried[o.idx/2] = true
				if errIdx < 0 || o.result != ResultOngoing {
					errIdx, ongoing = o.idx, o.result == ResultOngoing
				}
			}
		}
	}
	for s := 0; s < n; s++ {
		if !rolledBack(s) {
			return r.retryLater(ctx, errIdx, ongoing)
		}
	}
	return r.setStatus(ctx, StatusFailed, "")
}
