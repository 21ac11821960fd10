package backoff

import (
	"context"
	"testing"
	"time"
)

func TestScheduleDoublesJittersAndCaps(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    float64
		want []time.Duration
	}{
		{"no jitter", 0.5, []time.Duration{100, 200, 400, 800, 1000, 1000}},
		{"low edge", 0, []time.Duration{80, 160, 320, 640, 800, 800}},
		{"high edge, capped at Max", 0.999999, []time.Duration{119, 239, 479, 959, 1000, 1000}},
	} {
		b := New(100, 1000)
		b.rand = func() float64 { return tc.r }
		for i, w := range tc.want {
			if got := b.Next(); got != w {
				t.Errorf("%s: wait %d = %d, want %d", tc.name, i, got, w)
			}
		}
		b.Reset()
		if got := b.Next(); got != tc.want[0] {
			t.Errorf("%s: after Reset %d, want %d", tc.name, got, tc.want[0])
		}
	}
}

func TestMaxBelowMinAndOverflow(t *testing.T) {
	b := New(time.Second, time.Millisecond) // a Max below Min means Min
	if b.Max != time.Second {
		t.Fatalf("Max %v", b.Max)
	}
	h := New(time.Duration(1)<<62, time.Duration(1)<<62)
	for i := 0; i < 4; i++ {
		if d := h.Next(); d <= 0 || d > h.Max {
			t.Fatalf("overflowed to %v", d)
		}
	}
}

func TestSleepEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Fatal("Sleep completed on a cancelled context")
	}
	if !Sleep(context.Background(), time.Millisecond) {
		t.Fatal("Sleep did not complete")
	}
}
