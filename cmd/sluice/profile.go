package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
)

// startProfile writes a CPU profile of the whole run to the file named by
// SLUICE_CPUPROFILE, for benchmarks ("profile it and write down what bounds
// it"); "%p" in the name becomes the process id, so a script that runs
// sluice several times keeps every profile. go tool pprof bin/sluice FILE
// reads it. The returned function ends the profile; it must run before the
// process exits.
func startProfile() func() {
	path := strings.ReplaceAll(os.Getenv("SLUICE_CPUPROFILE"), "%p", strconv.Itoa(os.Getpid()))
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sluice: SLUICE_CPUPROFILE:", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, "sluice: SLUICE_CPUPROFILE:", err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
