package main

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestWriteSummary(t *testing.T) {
	var b strings.Builder
	writeSummary(&b, summary{item: "migrate (stream)", threads: 4, pool: 8, rows: 1000, bytes: 100e6, dumpBytes: 100e6,
		total: 10 * time.Second, dumpTime: 4 * time.Second, loadTime: 8 * time.Second})
	out := b.String()
	for _, want := range []string{"| data size (MB) |", "| migrate (stream) | 4 | 8 | 1000 | 100.00 | 10.0 | 25.00 | 12.50 | 10.00 |"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

func TestProgressText(t *testing.T) {
	var rows, bytes, done, total atomic.Int64
	rows.Store(500)
	bytes.Store(50e6)
	done.Store(1)
	total.Store(4)
	ph := progressPhase{Name: "load", Rows: rows.Load, Bytes: bytes.Load, Done: done.Load, Total: total.Load}
	s := phaseText(ph, 10*time.Second)
	for _, want := range []string{"500 rows", "50.0 MB", "5.0 MB/s", "25%", "ETA 30s"} {
		if !strings.Contains(s, want) {
			t.Errorf("progress %q lacks %q", s, want)
		}
	}
	if got := bar(ph, 8); got != "[==      ]" {
		t.Errorf("bar = %q", got)
	}
	var b strings.Builder
	p := startProgress(&b, time.Hour, ph)
	p.Stop()
	if !strings.HasPrefix(b.String(), "progress ") || strings.Contains(b.String(), "\033[") {
		t.Errorf("plain output expected off a terminal, got %q", b.String())
	}
}

// TestProgressFits80Columns: a drawn line, at its longest (big counts, a
// percentage and an ETA), fits an 80-column terminal, and a narrower one
// gets it cut rather than wrapped (a wrapped line scrolls garbage when
// redrawn in place).
func TestProgressFits80Columns(t *testing.T) {
	big := func() int64 { return 9_999_999_999 }
	ph := progressPhase{Name: "dump", Rows: big, Bytes: big, Done: func() int64 { return 1 }, Total: func() int64 { return 3 }}
	line := bar(ph, 12) + " " + phaseText(ph, 36*time.Hour)
	if got := fitLine(line, 80); len([]rune(got)) > 79 {
		t.Errorf("%d columns: %q", len([]rune(got)), got)
	}
	if len([]rune(line)) > 79 {
		t.Logf("the longest line (%d columns) is cut at 79: %q", len([]rune(line)), line)
	}
	ph = progressPhase{Name: "load", Rows: func() int64 { return 123456 }, Bytes: func() int64 { return 50e6 }, Done: func() int64 { return 1 }, Total: func() int64 { return 4 }}
	if line := bar(ph, 12) + " " + phaseText(ph, 10*time.Second); len([]rune(line)) > 79 {
		t.Errorf("an ordinary line needs %d columns: %q", len([]rune(line)), line)
	}
	if got := fitLine("abcdef", 4); got != "abc" {
		t.Errorf("fitLine = %q", got)
	}
}
