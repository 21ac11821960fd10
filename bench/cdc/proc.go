package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-db/sluice/internal/procstat"
)

// procCPU is a process's CPU seconds (procstat.ProcessCPU).
func procCPU(pid int) float64 { return procstat.ProcessCPU(pid) }

// rssMB is the process's resident set (VmRSS) in MB, 0 when unknown.
func rssMB(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// rssPeak samples VmRSS every 50 ms: the peak over the window, where
// VmHWM would give the peak over the process's whole life (every earlier
// row of the run).
type rssPeak struct {
	stopc chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	peak  float64
}

func startRSS(pid int) *rssPeak {
	r := &rssPeak{stopc: make(chan struct{})}
	if pid <= 0 {
		return r
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			v := rssMB(pid)
			r.mu.Lock()
			r.peak = max(r.peak, v)
			r.mu.Unlock()
			select {
			case <-r.stopc:
				return
			case <-t.C:
			}
		}
	}()
	return r
}

func (r *rssPeak) stop() float64 {
	close(r.stopc)
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.peak
}
