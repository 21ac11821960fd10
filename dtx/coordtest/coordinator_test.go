package coordtest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-db/sluice/dtx"
	"github.com/sluice-db/sluice/dtx/internal/wire"
	"github.com/sluice-db/sluice/dtx/memstore"
)

// idleHost is a host load that never asks the commit wait to wait.
type idleHost struct{}

func (idleHost) Load() float64                             { return 0 }
func (idleHost) Run(done <-chan struct{}, _ time.Duration) { <-done }

// newCoordinator is a coordinator on a memory store whose branch calls
// fake answers. Recovery is not started: each test drives its transaction
// through the API and reads the outcome.
func newCoordinator(t *testing.T, fake *wire.Fake) (*dtx.Coordinator, dtx.Store) {
	t.Helper()
	store := memstore.New()
	cfg := dtx.DefaultConfig()
	cfg.RetryLimit = 1
	c, err := dtx.New(cfg, store, nil, nil, dtx.WithCaller(fake), dtx.WithHostLoad(idleHost{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); store.Close() })
	return c, store
}

// calls lists the fake's calls as "op url" lines.
func calls(f *wire.Fake) []string {
	var out []string
	for _, c := range f.Calls() {
		out = append(out, c.Op+" "+c.URL)
	}
	return out
}

func sagaRequest(gid string) *dtx.Request {
	r := &dtx.Request{Gid: gid, TransType: dtx.TypeSaga,
		Steps: []map[string]string{
			{dtx.OpAction: "http://busi/out", dtx.OpCompensate: "http://busi/out-undo"},
			{dtx.OpAction: "http://busi/in", dtx.OpCompensate: "http://busi/in-undo"},
		},
		Payloads: []string{`{"amount":30}`, `{"amount":30}`}}
	r.WaitResult = true
	return r
}

func status(t *testing.T, c *dtx.Coordinator, gid string) (string, []dtx.Branch) {
	t.Helper()
	g, bs, err := c.Query(context.Background(), gid)
	if err != nil {
		t.Fatal(err)
	}
	return g.Status, bs
}

// TestSagaSucceeds: both actions are called in order with their payloads,
// no compensation, and the saga and every action branch end succeeded.
func TestSagaSucceeds(t *testing.T) {
	fake := wire.NewFake()
	c, _ := newCoordinator(t, fake)
	r := sagaRequest("s1")
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
	if err := c.Submit(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(calls(fake), "; "), "action http://busi/out; action http://busi/in"; got != want {
		t.Fatalf("calls %q, want %q", got, want)
	}
	if string(fake.Calls()[0].Body) != `{"amount":30}` || fake.Calls()[0].Gid != "s1" || fake.Calls()[0].BranchID != "01" {
		t.Fatalf("first call %+v", fake.Calls()[0])
	}
	st, bs := status(t, c, "s1")
	if st != dtx.StatusSucceed {
		t.Fatalf("saga %s, want %s", st, dtx.StatusSucceed)
	}
	for _, b := range bs {
		want := dtx.StatusPrepared // compensations never ran
		if b.Op == dtx.OpAction {
			want = dtx.StatusSucceed
		}
		if b.Status != want {
			t.Errorf("branch %s %s: %s, want %s", b.BranchID, b.Op, b.Status, want)
		}
	}
}

// TestSagaCompensates: the second action answers FAILURE, so the saga
// compensates the step that succeeded (and, as dtm does, the failed one),
// newest first, and ends failed with the business's reason.
func TestSagaCompensates(t *testing.T) {
	fake := wire.NewFake()
	fake.Answer("http://busi/in", wire.Answer{Outcome: wire.Failure, Message: "no such account"})
	c, _ := newCoordinator(t, fake)
	r := sagaRequest("s2")
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
	err := c.Submit(context.Background(), r)
	if err == nil || !errors.Is(err, dtx.ErrFailure) {
		t.Fatalf("a saga that rolled back answered %v, want FAILURE", err)
	}
	got := calls(fake)
	want := []string{"action http://busi/out", "action http://busi/in", "compensate http://busi/in-undo", "compensate http://busi/out-undo"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("calls\n%q\nwant\n%q", got, want)
	}
	st, bs := status(t, c, "s2")
	if st != dtx.StatusFailed {
		t.Fatalf("saga %s, want %s", st, dtx.StatusFailed)
	}
	for _, b := range bs {
		if b.Op == dtx.OpCompensate && b.Status != dtx.StatusSucceed {
			t.Errorf("compensation %s: %s, want %s", b.BranchID, b.Status, dtx.StatusSucceed)
		}
	}
}

// TestTCCCancel: a prepared TCC with two registered branches is aborted:
// each cancel is called, no confirm, and the transaction ends failed.
func TestTCCCancel(t *testing.T) {
	fake := wire.NewFake()
	c, _ := newCoordinator(t, fake)
	ctx := context.Background()
	r := &dtx.Request{Gid: "t1", TransType: dtx.TypeTCC}
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
	if err := c.Prepare(ctx, r); err != nil {
		t.Fatal(err)
	}
	for _, bid := range []string{"01", "02"} {
		if err := c.RegisterBranch(ctx, map[string]string{"gid": "t1", "branch_id": bid, "trans_type": dtx.TypeTCC,
			dtx.OpConfirm: "http://busi/confirm" + bid, dtx.OpCancel: "http://busi/cancel" + bid, "data": "d" + bid}); err != nil {
			t.Fatal(err)
		}
	}
	if st, _ := status(t, c, "t1"); st != dtx.StatusPrepared {
		t.Fatalf("after prepare and registerBranch: %s, want %s", st, dtx.StatusPrepared)
	}
	abort := &dtx.Request{Gid: "t1", TransType: dtx.TypeTCC}
	abort.WaitResult = true
	if err := abort.Check(); err != nil {
		t.Fatal(err)
	}
	_ = c.Abort(ctx, abort) // dtm answers an aborted wait_result with its reason; the state is what counts
	got := calls(fake)
	if len(got) != 2 || !contains(got, "cancel http://busi/cancel01") || !contains(got, "cancel http://busi/cancel02") {
		t.Fatalf("calls %q, want the two cancels and nothing else", got)
	}
	if string(fake.Calls()[0].Body) == "" {
		t.Error("a cancel was called without the branch's data")
	}
	st, bs := status(t, c, "t1")
	if st != dtx.StatusFailed {
		t.Fatalf("TCC %s after abort, want %s", st, dtx.StatusFailed)
	}
	for _, b := range bs {
		want := dtx.StatusPrepared
		if b.Op == dtx.OpCancel {
			want = dtx.StatusSucceed
		}
		if b.Status != want {
			t.Errorf("branch %s %s: %s, want %s", b.BranchID, b.Op, b.Status, want)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
