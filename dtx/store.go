package dtx

import (
	"context"
	"time"
)

// Store persists transactions. Implementations must be safe for concurrent
// use. Apply is the only write path for transaction state: a batch is made
// durable (fsync'd by the store) before Apply returns, and the coordinator
// acknowledges nothing before that.
type Store interface {
	// Apply applies the mutations in one store transaction. errs[i] is the
	// outcome of muts[i]: nil, ErrExists, ErrNotFound or a *ConflictError
	// (that mutation changed nothing). A non-nil err means the whole batch
	// failed and nothing was applied.
	Apply(ctx context.Context, muts []*Mutation) (errs []error, err error)
	// Get returns a transaction and its branches in insertion order, or ErrNotFound.
	Get(ctx context.Context, gid string) (*Global, []Branch, error)
	// Claim leases up to limit unfinished, non-stuck transactions whose
	// NextCronTime and LeaseUntil are both at or before now: it sets Owner to
	// token and LeaseUntil to leaseUntil, and returns them. Two Claims never
	// return the same transaction while its lease runs.
	Claim(ctx context.Context, token string, now, leaseUntil time.Time, limit int) ([]*Global, error)
	// List returns up to limit transactions with gid > after, in gid order,
	// filtered by status and type when those are not empty.
	List(ctx context.Context, after string, limit int, status, transType string) ([]*Global, error)
	// Purge removes up to limit finished transactions that finished before
	// `before`, with their branches, and returns how many it removed.
	Purge(ctx context.Context, before time.Time, limit int) (int, error)
	Close() error
}
