package dtx

import (
	"context"
	"encoding/json"
	"time"
)

// msg drives a 2-phase message. A prepared message reaches here only after
// its timeout, when its caller may have vanished: query_prepared tells
// whether the local transaction committed (submit it), rolled back (fail it)
// or is still open (ask again later).
func (r *run) msg(ctx context.Context) error {
	if r.g.Status == StatusPrepared {
		// Its local transaction may still be running.
		if early, err := r.beforeTimeout(ctx); early || err != nil {
			return err
		}
		if err := r.keepLease(ctx); err != nil {
			return err
		}
		res, err := r.c.callURL(ctx, r.g, r.g.QueryPrepared, "00", "msg", nil)
		switch res {
		case ResultSuccess:
			if err := r.setStatus(ctx, StatusSubmitted, ""); err != nil {
				return err
			}
		case ResultFailure:
			return r.setStatus(ctx, StatusFailed, "query_prepared returned FAILURE")
		case ResultOngoing:
			return r.retryLater(ctx, -1, true)
		default:
			r.errs[-1] = err.Error()
			return r.retryLater(ctx, -1, false)
		}
	}
	if r.g.Status != StatusSubmitted {
		return nil
	}
	var mc msgCustom
	if r.g.CustomData != "" {
		_ = json.Unmarshal([]byte(r.g.CustomData), &mc)
	}
	if due := r.g.CreateTime.Add(time.Duration(mc.Delay) * time.Second); mc.Delay > 0 && r.c.cronNow().Before(due) {
		r.g.NextCronTime, r.g.LeaseUntil = due, time.Time{}
		return r.save(ctx)
	}
	var todo []int
	for i, b := range r.branches {
		if b.Op == OpAction && b.Status == StatusPrepared {
			todo = append(todo, i)
		}
	}
	if err := r.keepLease(ctx); err != nil {
		return err
	}
	if r.g.Options.Concurrent {
		errIdx, ongoing := -1, false
		for _, o := range r.runParallel(ctx, todo) {
			if o.result != ResultSuccess && (errIdx < 0 || o.result != ResultOngoing) {
				errIdx, ongoing = o.idx, o.result == ResultOngoing
			}
		}
		if errIdx >= 0 {
			return r.retryLater(ctx, errIdx, ongoing)
		}
	} else {
		for _, i := range todo {
			if err := r.keepLease(ctx); err != nil {
				return err
			}
			if o := r.callBranch(ctx, i); o.result != ResultSuccess {
				return r.retryLater(ctx, i, o.result == ResultOngoing)
			}
		}
	}
	return r.setStatus(ctx, StatusSucceed, "")
}
