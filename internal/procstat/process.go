package procstat

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcessCPU is a process's CPU time (user + system) in seconds, from
// /proc/PID/stat; 0 when it cannot be read (pid 0, not Linux).
func ProcessCPU(pid int) float64 {
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
	return (ut + st) / 100 // USER_HZ is 100 on every Linux architecture Go supports
}
