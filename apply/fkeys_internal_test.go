package apply

import "testing"

// TestBarrierConflicts: a barrier group (a change that cascades through a
// foreign key) overlaps every uncommitted group, and every later group
// overlaps it until it commits, whatever their writesets.
func TestBarrierConflicts(t *testing.T) {
	a := &Applier{owner: map[uint64]*unit{}, workers: make([]*worker, 3), uncommitted: make([]int, 3)}
	plain := &unit{worker: 0, keys: []uint64{1}}
	a.owner[1] = plain
	a.uncommitted[0] = 1
	b := &unit{barrier: true, keys: []uint64{2}}
	if w1, w2 := a.conflicts(b); w1 != 0 || w2 != -1 {
		t.Fatalf("barrier with one worker busy: %d, %d; want 0, -1 (behind it)", w1, w2)
	}
	a.uncommitted[2] = 1
	if _, w2 := a.conflicts(b); w2 < 0 {
		t.Fatalf("barrier with two workers busy does not wait")
	}
	// Dispatched on worker 1, uncommitted: later groups go behind it.
	a.uncommitted = []int{0, 1, 0}
	b.worker, a.barrierU = 1, b
	later := &unit{keys: []uint64{3}}
	if w1, w2 := a.conflicts(later); w1 != 1 || w2 != -1 {
		t.Fatalf("a group after an uncommitted barrier: %d, %d; want 1, -1", w1, w2)
	}
	a.owner[1], plain.worker = plain, 2
	later.keys = []uint64{1}
	if _, w2 := a.conflicts(later); w2 < 0 {
		t.Fatalf("a group overlapping the barrier's worker and another does not wait")
	}
	// Committed: the barrier is gone.
	a.uncommitted[1]--
	a.barrierU = nil
	later.keys = []uint64{3}
	if w1, w2 := a.conflicts(later); w1 != -1 || w2 != -1 {
		t.Fatalf("after the barrier committed: %d, %d; want -1, -1", w1, w2)
	}
}
