package stagetime

import (
	"sync"
	"testing"
	"time"
)

// TestClockAccounts: waits are counted while they last (a goroutine blocked
// at a snapshot has waited, not worked), work is the lifetime minus the
// waits, and nothing exceeds the wall time times the goroutines.
func TestClockAccounts(t *testing.T) {
	var c Clock
	began := time.Now()
	const wait = 30 * time.Millisecond
	entered := make(chan struct{})
	release := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // waits on its input until released
		defer wg.Done()
		defer c.End(c.Begin())
		t0 := c.Enter(WaitInput)
		close(entered)
		<-release
		c.Leave(WaitInput, t0)
	}()
	go func() { // works, then waits on its output for a known time
		defer wg.Done()
		defer c.End(c.Begin())
		for end := time.Now().Add(wait); time.Now().Before(end); {
		}
		t0 := c.Enter(WaitOutput)
		time.Sleep(wait)
		c.Leave(WaitOutput, t0)
	}()
	<-entered
	time.Sleep(wait)
	// The first goroutine is still blocked: its wait so far counts.
	mid := c.Snapshot()
	if mid.Seconds["wait_input"] < wait.Seconds() {
		t.Errorf("a wait in progress for %s counts %.3f s", wait, mid.Seconds["wait_input"])
	}
	close(release)
	wg.Wait()
	wall := time.Since(began).Seconds()
	s := c.Snapshot()
	if s.Goroutines != 2 {
		t.Errorf("goroutines %d, want 2", s.Goroutines)
	}
	if s.Seconds["wait_output"] < wait.Seconds() || s.Seconds[WorkState] < wait.Seconds() {
		t.Errorf("wait_output %.3f s, work %.3f s: each should be at least %s", s.Seconds["wait_output"], s.Seconds[WorkState], wait)
	}
	var sum float64
	for _, v := range s.Seconds {
		sum += v
	}
	if d := sum - s.Lifetime; d > 1e-6 || d < -1e-6 {
		t.Errorf("states add up to %.6f s, the lifetimes to %.6f s", sum, s.Lifetime)
	}
	if s.Lifetime > 2*wall {
		t.Errorf("lifetime %.3f s exceeds 2 goroutines x %.3f s of wall time", s.Lifetime, wall)
	}
	if _, ok := s.Seconds["commit"]; ok {
		t.Errorf("a state never entered is reported: %v", s.Seconds)
	}
	// Both ended: the clock stands still.
	if again := c.Snapshot(); again.Lifetime != s.Lifetime || again.Seconds[WorkState] != s.Seconds[WorkState] {
		t.Errorf("an idle clock moved: %+v then %+v", s, again)
	}
}

// TestNilClock: components time only when given a clock.
func TestNilClock(t *testing.T) {
	var c *Clock
	c.End(c.Begin())
	c.Leave(Commit, c.Enter(Commit))
}
