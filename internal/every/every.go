// Package every runs a function now and then on a goroutine it owns: a
// progress line, a memory check. One home for the ticker loop that ends on
// a signal and is joined (Ticker.Stop does not close its channel, so a loop
// that ranges over it never ends).
package every

import (
	"sync"
	"time"
)

// Start calls f every period until the returned stop is called. stop
// returns once the loop has ended: f is not running then and never runs
// again. stop may be called once.
func Start(period time.Duration, f func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				f()
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}
