// Package procstat reads CPU time, memory and process state from Linux's
// /proc through prometheus/procfs, for the coordinator's commit wait, the
// task lock, the sandboxes and the benchmarks' figures. It is the one place
// that reads /proc; every function answers "unknown" (zero, false) where
// /proc cannot be read.
package procstat

import (
	"github.com/prometheus/procfs"
)

// userHZ is the unit of the kernel's CPU counters; procfs converts them to
// seconds, and callers here count clock ticks.
const userHZ = 100

// CPU returns the machine's busy and idle CPU time so far, in clock ticks;
// ok is false where /proc/stat cannot be read.
func CPU() (busy, idle float64, ok bool) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return 0, 0, false
	}
	st, err := fs.Stat()
	if err != nil {
		return 0, 0, false
	}
	busy, idle = split(st.CPUTotal)
	return busy * userHZ, idle * userHZ, true
}

// split: busy is user, nice, system, irq, softirq and steal; idle is idle
// and iowait (guest time is already in user).
func split(c procfs.CPUStat) (busy, idle float64) {
	return c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ + c.Steal, c.Idle + c.Iowait
}

func proc(pid int) (procfs.Proc, bool) {
	if pid <= 0 {
		return procfs.Proc{}, false
	}
	p, err := procfs.NewProc(pid)
	return p, err == nil
}

// ProcessCPU is a process's CPU time (user + system) in seconds; 0 when it
// cannot be read (pid 0, no such process, not Linux).
func ProcessCPU(pid int) float64 {
	p, ok := proc(pid)
	if !ok {
		return 0
	}
	st, err := p.Stat()
	if err != nil {
		return 0
	}
	return st.CPUTime()
}

// State is a process's one-letter state (R, S, D, Z, X, ...), "" when
// unknown: no such process, or not Linux.
func State(pid int) string {
	p, ok := proc(pid)
	if !ok {
		return ""
	}
	st, err := p.Stat()
	if err != nil {
		return ""
	}
	return st.State
}

// Comm is a process's command name, "" when unknown.
func Comm(pid int) string {
	p, ok := proc(pid)
	if !ok {
		return ""
	}
	c, err := p.Comm()
	if err != nil {
		return ""
	}
	return c
}

// Machine is the first CPU's model name and the memory size in MB ("" and
// 0 when unknown), for benchmark reports.
func Machine() (cpuModel string, memoryMB int64) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return "", 0
	}
	if ci, err := fs.CPUInfo(); err == nil && len(ci) > 0 {
		cpuModel = ci[0].ModelName
	}
	if mi, err := fs.Meminfo(); err == nil && mi.MemTotal != nil {
		memoryMB = int64(*mi.MemTotal / 1024)
	}
	return cpuModel, memoryMB
}
