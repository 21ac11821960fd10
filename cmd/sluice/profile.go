package main

import (
	"fmt"
	"io"
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
	return startToFile("SLUICE_CPUPROFILE", path, pprof.StartCPUProfile, pprof.StopCPUProfile)
}

func startTrace(path string) func() {
	return startToFile("SLUICE_TRACE", path, trace.Start, trace.Stop)
}

// startToFile starts a recorder (the CPU profile, the execution trace)
// writing to path, and returns what stops it and closes the file. A
// recorder that cannot start is reported under env and the run goes on.
func startToFile(env, path string, start func(io.Writer) error, stop func()) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sluice: "+env+":", err)
		return func() {}
	}
	if err := start(f); err != nil {
		fmt.Fprintln(os.Stderr, "sluice: "+env+":", err)
		f.Close()
		return func() {}
	}
	return func() {
		stop()
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
