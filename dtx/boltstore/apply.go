package boltstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sluice-db/sluice/dtx"
)

// state is one transaction as the overlay holds it: its row and all its
// branches in insertion order.
type state struct {
	g  *dtx.Global
	bs []dtx.Branch
}

// The overlay is written into bolt by a checkpoint before every Claim,
// List and Purge (recovery claims once per poll interval), and in the
// background whenever it outgrows these bounds.
const (
	maxOverlay = 20000
	maxWAL     = int64(64 << 20)
	// walFlush is the most log bytes one batch holds in memory before it
	// writes them.
	walFlush = 4 << 20
)

// Apply evaluates the batch against the latest state (overlay, the states
// being checkpointed, then bolt),
// appends the new states of the changed transactions to the log in one
// write and one fdatasync, and only then makes them visible. The store's
// mutex is held throughout, so batches apply one at a time, in order.
func (s *Store) Apply(ctx context.Context, muts []*dtx.Mutation) ([]error, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Back-pressure: while a checkpoint still writes the frozen states
	// into bolt and the active log has filled up again, wait for it.
	// Otherwise a checkpoint slower than the writers (a loaded machine, a
	// flood of large sagas) let overlay and frozen states grow without
	// bound, all of them in memory (issue 30).
	for s.frozen != nil && s.wal().off-walHeader >= maxWAL && s.wal().broken == nil && !s.closed {
		s.cpEnd.Wait()
	}
	if s.closed {
		return nil, errors.New("dtx bolt store: closed")
	}
	errs := make([]error, len(muts))
	next := make(map[string]*state, len(muts))
	var order []string
	buf := s.recBuf[:0] // one record per applied mutation, in order
	var rtx *bolt.Tx
	defer func() {
		if rtx != nil {
			_ = rtx.Rollback()
		}
	}()
	now := time.Now().UTC()
	for i, m := range muts {
		cur, ok := next[m.Gid]
		if !ok {
			cur, ok = s.latest(m.Gid)
		}
		if !ok {
			if rtx == nil {
				var err error
				if rtx, err = s.db.Begin(false); err != nil {
					return nil, fmt.Errorf("dtx bolt store: %w", err)
				}
			}
			var err error
			if cur, err = load(rtx, m.Gid); err != nil {
				return nil, fmt.Errorf("dtx bolt store: %w", err)
			}
		}
		st, e := mutate(cur, m, now)
		errs[i] = e
		if st != nil {
			if _, seen := next[m.Gid]; !seen {
				order = append(order, m.Gid)
			}
			next[m.Gid] = st
			var err error
			if buf, err = s.wal().encode(buf, delta(cur, st, m)); err != nil {
				return nil, fmt.Errorf("dtx bolt store: %w", err)
			}
			if len(buf) >= walFlush {
				// A batch of large transactions goes to the log in pieces:
				// held whole, 64 sagas of 1 MB took 128 MB for the
				// records, and as much again for the aligned copy (issue
				// 30). Nothing is acknowledged or visible before the last
				// piece is durable; pieces of a batch that then fails are
				// replayed like any record written but not acknowledged.
				if err := s.wal().append(buf); err != nil {
					return nil, fmt.Errorf("dtx bolt store: write-ahead log: %w", err)
				}
				buf = buf[:0]
			}
		}
	}
	if rtx != nil {
		_ = rtx.Rollback()
		rtx = nil
	}
	if len(order) == 0 {
		return errs, nil
	}
	var err error
	if len(buf) > 0 {
		err = s.wal().append(buf)
	}
	if cap(buf) <= 1<<20 {
		s.recBuf = buf // append kept no reference to it
	}
	if err != nil {
		return nil, fmt.Errorf("dtx bolt store: write-ahead log: %w", err)
	}
	for _, gid := range order {
		s.overlay[gid] = next[gid]
	}
	if (len(s.overlay) >= maxOverlay || s.wal().off >= maxWAL) && !s.cpKicked {
		s.cpKicked = true
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			// The batch is durable in the log already: a failed checkpoint
			// leaves it there for the next one (or for replay).
			if err := s.checkpoint(); err != nil {
				s.log("checkpoint", err)
			}
		}()
	}
	return errs, nil
}

// mutate returns the new state when m applies, and m's own outcome. cur is
// never modified: the overlay's states are shared with readers' copies.
func mutate(cur *state, m *dtx.Mutation, now time.Time) (*state, error) {
	if m.Create {
		if cur.g != nil {
			return nil, dtx.ErrExists
		}
	} else {
		if cur.g == nil {
			return nil, dtx.ErrNotFound
		}
		if e := m.Check(cur.g); e != nil {
			return nil, e
		}
	}
	st := &state{g: cur.g, bs: cur.bs}
	if m.Global != nil {
		st.g = m.Global.Clone()
	}
	if len(m.NewBranches) == 0 && len(m.BranchUpdates) == 0 {
		return st, nil
	}
	st.bs = append(make([]dtx.Branch, 0, len(cur.bs)+len(m.NewBranches)), cur.bs...)
	for _, u := range m.BranchUpdates {
		for j := range st.bs {
			if st.bs[j].BranchID == u.BranchID && st.bs[j].Op == u.Op {
				st.bs[j].Status, st.bs[j].FinishTime = u.Status, u.FinishTime
			}
		}
	}
next:
	for _, nb := range m.NewBranches {
		for _, b := range st.bs {
			if b.BranchID == nb.BranchID && b.Op == nb.Op {
				continue next // a retried registerBranch
			}
		}
		nb.CreateTime = now
		st.bs = append(st.bs, nb)
	}
	return st, nil
}
