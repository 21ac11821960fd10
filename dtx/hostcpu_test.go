package dtx

import (
	"math"
	"testing"
	"time"

	"github.com/sluice-db/sluice/internal/procstat"
)

// The host's load is unknown (1: no say in the commit wait) until sampled,
// then a share between 0 and 1.
func TestHostCPU(t *testing.T) {
	h := newHostCPU()
	if h.load() != 1 {
		t.Fatalf("unknown load reads %v", h.load())
	}
	if _, _, ok := procstat.CPU(); !ok {
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
