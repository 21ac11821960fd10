package logx

import (
	"bytes"
	"errors"
	"log/slog"
	"regexp"
	"testing"
)

// The lines users, the difftest and the tests read: exactly the text the
// packages wrote before they logged through slog.
func TestLines(t *testing.T) {
	var b bytes.Buffer
	l := New(&b, "replicate dt2812")
	l.Info("stopped at mysql-bin.000003:1234")
	l.With("source", "a").WithGroup("g").Warn("retry", "err", errors.New("connection refused"), slog.Group("h", "n", 2))
	want := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ replicate dt2812: stopped at mysql-bin.000003:1234\n` +
		`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ replicate dt2812: retry source=a g.err=connection refused g.h.n=2\n$`)
	if !want.MatchString(b.String()) {
		t.Fatalf("got\n%s", b.String())
	}
	b.Reset()
	NewUntimed(&b, "serve bls").With("k", "v").Info("purged mysql-bin.000001")
	if got := b.String(); got != "serve bls: purged mysql-bin.000001 k=v\n" {
		t.Fatalf("untimed: got %q", got)
	}
}
