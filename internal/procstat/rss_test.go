package procstat

import (
	"os"
	"runtime"
	"testing"
)

// RSSMB reads this process's resident set; PeakRSS keeps the highest
// reading, and nothing is read for a pid that is no process.
func TestRSS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	if mb := RSSMB(os.Getpid()); mb <= 0 {
		t.Fatalf("RSSMB of this process: %v", mb)
	}
	if mb := RSSMB(-1); mb != 0 {
		t.Fatalf("RSSMB(-1) = %v", mb)
	}
	r := StartPeakRSS(os.Getpid())
	r.Sample(1e6) // a reading above any real one is the peak
	if p := r.Stop(); p != 1e6 {
		t.Fatalf("peak %v, want the highest reading 1e6", p)
	}
	if p := StartPeakRSS(0).Stop(); p != 0 {
		t.Fatalf("peak of no process: %v", p)
	}
}
