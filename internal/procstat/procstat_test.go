package procstat

import (
	"os"
	"testing"

	"github.com/prometheus/procfs"
)

func TestSplit(t *testing.T) {
	busy, idle := split(procfs.CPUStat{User: 1, Nice: 0.05, System: 0.5, Idle: 8, Iowait: 0.2, IRQ: 0.01, SoftIRQ: 0.04, Steal: 0.02, Guest: 7})
	if want := 1 + 0.05 + 0.5 + 0.01 + 0.04 + 0.02; busy < want-1e-9 || busy > want+1e-9 || idle != 8.2 {
		t.Fatalf("busy %v idle %v", busy, idle)
	}
}

func TestSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	pid := os.Getpid()
	if s := State(pid); s != "R" && s != "S" {
		t.Errorf("own state %q", s)
	}
	if m, mb := Machine(); Comm(pid) == "" || ProcessCPU(pid) < 0 || RSSMB(pid) <= 0 || m == "" || mb <= 0 {
		t.Errorf("comm %q cpu %v rss %v", Comm(pid), ProcessCPU(pid), RSSMB(pid))
	}
	if _, _, ok := CPU(); !ok {
		t.Error("no machine CPU")
	}
	for _, bad := range []int{0, -1, 1 << 30} {
		if State(bad) != "" || Comm(bad) != "" || ProcessCPU(bad) != 0 || RSSMB(bad) != 0 {
			t.Errorf("pid %d: not unknown", bad)
		}
	}
}
