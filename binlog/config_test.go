package binlog

import (
	"fmt"
	"testing"
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
