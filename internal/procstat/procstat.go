// Package procstat reads the machine's CPU time from Linux's /proc/stat,
// for the coordinator's commit wait and for the benchmarks' "CPU busy".
package procstat

import (
	"bytes"
	"os"
	"strconv"
)

// CPU returns the machine's busy and idle CPU time so far, in clock ticks;
// ok is false where /proc/stat cannot be read.
func CPU() (busy, idle float64, ok bool) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	return Parse(data)
}

// Parse reads the "cpu" line: busy is user, nice, system, irq, softirq
// and steal; idle is idle and iowait (guest time is already in user).
func Parse(data []byte) (busy, idle float64, ok bool) {
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
