package sandboxtest

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f)
}

func TestEventually(t *testing.T) {
	n := 0
	Eventually(t, time.Minute, "three polls", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("polled %d times", n)
	}
	rec := &fatalRecorder{TB: t}
	func() {
		defer func() {
			if r := recover(); r != rec {
				t.Fatalf("no failure on the bound: %v", r)
			}
		}()
		Eventually(rec, 30*time.Millisecond, "never", func() bool { return false }, func() string { return "state: x" })
	}()
	if !strings.Contains(rec.msg, "never: not within 30ms") || !strings.Contains(rec.msg, "state: x") {
		t.Fatalf("message %q", rec.msg)
	}
}
