package logx

import (
	"bytes"
	"regexp"
	"testing"
)

// TestLineFormat: the lines are the plain lines the task logs printed
// before slog ("<time> <prefix>: <msg>"), attributes appended as k=v.
func TestLineFormat(t *testing.T) {
	var b bytes.Buffer
	l := New(&b, "migrate t1")
	l.Info("warning: x (fix: y)")
	l.With("table", "a.b").Warn("lost", "n", 3)
	New(&b, "").Info("no prefix")
	l.Debug("not shown")
	want := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ migrate t1: warning: x \(fix: y\)\n` +
		`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ migrate t1: lost table=a.b n=3\n` +
		`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ no prefix\n$`)
	if !want.Match(b.Bytes()) {
		t.Fatalf("log lines:\n%s", b.String())
	}
}
