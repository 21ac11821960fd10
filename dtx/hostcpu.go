package dtx

import (
	"bytes"
	"math"
	"os"
	"strconv"
	"sync/atomic"
	"time"
)

// hostCPU tracks how busy the host's CPUs are, from /proc/stat, for the
// commit wait: waiting for company trades latency for CPU, which pays only
// when CPU is scarce. On the benchmark host, with 10 clients, waiting made
// 2-SQL sagas faster (the host 84 % busy) and sagas without business SQL
// 25 % slower (47 % busy: nothing to gain, only latency).
type hostCPU struct {
	busy atomic.Uint64 // float64 bits: busy share, 0..1; NaN until known
}

func newHostCPU() *hostCPU {
	h := &hostCPU{}
	h.busy.Store(math.Float64bits(math.NaN()))
	return h
}

// load is the recent busy share, or 1 when it is not known (no /proc/stat):
// then the other conditions alone decide.
func (h *hostCPU) load() float64 {
	v := math.Float64frombits(h.busy.Load())
	if math.IsNaN(v) {
		return 1
	}
	return v
}

// run samples /proc/stat every interval until done is closed. Each sample
// weighs a half, so a change of load shows within two or three samples.
func (h *hostCPU) run(done <-chan struct{}, interval time.Duration) {
	b0, i0, ok := readProcStat()
	if !ok {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		b1, i1, ok := readProcStat()
		if !ok {
			return
		}
		if d := (b1 - b0) + (i1 - i0); d > 0 {
			share := (b1 - b0) / d
			if old := math.Float64frombits(h.busy.Load()); !math.IsNaN(old) {
				share = (old + share) / 2
			}
			h.busy.Store(math.Float64bits(share))
		}
		b0, i0 = b1, i1
	}
}

func readProcStat() (busy, idle float64, ok bool) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	return parseProcStat(data)
}

// parseProcStat reads the "cpu" line: busy is user, nice, system, irq,
// softirq and steal; idle is idle and iowait (guest time is in user).
func parseProcStat(data []byte) (busy, idle float64, ok bool) {
	line, _, _ := bytes.Cut(data, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 5 || string(f[0]) != "cpu" {
		return 0, 0, false
	}
	for i, v := range f[1:] {
		if i >= 8 {
			break
		}
		x, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return 0, 0, false
		}
		if i == 3 || i == 4 {
			idle += x
		} else {
			busy += x
		}
	}
	return busy, idle, true
}
