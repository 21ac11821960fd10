package sluice_test

import (
	"testing"

	"github.com/sluice-db/sluice"
)

func TestPositionCompare(t *testing.T) {
	pos := func(f string, o uint32) sluice.Position { return sluice.Position{File: f, Pos: o} }
	cases := []struct {
		a, b sluice.Position
		want int
	}{
		{pos("mysql-bin.000001", 4), pos("mysql-bin.000001", 4), 0},
		{pos("mysql-bin.000001", 4), pos("mysql-bin.000001", 5), -1},
		{pos("mysql-bin.000001", 900), pos("mysql-bin.000002", 4), -1},
		// The bug: as text, "999999" sorts after "1000000".
		{pos("mysql-bin.999999", 4000), pos("mysql-bin.1000000", 4), -1},
		{pos("mysql-bin.1000000", 4), pos("mysql-bin.999999", 4000), 1},
		{pos("mysql-bin.000010", 4), pos("mysql-bin.000009", 99999), 1},
		// Zero padding differs, same number: the offset decides.
		{pos("mysql-bin.000010", 4), pos("mysql-bin.10", 8), -1},
		// Dots in the base name: only the last dot splits.
		{pos("host.example.bin.000002", 4), pos("host.example.bin.000010", 4), -1},
		// An empty position is the start.
		{pos("", 0), pos("mysql-bin.000001", 4), -1},
		{pos("mysql-bin.000001", 4), pos("", 0), 1},
		{pos("", 0), pos("", 0), 0},
		// Different sequences: ordered by name as text (total, not meaningful).
		{pos("a-bin.000002", 4), pos("b-bin.000001", 4), -1},
		{pos("b-bin.000001", 4), pos("a-bin.000002", 4), 1},
		{pos("relay", 4), pos("relay.000001", 4), -1},
	}
	for _, c := range cases {
		if got := c.a.Compare(c.b); got != c.want {
			t.Errorf("%s.Compare(%s) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := c.b.Compare(c.a); got != -c.want {
			t.Errorf("%s.Compare(%s) = %d, want %d (antisymmetry)", c.b, c.a, got, -c.want)
		}
	}
}

func TestPositionSameSequence(t *testing.T) {
	pos := func(f string) sluice.Position { return sluice.Position{File: f, Pos: 4} }
	cases := []struct {
		a, b string
		want bool
	}{
		{"mysql-bin.000001", "mysql-bin.1000000", true},
		{"mysql-bin.000001", "other-bin.000001", false},
		{"mysql-bin.000001", "", true},
		{"mysql-bin", "mysql-bin", false},
		{"mysql-bin.0001x", "mysql-bin.000001", false},
	}
	for _, c := range cases {
		if got := pos(c.a).SameSequence(pos(c.b)); got != c.want {
			t.Errorf("SameSequence(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
