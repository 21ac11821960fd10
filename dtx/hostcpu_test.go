package dtx

import (
	"math"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	busy, idle, ok := parseProcStat([]byte("cpu  100 5 50 800 20 1 4 2 7 0\ncpu0 1 2 3 4 5 6 7 8\n"))
	if !ok || busy != 100+5+50+1+4+2 || idle != 800+20 {
		t.Fatalf("busy %v idle %v ok %v", busy, idle, ok)
	}
	for _, bad := range []string{"", "intr 1 2 3", "cpu 1 2 x 4 5", "cpu 1 2"} {
		if _, _, ok := parseProcStat([]byte(bad)); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

// The host's load is unknown (1: no say in the commit wait) until sampled,
// then a share between 0 and 1.
func TestHostCPU(t *testing.T) {
	h := newHostCPU()
	if h.load() != 1 {
		t.Fatalf("unknown load reads %v", h.load())
	}
	if _, _, ok := readProcStat(); !ok {
		t.Skip("no /proc/stat on this system")
	}
	done := make(chan struct{})
	go h.run(done, 10*time.Millisecond)
	defer close(done)
	for i := 0; i < 500 && math.IsNaN(math.Float64frombits(h.busy.Load())); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if v := h.load(); v < 0 || v > 1 || math.IsNaN(math.Float64frombits(h.busy.Load())) {
		t.Fatalf("load %v after sampling", v)
	}
}
