package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// procCPU is a process's CPU time (user + system) in seconds, from
// /proc/PID/stat; 0 when it cannot be read (pid 0, not Linux).
func procCPU(pid int) float64 {
	if pid <= 0 {
		return 0
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; the fields after it don't.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// machineCPU returns the machine's busy and idle CPU time so far, in
// clock ticks, from /proc/stat's first line (idle includes iowait).
func machineCPU() (busy, idle float64) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0
	}
	for i, v := range f[1:] {
		x, _ := strconv.ParseFloat(v, 64)
		if i == 3 || i == 4 {
			idle += x
		} else if i < 8 { // guest time is already counted in user
			busy += x
		}
	}
	return busy, idle
}
