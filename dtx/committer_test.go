package dtx

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// batchStore is a fake Store for the committer's own tests: the committer's
// contract (each caller gets its own mutation's outcome, exactly once,
// batches bounded, at most `workers` store transactions at once) does not
// depend on a real store, and the real ones are tested with the coordinator
// against bolt and MariaDB in the other tests. Apply fails the mutation
// whose gid starts with "bad" and the whole batch when one starts with
// "fail".
type batchStore struct {
	Store
	mu       sync.Mutex
	applied  map[string]int
	batches  []int
	inflight int
	maxIn    int
	gate     chan struct{} // when set, Apply waits on it
}

func (s *batchStore) Apply(ctx context.Context, muts []*Mutation) ([]error, error) {
	s.mu.Lock()
	s.inflight++
	s.maxIn = max(s.maxIn, s.inflight)
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	time.Sleep(200 * time.Microsecond) // a commit takes a while, so batches form
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight--
	s.batches = append(s.batches, len(muts))
	errs := make([]error, len(muts))
	for _, m := range muts {
		if len(m.Gid) >= 4 && m.Gid[:4] == "fail" {
			return nil, errors.New("batch failed")
		}
	}
	for i, m := range muts {
		if len(m.Gid) >= 3 && m.Gid[:3] == "bad" {
			errs[i] = ErrExists
			continue
		}
		s.applied[m.Gid]++
	}
	return errs, nil
}

func TestCommitterOutcomesExactlyOnce(t *testing.T) {
	for _, tc := range []struct {
		workers int
		wait    time.Duration
	}{{1, 0}, {3, 0}, {1, 300 * time.Microsecond}} {
		workers := tc.workers
		t.Run(fmt.Sprint("workers=", workers, ",wait=", tc.wait), func(t *testing.T) {
			st := &batchStore{applied: map[string]int{}}
			c := newCommitter(st, workers, 8, tc.wait, NewMetrics(nil))
			const callers, each = 40, 25
			var wg sync.WaitGroup
			errc := make(chan error, callers*each)
			for g := 0; g < callers; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					for i := 0; i < each; i++ {
						gid := fmt.Sprintf("g%d-%d", g, i)
						if i%5 == 0 {
							gid = "bad" + gid
						}
						err := c.do(context.Background(), &Mutation{Gid: gid})
						if (i%5 == 0) != errors.Is(err, ErrExists) {
							errc <- fmt.Errorf("%s: got %v", gid, err)
						}
					}
				}(g)
			}
			wg.Wait()
			c.close()
			close(errc)
			for err := range errc {
				t.Error(err)
			}
			if len(st.applied) != callers*each*4/5 {
				t.Errorf("applied %d mutations, want %d", len(st.applied), callers*each*4/5)
			}
			for gid, n := range st.applied {
				if n != 1 {
					t.Errorf("%s applied %d times", gid, n)
				}
			}
			total, biggest := 0, 0
			for _, n := range st.batches {
				total += n
				biggest = max(biggest, n)
			}
			if total != callers*each {
				t.Errorf("batches held %d mutations, want %d", total, callers*each)
			}
			if biggest > 8 {
				t.Errorf("a batch held %d mutations, more than the limit 8", biggest)
			}
			if biggest < 2 {
				t.Errorf("no two mutations ever shared a commit (40 concurrent callers)")
			}
			if st.maxIn > workers {
				t.Errorf("%d store transactions in flight, limit %d", st.maxIn, workers)
			}
		})
	}
}

func TestCommitterBatchFailureReachesEveryCaller(t *testing.T) {
	st := &batchStore{applied: map[string]int{}, gate: make(chan struct{})}
	c := newCommitter(st, 1, 16, 0, NewMetrics(nil))
	first := make(chan error, 1)
	go func() { first <- c.do(context.Background(), &Mutation{Gid: "ok0"}) }()
	sandboxtest.Eventually(t, time.Minute, "one write in flight", func() bool { st.mu.Lock(); defer st.mu.Unlock(); return st.inflight == 1 })
	// These queue behind the commit in flight and share the next one.
	res := make(chan error, 2)
	go func() { res <- c.do(context.Background(), &Mutation{Gid: "fail1"}) }()
	go func() { res <- c.do(context.Background(), &Mutation{Gid: "ok2"}) }()
	sandboxtest.Eventually(t, time.Minute, "two queued", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.queue) == 2 })
	close(st.gate)
	if err := <-first; err != nil {
		t.Fatalf("first commit: %v", err)
	}
	for i := 0; i < 2; i++ {
		if err := <-res; err == nil || err.Error() != "batch failed" {
			t.Errorf("caller in the failed batch got %v", err)
		}
	}
	c.close()
}

func TestCommitterCancelAndClose(t *testing.T) {
	st := &batchStore{applied: map[string]int{}, gate: make(chan struct{})}
	c := newCommitter(st, 1, 16, 0, NewMetrics(nil))
	lead := make(chan error, 1)
	go func() { lead <- c.do(context.Background(), &Mutation{Gid: "lead"}) }()
	sandboxtest.Eventually(t, time.Minute, "one write in flight", func() bool { st.mu.Lock(); defer st.mu.Unlock(); return st.inflight == 1 })

	// A queued caller that gives up leaves the queue and is never applied.
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- c.do(ctx, &Mutation{Gid: "gaveup"}) }()
	sandboxtest.Eventually(t, time.Minute, "one queued", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.queue) == 1 })
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller got %v", err)
	}
	// One still queued when the committer closes fails, and close waits
	// for the commit in flight.
	queued := make(chan error, 1)
	go func() { queued <- c.do(context.Background(), &Mutation{Gid: "queued"}) }()
	sandboxtest.Eventually(t, time.Minute, "one queued", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.queue) == 1 })
	closed := make(chan struct{})
	go func() { c.close(); close(closed) }()
	if err := <-queued; !errors.Is(err, context.Canceled) {
		t.Fatalf("queued caller at close got %v", err)
	}
	select {
	case <-closed:
		t.Fatal("close returned with a store transaction in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(st.gate)
	<-closed
	if err := <-lead; err != nil {
		t.Fatalf("the commit in flight at close: %v", err)
	}
	if err := c.do(context.Background(), &Mutation{Gid: "late"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("do after close got %v", err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.applied["gaveup"] != 0 || st.applied["queued"] != 0 || st.applied["late"] != 0 || st.applied["lead"] != 1 {
		t.Fatalf("applied %v: want only lead", st.applied)
	}
}

// The commit wait applies under load only: the decision follows the
// average time between arrivals.
func TestCommitterWaitsOnlyUnderLoad(t *testing.T) {
	c := newCommitter(nil, 1, 16, 250*time.Microsecond, NewMetrics(nil))
	t0 := time.Unix(1000, 0)
	c.arrived(t0)
	if c.shouldWait() {
		t.Fatal("waits after the first change ever")
	}
	// Changes every 100 µs: 2.5 expected in the window.
	for i := 1; i <= 20; i++ {
		c.arrived(t0.Add(time.Duration(i) * 100 * time.Microsecond))
	}
	if !c.shouldWait() {
		t.Fatalf("does not wait with a change every 100 µs (average gap %.0f ns)", c.gap)
	}
	// One pause of a second: idle again at once.
	c.arrived(t0.Add(time.Second + 2*time.Millisecond))
	if c.shouldWait() {
		t.Fatalf("still waits after a 1 s pause (average gap %.0f ns)", c.gap)
	}
	// A change every 2 ms: 0.125 expected, below a quarter.
	for i := 1; i <= 50; i++ {
		c.arrived(t0.Add(2*time.Second + time.Duration(i)*2*time.Millisecond))
	}
	if c.shouldWait() {
		t.Fatalf("waits with a change every 2 ms (average gap %.0f ns)", c.gap)
	}
	// Never with the wait off.
	off := newCommitter(nil, 1, 16, 0, NewMetrics(nil))
	for i := 0; i < 20; i++ {
		off.arrived(t0.Add(time.Duration(i) * time.Microsecond))
	}
	if off.shouldWait() {
		t.Fatal("waits with CommitWait 0")
	}
}

// The commit wait stops when waits gather no company: one caller's changes
// arrive often but one at a time. With several callers arriving during the
// window it goes on waiting.
func TestCommitterWaitsOnlyForCompany(t *testing.T) {
	st := &batchStore{applied: map[string]int{}}
	lone := newCommitter(st, 1, 16, 5*time.Millisecond, NewMetrics(nil))
	ctx := context.Background()
	for i := 0; i < 64; i++ {
		if err := lone.do(ctx, &Mutation{Gid: fmt.Sprint("lone", i)}); err != nil {
			t.Fatal(err)
		}
	}
	// Deterministic for one caller: waits until the average of what joined
	// (0 each time) falls below a half (3 waits), then one in 16.
	if lone.waited > 8 {
		t.Errorf("a lone caller waited %d times in %d commits", lone.waited, lone.leads)
	}
	if lone.waited == 0 {
		t.Errorf("never waited: the test does not exercise the wait")
	}

	busy := newCommitter(st, 1, 16, 5*time.Millisecond, NewMetrics(nil))
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				if err := busy.do(ctx, &Mutation{Gid: fmt.Sprint("busy", g, "-", i)}); err != nil {
					t.Error(err)
					return
				}
				time.Sleep(time.Millisecond)
			}
		}(g)
	}
	wg.Wait()
	busy.mu.Lock()
	defer busy.mu.Unlock()
	if busy.waited*2 < busy.leads {
		t.Errorf("8 callers: waited in %d of %d commits (company %.2f)", busy.waited, busy.leads, busy.company)
	}
}

// The commit wait holds up only a small share of the transactions in
// progress: with few clients every saga would wait, for each other.
func TestCommitterWaitsOnlyWithManyInFlight(t *testing.T) {
	c := newCommitter(nil, 1, 16, 250*time.Microsecond, NewMetrics(nil))
	t0 := time.Unix(1000, 0)
	for i := 0; i <= 20; i++ {
		c.arrived(t0.Add(time.Duration(i) * 100 * time.Microsecond))
	}
	var n int64
	c.inflight = func() int64 { return n }
	c.queue = []*pending{{}} // the leader
	for _, tc := range []struct {
		inflight, queued int
		want             bool
	}{{1, 1, false}, {4, 1, false}, {6, 1, false}, {7, 1, true}, {10, 1, true}, {10, 2, false}, {13, 2, true}, {64, 3, true}} {
		n = int64(tc.inflight)
		c.queue = make([]*pending, tc.queued)
		if got := c.shouldWait(); got != tc.want {
			t.Errorf("%d in progress, %d queued: waits %v, want %v", tc.inflight, tc.queued, got, tc.want)
		}
	}
	// Nor while the host's CPUs have time to spare: then waiting only adds latency.
	load := 0.5
	c.hostLoad = func() float64 { return load }
	n, c.queue = 64, make([]*pending, 1)
	if c.shouldWait() {
		t.Error("waits on a host 50 % busy")
	}
	if load = 0.9; !c.shouldWait() {
		t.Error("does not wait on a host 90 % busy")
	}
}

// A leader waiting for company stops as soon as the batch reaches a sixth
// of the transactions in progress, not at the end of the window.
func TestCommitterWaitEndsWhenBatchIsBig(t *testing.T) {
	st := &batchStore{applied: map[string]int{}}
	const window = 30 * time.Second
	c := newCommitter(st, 1, 8, window, NewMetrics(nil))
	c.inflight = func() int64 { return 12 } // enough at 2 queued
	c.mu.Lock()
	c.gap = float64(100 * time.Microsecond) // changes arrive often: under load
	c.last = time.Now()
	c.mu.Unlock()
	start := time.Now()
	done := make(chan error, 2)
	go func() { done <- c.do(context.Background(), &Mutation{Gid: "first"}) }()
	sandboxtest.Eventually(t, time.Minute, "a waker armed", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return c.waker != nil })
	go func() { done <- c.do(context.Background(), &Mutation{Gid: "second"}) }()
	for i := 0; i < 2; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if el := time.Since(start); el >= window {
		t.Fatalf("the wait lasted its whole window (%v)", el)
	}
	c.close()
	if len(st.batches) != 1 || st.batches[0] != 2 || c.waited != 1 {
		t.Fatalf("batches %v, waits %d: want one wait and one batch of both", st.batches, c.waited)
	}
}
