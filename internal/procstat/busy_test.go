package procstat

import (
	"math"
	"testing"
	"time"
)

// The host's load is unknown (1: no say in the commit wait) until sampled,
// then a share between 0 and 1.
func TestBusy(t *testing.T) {
	h := NewBusy()
	if h.Load() != 1 {
		t.Fatalf("unknown load reads %v", h.Load())
	}
	if _, _, ok := CPU(); !ok {
		t.Skip("no /proc/stat on this system")
	}
	done := make(chan struct{})
	go h.Run(done, 10*time.Millisecond)
	defer close(done)
	for i := 0; i < 500 && math.IsNaN(math.Float64frombits(h.busy.Load())); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if v := h.Load(); v < 0 || v > 1 || math.IsNaN(math.Float64frombits(h.busy.Load())) {
		t.Fatalf("load %v after sampling", v)
	}
}
