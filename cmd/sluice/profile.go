package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
)

// startProfile writes a CPU profile of the whole run to the file named by
// SLUICE_CPUPROFILE, and an allocation profile at the end of the run to the
// file named by SLUICE_MEMPROFILE, for benchmarks ("profile it and write
// down what bounds it"); "%p" in a name becomes the process id, so a script
// that runs sluice several times keeps every profile. go tool pprof
// bin/sluice FILE reads them (-sample_index=alloc_space for what a run
// allocated, which is what costs the garbage collector). The returned
// function ends the profiles; it must run before the process exits.
// SLUICE_TRACE names a file for Go's execution trace of the run: where
// goroutines waited (the scheduler, syscalls, the network), for latency
// that a CPU profile does not show (go tool trace -pprof=sched FILE).
func startProfile() func() {
	stopCPU := startCPUProfile(profilePath("SLUICE_CPUPROFILE"))
	stopTrace := startTrace(profilePath("SLUICE_TRACE"))
	mem := profilePath("SLUICE_MEMPROFILE")
	return func() {
		stopTrace()
		stopCPU()
		if mem != "" {
			writeMemProfile(mem)
		}
	}
}

func profilePath(env string) string {
	return strings.ReplaceAll(os.Getenv(env), "%p", strconv.Itoa(os.Getpid()))
}

func startCPUProfile(path string) func() {
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

func startTrace(path string) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sluice: SLUICE_TRACE:", err)
		return func() {}
	}
	if err := trace.Start(f); err != nil {
		fmt.Fprintln(os.Stderr, "sluice: SLUICE_TRACE:", err)
		f.Close()
		return func() {}
	}
	return func() {
		trace.Stop()
		f.Close()
	}
}

func writeMemProfile(path string) {
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sluice: SLUICE_MEMPROFILE:", err)
		return
	}
	defer f.Close()
	runtime.GC() // the in-use figures then show what is live, not what awaits collection
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		fmt.Fprintln(os.Stderr, "sluice: SLUICE_MEMPROFILE:", err)
	}
}
