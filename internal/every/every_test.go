package every

import (
	"sync/atomic"
	"testing"
	"time"
)

// f runs until stop, and never after stop has returned.
func TestStartStop(t *testing.T) {
	var n atomic.Int64
	ran := make(chan struct{}, 1)
	stop := Start(time.Millisecond, func() {
		n.Add(1)
		select {
		case ran <- struct{}{}:
		default:
		}
	})
	<-ran // progress observed, not slept for
	stop()
	after := n.Load()
	time.Sleep(20 * time.Millisecond)
	if n.Load() != after {
		t.Fatalf("f ran %d times after stop returned", n.Load()-after)
	}
}
