package dump

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/chunk"
)

// TestJobOrder: whole tables come first in waves of WholeWave tables with
// their chunks interleaved, then the other tables interleaved; done
// chunks are skipped.
func TestJobOrder(t *testing.T) {
	mk := func(name string, n int) *TablePlan {
		tp := &TablePlan{Table: &sluice.Table{Ref: sluice.TableRef{Schema: "s", Name: name}}}
		for i := 0; i < n; i++ {
			tp.Chunks = append(tp.Chunks, chunk.Range{Index: i})
		}
		return tp
	}
	d := &Dumper{tables: []*TablePlan{mk("a", 2), mk("b", 3), mk("c", 1), mk("x", 2), mk("y", 2)}}
	d.cfg.WholeTable = func(r sluice.TableRef) bool { return r.Name < "x" }
	d.cfg.WholeWave = 2
	d.cfg.Done = func(r sluice.TableRef, i int) bool { return r.Name == "y" && i == 0 }
	var got []string
	for _, j := range d.jobs() {
		got = append(got, fmt.Sprintf("%s%d", j.tp.Table.Ref.Name, j.r.Index))
	}
	want := "a0 b0 a1 b1 b2 c0 x0 x1 y1"
	if strings.Join(got, " ") != want {
		t.Fatalf("job order %v, want %s", got, want)
	}
}
