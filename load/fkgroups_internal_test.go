package load

import (
	"fmt"
	"testing"

	"github.com/sluice-db/sluice"
)

func TestFKGroups(t *testing.T) {
	ref := func(n string) sluice.TableRef { return sluice.TableRef{Schema: "d", Name: n} }
	spec := func(n string, links ...string) TableSpec {
		s := TableSpec{Table: &sluice.Table{Ref: ref(n)}}
		for _, l := range links {
			s.Links = append(s.Links, ref(l))
		}
		return s
	}
	for _, c := range []struct {
		name  string
		specs []TableSpec
		extra [][2]int
		want  string
	}{
		{"none", []TableSpec{spec("a"), spec("b")}, nil, "[]"},
		// Links are given from both sides; one side alone joins too.
		{"pair", []TableSpec{spec("p", "c"), spec("c", "p"), spec("x")}, nil, "[[0 1]]"},
		{"one side", []TableSpec{spec("c", "p"), spec("x"), spec("p")}, nil, "[[0 2]]"},
		// A chain through a middle table is one group.
		{"chain", []TableSpec{spec("a", "b"), spec("z"), spec("b", "a", "c"), spec("c", "b")}, nil, "[[0 2 3]]"},
		{"two groups", []TableSpec{spec("a", "b"), spec("c", "d"), spec("b", "a"), spec("d", "c")}, nil, "[[0 2] [1 3]]"},
		// The target's keys (an earlier run's) join as the source's do.
		{"target", []TableSpec{spec("a"), spec("b"), spec("c", "a")}, [][2]int{{1, 0}}, "[[0 1 2]]"},
		{"target self", []TableSpec{spec("a"), spec("b")}, [][2]int{{1, 1}}, "[[1]]"},
		// A table whose key references its own rows is a group alone.
		{"self", []TableSpec{spec("t", "t"), spec("u")}, nil, "[[0]]"},
		// A table outside the task joins nothing: the task must not
		// touch it, and two selected tables linked only through it stay
		// apart.
		{"outside", []TableSpec{spec("a", "out"), spec("b", "out")}, nil, "[]"},
	} {
		if got := fmt.Sprint(fkGroups(c.specs, c.extra)); got != c.want {
			t.Errorf("%s: groups %s, want %s", c.name, got, c.want)
		}
	}
}
