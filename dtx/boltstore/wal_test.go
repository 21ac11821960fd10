package boltstore

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-db/sluice/dtx"
)

func saga(gid, status, owner string, now time.Time) *dtx.Global {
	return &dtx.Global{Gid: gid, TransType: dtx.TypeSaga, Status: status, Owner: owner, CreateTime: now, UpdateTime: now,
		NextCronTime: now, Steps: []map[string]string{{"action": "http://a/x", "compensate": "http://a/y"}}, Payloads: []string{"{}"}}
}

// crash drops the store the way kill -9 does: no checkpoint, files closed.
func crash(t *testing.T, s *Store) {
	t.Helper()
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	if err := s.closeFiles(); err != nil {
		t.Fatal(err)
	}
}

func mustApply(t *testing.T, s *Store, muts ...*dtx.Mutation) {
	t.Helper()
	errs, err := s.Apply(context.Background(), muts)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if e != nil {
			t.Fatalf("mutation %d (%s): %v", i, muts[i].Gid, e)
		}
	}
}

// TestWALSurvivesCrash: changes acknowledged by Apply but never
// checkpointed into bolt are back after a crash, on top of checkpointed
// ones, and a torn record at the end of the log is dropped.
func TestWALSurvivesCrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dtx.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	g1 := saga("g1", dtx.StatusSubmitted, "o", now)
	mustApply(t, s, &dtx.Mutation{Gid: "g1", Create: true, Global: g1, NewBranches: dtx.GenBranches(g1)})
	if err := s.checkpoint(); err != nil { // g1 now lives in bolt
		t.Fatal(err)
	}
	done := saga("g1", dtx.StatusSucceed, "o", now)
	done.NextCronTime, done.FinishTime = time.Time{}, now
	g2 := saga("g2", dtx.StatusSubmitted, "o", now)
	mustApply(t, s,
		&dtx.Mutation{Gid: "g1", Global: done, IfStatus: []string{dtx.StatusSubmitted}, IfOwner: "o",
			BranchUpdates: []dtx.BranchUpdate{{BranchID: "01", Op: dtx.OpAction, Status: dtx.StatusSucceed, FinishTime: now}}},
		&dtx.Mutation{Gid: "g2", Create: true, Global: g2, NewBranches: dtx.GenBranches(g2)})
	// An update of g2 while it is only in the log: its record is a delta
	// (no body, branch status changes only).
	g2b := g2.Clone()
	g2b.Status, g2b.Owner = dtx.StatusAborting, "o2"
	before := s.wal().off
	mustApply(t, s, &dtx.Mutation{Gid: "g2", Global: g2b, IfOwner: "o",
		BranchUpdates: []dtx.BranchUpdate{{BranchID: "01", Op: dtx.OpAction, Status: dtx.StatusFailed, FinishTime: now}}})
	if n := s.wal().off - before; n > 600 {
		t.Errorf("the delta record took %d bytes", n)
	}
	// A batch torn by the crash: a record of this epoch promising more
	// than was written.
	torn, err := s.wal().encode(nil, &record{G: saga("g3", dtx.StatusSubmitted, "o", now)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.wal().f.WriteAt(torn[:len(torn)-5], s.wal().off); err != nil {
		t.Fatal(err)
	}
	crash(t, s)

	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.wal().off != walHeader {
		t.Errorf("log not emptied by the replay: next record at %d", s.wal().off)
	}
	if _, _, err := s.Get(context.Background(), "g3"); !errors.Is(err, dtx.ErrNotFound) {
		t.Errorf("torn record replayed: %v", err)
	}
	g, bs, err := s.Get(context.Background(), "g1")
	if err != nil || g.Status != dtx.StatusSucceed || len(bs) != 2 || bs[1].Status != dtx.StatusSucceed || bs[0].Status != dtx.StatusPrepared {
		t.Errorf("g1 after the crash: %+v %+v %v", g, bs, err)
	}
	g, bs, err = s.Get(context.Background(), "g2")
	if err != nil || g.Status != dtx.StatusAborting || g.Owner != "o2" || len(g.Steps) != 1 || g.Steps[0]["action"] != "http://a/x" ||
		len(g.Payloads) != 1 || len(bs) != 2 || bs[1].Status != dtx.StatusFailed || bs[1].URL != "http://a/x" || bs[0].Status != dtx.StatusPrepared {
		t.Errorf("g2 after the crash: %+v %+v %v", g, bs, err)
	}
	// The replayed state is in bolt's indexes: g2 is due, g1 is not.
	claimed, err := s.Claim(context.Background(), "t", now.Add(time.Hour), now.Add(2*time.Hour), 10)
	if err != nil || len(claimed) != 1 || claimed[0].Gid != "g2" {
		t.Errorf("claim after the crash: %+v %v", claimed, err)
	}
}

// TestOverlayVisibleToIndexes: a transaction that is only in the log yet
// is claimable, listable and purgeable, and its preconditions hold against
// the overlay, not against bolt's older copy.
func TestOverlayVisibleToIndexes(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "dtx.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	now := time.Now().UTC()
	g := saga("x", dtx.StatusSubmitted, "o", now)
	mustApply(t, s, &dtx.Mutation{Gid: "x", Create: true, Global: g, NewBranches: dtx.GenBranches(g)})
	errs, err := s.Apply(ctx, []*dtx.Mutation{{Gid: "x", Create: true, Global: g}})
	if err != nil || !errors.Is(errs[0], dtx.ErrExists) {
		t.Errorf("second create: %v %v", errs, err)
	}
	claimed, err := s.Claim(ctx, "t2", now.Add(time.Second), now.Add(time.Minute), 10)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %+v %v", claimed, err)
	}
	// The old owner lost the lease to the claim, which went to bolt.
	errs, err = s.Apply(ctx, []*dtx.Mutation{{Gid: "x", Global: saga("x", dtx.StatusAborting, "o", now), IfOwner: "o"}})
	var ce *dtx.ConflictError
	if err != nil || !errors.As(errs[0], &ce) || !ce.LostLease {
		t.Errorf("update by the old owner: %v %v", errs, err)
	}
	fin := saga("x", dtx.StatusFailed, "t2", now)
	fin.NextCronTime, fin.FinishTime = time.Time{}, now
	mustApply(t, s, &dtx.Mutation{Gid: "x", Global: fin, IfOwner: "t2"})
	if l, err := s.List(ctx, "", 10, dtx.StatusFailed, ""); err != nil || len(l) != 1 {
		t.Errorf("list: %+v %v", l, err)
	}
	if n, err := s.Purge(ctx, now.Add(time.Second), 10); err != nil || n != 1 {
		t.Errorf("purge: %d %v", n, err)
	}
	if _, _, err := s.Get(ctx, "x"); !errors.Is(err, dtx.ErrNotFound) {
		t.Errorf("get after purge: %v", err)
	}
}

// TestOldEpochNotReplayed: records that a checkpoint moved into bolt stay
// in the file, but after a crash they are not replayed over the newer state
// that bolt got directly (here a Claim's lease).
func TestOldEpochNotReplayed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dtx.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now().UTC()
	g := saga("y", dtx.StatusSubmitted, "o", now)
	mustApply(t, s, &dtx.Mutation{Gid: "y", Create: true, Global: g, NewBranches: dtx.GenBranches(g)})
	if claimed, err := s.Claim(ctx, "t2", now.Add(time.Second), now.Add(time.Minute), 10); err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %+v %v", claimed, err)
	}
	crash(t, s)
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if g, _, err := s.Get(ctx, "y"); err != nil || g.Owner != "t2" {
		t.Errorf("after the crash: %+v %v (want the claim's owner t2)", g, err)
	}
}

// TestCrashDuringCheckpoint: a crash after a checkpoint switched files but
// before bolt had the frozen states replays both files, older first, and
// states are readable from the frozen set meanwhile.
func TestCrashDuringCheckpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dtx.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now().UTC()
	g := saga("z", dtx.StatusSubmitted, "o", now)
	mustApply(t, s, &dtx.Mutation{Gid: "z", Create: true, Global: g, NewBranches: dtx.GenBranches(g)})
	if _, frozen, err := s.freeze(); err != nil || len(frozen) != 1 {
		t.Fatalf("freeze: %v %v", frozen, err)
	}
	if got, _, err := s.Get(ctx, "z"); err != nil || got.Status != dtx.StatusSubmitted {
		t.Errorf("read while frozen: %+v %v", got, err)
	}
	// An update judged against the frozen state, logged in the other file.
	up := g.Clone()
	up.Status = dtx.StatusAborting
	mustApply(t, s, &dtx.Mutation{Gid: "z", Global: up, IfStatus: []string{dtx.StatusSubmitted}, IfOwner: "o",
		BranchUpdates: []dtx.BranchUpdate{{BranchID: "01", Op: dtx.OpAction, Status: dtx.StatusFailed, FinishTime: now}}})
	crash(t, s)
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, bs, err := s.Get(ctx, "z")
	if err != nil || got.Status != dtx.StatusAborting || len(got.Steps) != 1 || len(bs) != 2 || bs[1].Status != dtx.StatusFailed {
		t.Errorf("after the crash: %+v %+v %v", got, bs, err)
	}
}
