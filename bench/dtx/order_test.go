package main

import (
	"strings"
	"testing"
)

func names(rs []row) string {
	var n []string
	for _, r := range rs {
		n = append(n, r.name)
	}
	return strings.Join(n, "|")
}

func TestRoundOrderRotatesAndKeepsTwinsTogether(t *testing.T) {
	sel := []row{
		{name: "no coordinator, 2 SQL", sql: 2},
		{name: "sluice, 2 SQL", coordinator: "sluice", sql: 2},
		{name: "sluice B, 2 SQL", coordinator: "sluice-b", sql: 2},
		{name: "dtm, 2 SQL", coordinator: "dtm", sql: 2},
	}
	want := []string{
		"no coordinator, 2 SQL|sluice, 2 SQL|sluice B, 2 SQL|dtm, 2 SQL",
		"sluice B, 2 SQL|sluice, 2 SQL|dtm, 2 SQL|no coordinator, 2 SQL",
		"dtm, 2 SQL|no coordinator, 2 SQL|sluice, 2 SQL|sluice B, 2 SQL",
		"no coordinator, 2 SQL|sluice B, 2 SQL|sluice, 2 SQL|dtm, 2 SQL",
	}
	for i, w := range want {
		if got := names(roundOrder(sel, i+1)); got != w {
			t.Errorf("round %d: got %s, want %s", i+1, got, w)
		}
	}
	if got := names(sel); got != want[0] {
		t.Errorf("roundOrder changed its input: %s", got)
	}
}
