package dtx

import (
	"testing"
	"time"
)

// TestTracePhases: a saga's marks split its time into the named phases,
// each the gap between two marks in the order they happened, and the
// phases add up to the whole; shapes the phases do not name give nothing.
func TestTracePhases(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	saga := []traceMark{
		{markEnqueue, at(1)}, {markApplyStart, at(3)}, {markApplyEnd, at(6)}, {markDurable, at(10)},
		{markBranchStart, at(15)}, {markBranchEnd, at(21)}, {markBranchStart, at(28)}, {markBranchEnd, at(36)},
		{markEnqueue, at(45)}, {markWaitStart, at(48)}, {markWaitEnd, at(50)}, {markApplyStart, at(55)}, {markApplyEnd, at(66)}, {markDurable, at(78)},
	}
	tr := NewTrace(t0)
	for _, m := range saga {
		tr.mark(m.kind, m.at)
	}
	ph, ok := tr.phases(at(91))
	if !ok {
		t.Fatal("a saga stored twice with two sequential actions was not traced")
	}
	want := map[int]int{
		phaseRequest: 1, phaseSubmitQueue: 2, phaseSubmitWrite: 3, phaseSubmitWakeup: 4, phaseToFirstBranch: 5,
		phaseBranchCalls: 6 + 8, phaseBetweenBranches: 7, phaseToFinalCommit: 9, phaseFinalQueue: 3 + 5, phaseFinalWait: 2,
		phaseFinalWrite: 11, phaseFinalWakeup: 12, phaseAnswer: 13,
	}
	var sum time.Duration
	for p, d := range ph {
		sum += d
		if d != time.Duration(want[p])*time.Millisecond {
			t.Errorf("phase %s: %v, want %d ms", phaseNames[p], d, want[p])
		}
	}
	if sum != 91*time.Millisecond {
		t.Errorf("phases add up to %v, want the whole 91ms", sum)
	}

	bad := map[string]func(tr *Trace){
		"one commit (answered before the outcome)": func(tr *Trace) {
			for _, m := range saga[:4] { // the submit's commit only
				tr.mark(m.kind, m.at)
			}
		},
		"a third commit (a rollback)": func(tr *Trace) {
			for _, m := range saga {
				tr.mark(m.kind, m.at)
			}
			for _, m := range saga[8:14] {
				tr.mark(m.kind, m.at.Add(time.Second))
			}
		},
		"spoiled (concurrent actions)": func(tr *Trace) {
			for _, m := range saga {
				tr.mark(m.kind, m.at)
			}
			tr.spoil()
		},
		"a branch before the first commit": func(tr *Trace) {
			tr.mark(markBranchStart, at(1))
			tr.mark(markBranchEnd, at(2))
			for _, m := range saga {
				tr.mark(m.kind, m.at)
			}
		},
	}
	for name, f := range bad {
		tr := NewTrace(t0)
		f(tr)
		if _, ok := tr.phases(at(200)); ok {
			t.Errorf("%s: traced", name)
		}
	}
	var nilTrace *Trace
	nilTrace.mark(markEnqueue, t0) // no trace: no-ops
	nilTrace.spoil()
}
