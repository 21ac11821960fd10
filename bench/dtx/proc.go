package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/sluice-db/sluice/internal/procstat"
)

// procCPU is a process's CPU seconds (procstat.ProcessCPU).
func procCPU(pid int) float64 { return procstat.ProcessCPU(pid) }

// machineCPU returns the machine's busy and idle CPU time so far, in
// clock ticks (0 where /proc/stat cannot be read).
func machineCPU() (busy, idle float64) {
	busy, idle, _ = procstat.CPU()
	return busy, idle
}

// diskStat is the path of /sys's stat file for the block device that holds
// dir ("" when it cannot be found: not Linux, or a virtual file system).
func diskStat(dir string) string {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return ""
	}
	major, minor := (st.Dev>>8)&0xfff|(st.Dev>>32)&^0xfff, st.Dev&0xff|(st.Dev>>12)&^0xff
	p := fmt.Sprintf("/sys/dev/block/%d:%d/stat", major, minor)
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// diskFlushes returns the cache flushes the device has completed so far,
// from its /sys stat file (field 16; a kernel before 5.5 has no flush
// fields and reports 0).
func diskFlushes(path string) float64 {
	if path == "" {
		return 0
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) < 16 {
		return 0
	}
	flushes, _ := strconv.ParseFloat(f[15], 64)
	return flushes
}
