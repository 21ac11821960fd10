package main

import (
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/replicate"
)

// TestLiveLineNeverCutsAGTID: the status line was cut at the terminal's
// width, so gtid=0-1-123456 could show as gtid=0-1-123, another valid
// GTID. Fields that do not fit are left out whole.
func TestLiveLineNeverCutsAGTID(t *testing.T) {
	s := replicate.Status{Stage: "running", LagSeconds: 1.5, EventsPerSec: 1234, TxnsPerSec: 56,
		Applied: sluice.Position{File: "mysql-bin.000042", Pos: 123456789, GTIDSet: "0-1-123456,1-2-987654"}}
	full := liveLine(s, 500)
	if !strings.Contains(full, "gtid=0-1-123456,1-2-987654") || !strings.Contains(full, "1234 events/s") {
		t.Fatalf("wide terminal: %q", full)
	}
	for w := 2; w <= len(full)+2; w++ {
		line := liveLine(s, w)
		if len([]rune(line)) > w-1 {
			t.Fatalf("width %d: %q is too long", w, line)
		}
		if i := strings.Index(line, "gtid="); i >= 0 && !strings.HasSuffix(line[i:], "gtid=0-1-123456,1-2-987654") && !strings.Contains(line[i:], "gtid=0-1-123456,1-2-987654 ") {
			t.Fatalf("width %d: the GTID set is cut: %q", w, line)
		}
		if strings.Contains(line, "applied ") && !strings.Contains(line, "applied mysql-bin.000042:123456789") {
			t.Fatalf("width %d: the position is cut: %q", w, line)
		}
		if w >= 20 && !strings.HasPrefix(line, "running | lag 1.5 s") {
			t.Fatalf("width %d: stage and lag must stay: %q", w, line)
		}
	}
	// A 90-column terminal keeps stage, lag, position and GTID.
	if l := liveLine(s, 90); !strings.Contains(l, "gtid=0-1-123456,1-2-987654") || !strings.Contains(l, "applied mysql-bin.000042:123456789") {
		t.Fatalf("90 columns: %q", l)
	}
}
