package binlog

import (
	"fmt"
	"testing"

	"github.com/sluice-db/sluice"
)

// TestServerIDFor: a task's default server-id comes from its name, stays
// in the range sluice reserves, and differs between task names.
func TestServerIDFor(t *testing.T) {
	seen := map[uint32]string{}
	for i := 0; i < 1000; i++ {
		name := fmt.Sprintf("task-%d", i)
		id := ServerIDFor(name)
		if id < DefaultServerID || id != ServerIDFor(name) {
			t.Fatalf("ServerIDFor(%q) = %d", name, id)
		}
		if other, ok := seen[id]; ok {
			t.Fatalf("tasks %q and %q share server-id %d", other, name, id)
		}
		seen[id] = name
	}
}

// TestDescribePos: a start by GTID names the GTID set, not ":0".
func TestDescribePos(t *testing.T) {
	for pos, want := range map[sluice.Position]string{
		{File: "mysql-bin.000002", Pos: 4}: "mysql-bin.000002:4",
		{GTIDSet: "0-1-7"}:                 "GTID position 0-1-7",
		{}:                                 "the task's start position",
	} {
		if got := describePos(pos); got != want {
			t.Errorf("describePos(%+v) = %q, want %q", pos, got, want)
		}
	}
}
