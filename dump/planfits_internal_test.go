package dump

import (
	"errors"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/chunk"
)

// A stored plan cut on a key that a DDL dropped while the copy was stopped
// is refused with the way out; reading it panicked in sqlgen.KeyRange
// (difftest seed 5: DROP INDEX uk made the table keyless between two
// snapshots).
func TestStoredPlanMustFitTheKey(t *testing.T) {
	keyed := &sluice.Table{Ref: sluice.TableRef{Schema: "d", Name: "t"}, Columns: []sluice.Column{{Name: "id"}, {Name: "v"}}, PK: []int{0}}
	keyless := &sluice.Table{Ref: keyed.Ref, Columns: keyed.Columns}
	plan := []chunk.Range{{Index: 0, Hi: []any{int64(100)}}, {Index: 1, Lo: []any{int64(100)}}}
	if err := planFits(keyed, plan); err != nil {
		t.Fatalf("a plan on the table's own key: %v", err)
	}
	err := planFits(keyless, plan)
	if !errors.Is(err, ErrChangedAfterSnapshot) {
		t.Fatalf("a plan cut on a key the table no longer has: %v", err)
	}
	if err := planFits(keyless, []chunk.Range{{Index: 0}}); err != nil {
		t.Fatalf("a keyless table's one-chunk plan: %v", err)
	}
	twoCols := &sluice.Table{Ref: keyed.Ref, Columns: keyed.Columns, PK: []int{0, 1}}
	if planFits(twoCols, plan) == nil {
		t.Fatal("a one-column plan for a two-column key was taken")
	}
}
