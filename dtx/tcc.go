package dtx

import (
	"context"
	"fmt"
	"time"
)

// tcc drives a TCC transaction: confirms (when submitted) or cancels (when
// aborting, or prepared past its timeout) every registered branch, last
// registered first.
func (r *run) tcc(ctx context.Context) error {
	if r.g.Status == StatusPrepared {
		// Its caller may still be registering branches.
		if early, err := r.beforeTimeout(ctx); early || err != nil {
			return err
		}
		if err := r.setStatus(ctx, StatusAborting, fmt.Sprintf("Timeout after %d seconds", int64(r.c.timeoutToFail(r.g)/time.Second))); err != nil {
			return err
		}
		// No branch can be registered any more: read the final list.
		_, branches, err := r.c.store.Get(ctx, r.g.Gid)
		if err != nil {
			return err
		}
		r.branches = branches
	}
	op, final := OpConfirm, StatusSucceed
	switch r.g.Status {
	case StatusSubmitted:
	case StatusAborting:
		op, final = OpCancel, StatusFailed
	default:
		return nil
	}
	// XA (dtm's HTTP XA) is TCC with commit and rollback, called in the
	// order the branches registered rather than last first.
	xa := r.g.TransType == TypeXA
	if xa {
		op = map[string]string{OpConfirm: OpCommit, OpCancel: OpRollback}[op]
	}
	for k := range r.branches {
		i := len(r.branches) - 1 - k
		if xa {
			i = k
		}
		if r.branches[i].Op != op || r.branches[i].Status != StatusPrepared {
			continue
		}
		if err := r.keepLease(ctx); err != nil {
			return err
		}
		if o := r.callBranch(ctx, i); o.result != ResultSuccess {
			return r.retryLater(ctx, i, o.result == ResultOngoing)
		}
	}
	return r.setStatus(ctx, final, "")
}
