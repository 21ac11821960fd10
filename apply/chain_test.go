package apply_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	gmysql "github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/apply"
	"github.com/sluice-db/sluice/decode"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/schema"
)

// TestChainedGroupGrows: when every group overlaps the one before it (one
// hot row), the groups run on one worker, one after another. While that
// worker's channel is full, the next group grows past the group limit
// instead of waiting there (chain.go), and the target still commits the
// source's transactions in their order, each exactly once.
//
// The first group is held on a row lock the test takes on the target, and
// every item is queued before the applier starts, so the scheduler finds
// them all at once: groups 1-3 fill the worker (one executing, two in its
// channel) and group 4 takes all the rest.
func TestChainedGroupGrows(t *testing.T) {
	ctx := context.Background()
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	seed(t, "chain", src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE chg", "CREATE TABLE chg.t (id INT PRIMARY KEY, n INT)",
		"CREATE TABLE chg.log (id INT PRIMARY KEY)", "INSERT INTO chg.t VALUES (1, 0)")
	ready := sourcePos(t, src)
	if _, err := replicate(ctx, srcInst, runOpts{task: "chain", workers: 2, batch: 2, until: ready}); err != nil {
		t.Fatal(err)
	}
	const n = 300
	for i := 1; i <= n; i++ {
		sandboxtest.MustExec(t, src, "BEGIN", "UPDATE chg.t SET n=n+1 WHERE id=1",
			"INSERT INTO chg.log VALUES ("+strconv.Itoa(i)+")", "COMMIT")
	}
	until := sourcePos(t, src)
	dstStart := sourcePos(t, dst)

	db, err := apply.OpenTarget(ctx, dstInst.Endpoint(), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a, err := apply.New(applierConfig(runOpts{task: "chain", workers: 2, batch: 2}), db)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	items := decodeFrom(t, a, ready, until)

	// Hold the hot row, so the first group waits on it.
	lock, err := dst.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback()
	if _, err := lock.Exec("SELECT * FROM chg.t WHERE id=1 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if err := a.Submit(ctx, it); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Four groups in flight: one waiting on the lock, two in its worker's
	// channel, and the fourth, which the scheduler hands over once the
	// input ran dry. A bound against a hang only.
	for limit := time.Now().Add(time.Minute); a.Stats().InFlight < 4; time.Sleep(5 * time.Millisecond) {
		if err := a.Err(); err != nil || time.Now().After(limit) {
			t.Fatalf("the groups never filled the worker: %+v (%v)", a.Stats(), err)
		}
	}
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st := a.Stats()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	sameTables(t, src, dst, "chg.t", "chg.log")
	if st.Txns != n || st.Commits != 4 || st.Chained != 3 || st.Grown != 1 {
		t.Fatalf("%d transactions in %d target commits (%d chained, %d grown), want %d in 4 (3 chained, 1 grown)", st.Txns, st.Commits, st.Chained, st.Grown, n)
	}
	// The target committed the source's transactions in their order.
	commits := targetCommits(t, dstInst, dstStart, sourcePos(t, dst), "chg")
	var next int64 = 1
	for _, c := range commits {
		for _, id := range c {
			if id != next {
				t.Fatalf("target commits %v: row %d where %d was next", commits, id, next)
			}
			next++
		}
	}
	if next != n+1 || len(commits) != 4 {
		t.Fatalf("target commits: %d with %d rows, want 4 with %d", len(commits), next-1, n)
	}
}

// decodeFrom decodes the source's binlog from a's checkpoint (at from) to
// until into stream items, with the schema state saved with the checkpoint.
func decodeFrom(t *testing.T, a *apply.Applier, from, until sluice.Position) []sluice.StreamItem {
	t.Helper()
	ctx := context.Background()
	start, ok, err := a.Checkpoint(ctx)
	if err != nil || !ok || start.Compare(from) != 0 {
		t.Fatalf("checkpoint %v (%v, %v), want %v", start, ok, err, from)
	}
	tracker := schema.NewTracker()
	state, err := a.SchemaState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if state != nil {
		if err := tracker.Restore(state); err != nil {
			t.Fatal(err)
		}
	}
	dcfg := decode.DefaultConfig()
	dcfg.GTIDPos = start.GTIDSet
	dec, err := decode.New(dcfg, tracker)
	if err != nil {
		t.Fatal(err)
	}
	syncer := newSyncer(srcInst)
	defer syncer.Close()
	streamer, err := syncer.StartSync(gmysql.Position{Name: start.File, Pos: start.Pos})
	if err != nil {
		t.Fatal(err)
	}
	var items []sluice.StreamItem
	cur := sluice.Position{File: start.File, Pos: start.Pos}
	for !after(cur, until) {
		ev, err := streamer.GetEvent(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if r, ok := ev.Event.(*replication.RotateEvent); ok {
			cur.File = string(r.NextLogName)
			continue
		}
		if ev.Header.LogPos == 0 || ev.Header.Flags&replication.LOG_EVENT_ARTIFICIAL_F != 0 {
			continue
		}
		cur.Pos = ev.Header.LogPos
		its, err := dec.Feed(ev, cur)
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, its...)
	}
	return items
}
