package procstat

import (
	"sync"
	"time"
)

// RSSMB is a process's resident set (VmRSS) in MB, 0 when unknown (no
// such process, or not Linux).
func RSSMB(pid int) float64 {
	p, ok := proc(pid)
	if !ok {
		return 0
	}
	st, err := p.NewStatus()
	if err != nil {
		return 0
	}
	return float64(st.VmRSS) / (1 << 20)
}

// PeakRSS samples a process's VmRSS every 50 ms: the peak over a window,
// where VmHWM would give the peak over the process's whole life (a
// benchmark's earlier rows included).
type PeakRSS struct {
	stopc chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	peak  float64
}

// StartPeakRSS starts sampling pid (nothing for pid <= 0).
func StartPeakRSS(pid int) *PeakRSS {
	r := &PeakRSS{stopc: make(chan struct{})}
	if pid <= 0 {
		return r
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			r.Sample(RSSMB(pid))
			select {
			case <-r.stopc:
				return
			case <-t.C:
			}
		}
	}()
	return r
}

// Sample records one reading.
func (r *PeakRSS) Sample(mb float64) {
	r.mu.Lock()
	r.peak = max(r.peak, mb)
	r.mu.Unlock()
}

// Stop ends the sampling and returns the peak in MB.
func (r *PeakRSS) Stop() float64 {
	close(r.stopc)
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.peak
}
