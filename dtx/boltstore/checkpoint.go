package boltstore

import (
	"fmt"
	"sort"

	bolt "go.etcd.io/bbolt"
)

// A checkpoint moves the overlay's states into bolt without holding up
// Apply: it freezes the overlay, switches appends to the other log file,
// writes the frozen states into bolt in one bolt transaction (which takes
// hundreds of milliseconds for a second's worth of sagas: random keys
// touch many pages), and then retires the file that held them. Reads and
// Apply see overlay, then frozen, then bolt, so nothing goes back in time
// meanwhile. Checkpoints, and the few operations that write bolt
// directly, run one at a time under cpMu.

// cpChunk bounds the bytes one bolt transaction of a checkpoint writes.
const cpChunk = 16 << 20

// stateSize is about the bytes st takes encoded: its payloads and bodies,
// plus a little per branch.
func stateSize(st *state) int {
	n := 256 + len(st.g.CustomData) + len(st.g.QueryPrepared)
	for _, p := range st.g.Payloads {
		n += len(p)
	}
	for i := range st.bs {
		n += 64 + len(st.bs[i].URL) + len(st.bs[i].BinData)
	}
	return n
}

// wal is the log file appended to now. s.mu must be held.
func (s *Store) wal() *wal { return s.wals[s.active] }

// latest returns gid's newest state held in memory. s.mu must be held.
func (s *Store) latest(gid string) (*state, bool) {
	if st, ok := s.overlay[gid]; ok {
		return st, true
	}
	st, ok := s.frozen[gid]
	return st, ok
}

// checkpoint runs one checkpoint.
func (s *Store) checkpoint() error {
	s.cpMu.Lock()
	defer s.cpMu.Unlock()
	return s.checkpointCP()
}

// checkpointCP runs a checkpoint; s.cpMu must be held, s.mu must not.
func (s *Store) checkpointCP() error {
	old, frozen, err := s.freeze()
	if err != nil || frozen == nil {
		return err
	}
	// In key order: fewer page splits and a more sequential write.
	gids := make([]string, 0, len(frozen))
	for gid := range frozen {
		gids = append(gids, gid)
	}
	sort.Strings(gids)
	// In bolt transactions of at most cpChunk bytes: bolt holds every
	// value written and every page it dirtied in memory until its commit,
	// so one transaction for 64 MB of 1 MB sagas held them twice more
	// (issue 30). A crash between two of them is safe: the old file is
	// retired only after the last, and replaying it over states already in
	// bolt yields the same states (record.go).
	for len(gids) > 0 && err == nil {
		n, size := 0, 0
		for n < len(gids) && (n == 0 || size < cpChunk) {
			size += stateSize(frozen[gids[n]])
			n++
		}
		chunk := gids[:n]
		gids = gids[n:]
		err = s.db.Update(func(tx *bolt.Tx) error {
			for _, gid := range chunk {
				if err := put(tx, frozen[gid]); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err != nil {
		// The frozen states stay readable and live in the old file, which
		// the next checkpoint would start over: stop writing instead, so
		// that a restart replays both files.
		err = fmt.Errorf("dtx bolt store: checkpoint into bolt failed; restart the coordinator to replay the log: %w", err)
		s.mu.Lock()
		s.wal().broken = err
		s.cpEnd.Broadcast()
		s.mu.Unlock()
		return err
	}
	rerr := old.retire()
	s.mu.Lock()
	s.frozen = nil
	s.cpEnd.Broadcast()
	s.mu.Unlock()
	if rerr != nil {
		return fmt.Errorf("dtx bolt store: retire the write-ahead log: %w", rerr)
	}
	return nil
}

// freeze makes the overlay the frozen states and switches appends to the
// other file; it returns the file holding the frozen states, or nil
// states when there is nothing to checkpoint.
func (s *Store) freeze() (*wal, map[string]*state, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cpKicked = false
	if s.closed || len(s.overlay) == 0 {
		return nil, nil, nil
	}
	old := s.wal()
	// The other file was retired by the last checkpoint: start it over.
	if err := s.wals[1-s.active].reset(nextEpoch(old.epoch)); err != nil {
		return nil, nil, fmt.Errorf("dtx bolt store: start the write-ahead log over: %w", err)
	}
	s.frozen, s.overlay = s.overlay, map[string]*state{}
	s.active = 1 - s.active
	return old, s.frozen, nil
}

// replayWAL moves both log files' live records into bolt at open, older
// file first: together they hold exactly the acknowledged changes that
// no finished checkpoint covered. Then both are retired and one is reset.
func (s *Store) replayWAL() error {
	order := []*wal{s.wals[0], s.wals[1]}
	sort.Slice(order, func(i, j int) bool { return order[i].epoch < order[j].epoch })
	rtx, err := s.db.Begin(false)
	if err != nil {
		return err
	}
	for _, w := range order {
		err = w.replay(func(r *record) error {
			base, ok := s.overlay[r.G.Gid]
			if !ok {
				var err error
				if base, err = load(rtx, r.G.Gid); err != nil {
					return err
				}
			}
			st, err := r.apply(base)
			if err != nil {
				return err
			}
			s.overlay[r.G.Gid] = st
			return nil
		})
		if err != nil {
			break
		}
	}
	_ = rtx.Rollback()
	if err != nil {
		return err
	}
	if len(s.overlay) > 0 {
		if err := s.db.Update(func(tx *bolt.Tx) error {
			for _, st := range s.overlay {
				if err := put(tx, st); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
		s.overlay = map[string]*state{}
	}
	// Every intact record is in bolt now; torn tails (batches whose
	// fdatasync never returned, so never acknowledged) go with the rest.
	newest := max(s.wals[0].epoch, s.wals[1].epoch)
	if err := s.wals[1].retire(); err != nil {
		return err
	}
	s.active = 0
	return s.wals[0].reset(nextEpoch(newest))
}
