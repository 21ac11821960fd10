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
		want  string
	}{
		{"none", []TableSpec{spec("a"), spec("b")}, "[]"},
		// Links are given from both sides; one side alone joins too.
		{"pair", []TableSpec{spec("p", "c"), spec("c", "p"), spec("x")}, "[[0 1]]"},
		{"one side", []TableSpec{spec("c", "p"), spec("x"), spec("p")}, "[[0 2]]"},
		// A chain through a middle table is one group.
		{"chain", []TableSpec{spec("a", "b"), spec("z"), spec("b", "a", "c"), spec("c", "b")}, "[[0 2 3]]"},
		{"two groups", []TableSpec{spec("a", "b"), spec("c", "d"), spec("b", "a"), spec("d", "c")}, "[[0 2] [1 3]]"},
		// A table whose key references its own rows is a group alone.
		{"self", []TableSpec{spec("t", "t"), spec("u")}, "[[0]]"},
		// A table outside the task joins nothing: the task must not
		// touch it, and two selected tables linked only through it stay
		// apart.
		{"outside", []TableSpec{spec("a", "out"), spec("b", "out")}, "[]"},
	} {
		if got := fmt.Sprint(fkGroups(c.specs)); got != c.want {
			t.Errorf("%s: groups %s, want %s", c.name, got, c.want)
		}
	}
}
