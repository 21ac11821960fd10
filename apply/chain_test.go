package apply_test

import (
	"context"
	"database/sql"
	"fmt"
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
// worker's channel is full, the next group grows past the group limit, and
// past MaxBatch up to ChainBatch, instead of waiting there (chain.go), and
// the target still commits the source's transactions in their order, each
// exactly once.
//
// The first group is held on a row lock the test takes on the target, and
// every item is queued before the applier starts, so the scheduler finds
// them all at once: groups 1-3 fill the worker (one executing, two in its
// channel) and group 4 takes all the rest.
func TestChainedGroupGrows(t *testing.T) {
	sandboxtest.SkipShort(t)
	const n = 300
	st, commits := runChain(t, "chain", "chg", n, hotRow, fourInFlight, func(c *apply.Config) { c.MaxBatch = 10 })
	if st.Txns != n || st.Commits != 4 || st.Chained != 3 || st.Grown != 1 {
		t.Fatalf("%d transactions in %d target commits (%d chained, %d grown), want %d in 4 (3 chained, 1 grown)", st.Txns, st.Commits, st.Chained, st.Grown, n)
	}
	if len(commits) != 4 {
		t.Fatalf("target commits: %d, want 4", len(commits))
	}
}

// TestChainedGroupStopsAtChainBatch: the same chain with ChainBatch at or
// below MaxBatch (10): grown groups stop at MaxBatch, so no target
// transaction holds more than 10 source transactions.
func TestChainedGroupStopsAtChainBatch(t *testing.T) {
	sandboxtest.SkipShort(t)
	const n = 300
	// The fourth group stops at 10 and waits to be handed to the worker.
	fourSent := func(st apply.Stats) bool { return st.InFlight >= 4 }
	st, commits := runChain(t, "chain2", "chg2", n, hotRow, fourSent, func(c *apply.Config) { c.MaxBatch, c.ChainBatch = 10, 0 })
	if st.Txns != n || st.Grown == 0 {
		t.Fatalf("%d transactions, %d grown; want %d and some grown", st.Txns, st.Grown, n)
	}
	for _, c := range commits {
		if len(c) > 10 {
			t.Fatalf("a target commit of %d source transactions, want at most MaxBatch 10: %v", len(c), commits)
		}
	}
}

// TestChainedGroupGrowsPastBatchBytes: the chain of TestChainedGroupGrows
// bounded by bytes instead of by count (BatchBytes 4096, about 19 of these
// transactions): the group held open behind the full worker grows past
// BatchBytes, up to ChainBytes; with ChainBytes off it stops at BatchBytes.
func TestChainedGroupGrowsPastBatchBytes(t *testing.T) {
	sandboxtest.SkipShort(t)
	const n = 300
	bytes := func(chain int) func(*apply.Config) {
		return func(c *apply.Config) { c.MaxBatch, c.BatchBytes, c.ChainBytes = 1000, 4096, chain }
	}
	st, commits := runChain(t, "chain4", "chg4", n, hotRow, fourInFlight, bytes(1<<20))
	if st.Txns != n || st.Commits != 4 || st.Grown != 1 {
		t.Fatalf("%d transactions in %d target commits (%d grown), want %d in 4 (1 grown)", st.Txns, st.Commits, st.Grown, n)
	}
	if len(commits) != 4 || len(commits[3]) < n-3*40 {
		t.Fatalf("target commits %v: want three groups within BatchBytes and a fourth with all the rest", commits)
	}
	for _, c := range commits[:3] {
		if len(c) > 40 {
			t.Fatalf("a group of %d before the held one, want at most BatchBytes (about 19): %v", len(c), commits)
		}
	}
	fourSent := func(st apply.Stats) bool { return st.InFlight >= 4 }
	st, commits = runChain(t, "chain5", "chg5", n, hotRow, fourSent, bytes(0))
	if st.Txns != n {
		t.Fatalf("%d transactions, want %d", st.Txns, n)
	}
	for _, c := range commits {
		if len(c) > 40 {
			t.Fatalf("a target commit of %d source transactions with ChainBytes off, want at most BatchBytes (about 19): %v", len(c), commits)
		}
	}
}

// TestConflictingGroupGrows: a group that overlaps the uncommitted groups
// of two workers waits until one of them has committed; it grows
// meanwhile. Transactions 1-2 update row 1 (group 1, worker A, held on a
// row lock the test takes on the target), 3-4 row 2 (group 2, no conflict,
// so the other worker, B, held on a second lock); every later one updates
// both rows, so group 3 overlaps A's and B's groups and takes all the rest.
func TestConflictingGroupGrows(t *testing.T) {
	sandboxtest.SkipShort(t)
	const n = 300
	both := func(name string, i int) []string {
		switch {
		case i <= 2:
			return []string{"UPDATE " + name + ".t SET n=n+1 WHERE id=1"}
		case i <= 4:
			return []string{"UPDATE " + name + ".t SET n=n+1 WHERE id=2"}
		}
		return []string{"UPDATE " + name + ".t SET n=n+1 WHERE id=1", "UPDATE " + name + ".t SET n=n+1 WHERE id=2"}
	}
	st, commits := runChain(t, "chain3", "chg3", n, both, waitedOnTwo, func(c *apply.Config) { c.MaxBatch = 10 })
	if st.Txns != n || st.Commits != 3 || st.Conflicts != 1 || st.Grown != 1 {
		t.Fatalf("%d transactions in %d target commits (%d conflicts, %d grown), want %d in 3 (1 conflict, 1 grown)", st.Txns, st.Commits, st.Conflicts, st.Grown, n)
	}
	if len(commits) != 3 {
		t.Fatalf("target commits: %d, want 3", len(commits))
	}
}

// fourInFlight: one group waiting on the lock, two in its worker's channel,
// and the fourth, grown with all the input, held open by the scheduler
// (it would only wait behind them).
func fourInFlight(st apply.Stats) bool { return st.InFlight >= 3 && st.Grown >= 1 && st.Queued == 0 }

// waitedOnTwo: the third group, grown with all the input, waits for the
// first two to commit.
func waitedOnTwo(st apply.Stats) bool { return st.Conflicts >= 1 && st.Queued == 0 }

// hotRow: every transaction updates row 1.
func hotRow(name string, _ int) []string {
	return []string{"UPDATE " + name + ".t SET n=n+1 WHERE id=1"}
}

// runChain writes n source transactions in database name, each the
// statements writes gives it plus an insert of its number into a log
// table, applies them with rows 1 and 2 locked on the target until the
// applier's stats are ready (all are queued before the applier starts), checks that the tables are equal and that the target committed
// the log rows in source order, and returns the applier's stats and the
// target's commits (the log rows of each).
func runChain(t *testing.T, task, name string, n int, writes func(name string, i int) []string, ready func(apply.Stats) bool, tune func(*apply.Config)) (apply.Stats, [][]int64) {
	ctx := context.Background()
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	seed(t, task, src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE "+name, "CREATE TABLE "+name+".t (id INT PRIMARY KEY, n INT)",
		"CREATE TABLE "+name+".log (id INT PRIMARY KEY)", "INSERT INTO "+name+".t VALUES (1, 0), (2, 0)")
	from := sourcePos(t, src)
	if _, err := replicate(ctx, srcInst, runOpts{task: task, workers: 2, batch: 2, until: from}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		stmts := append([]string{"BEGIN"}, writes(name, i)...)
		sandboxtest.MustExec(t, src, append(stmts, "INSERT INTO "+name+".log VALUES ("+strconv.Itoa(i)+")", "COMMIT")...)
	}
	until := sourcePos(t, src)
	dstStart := sourcePos(t, dst)

	db, err := apply.OpenTarget(ctx, dstInst.Endpoint(), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cfg := applierConfig(runOpts{task: task, workers: 2, batch: 2})
	tune(&cfg)
	a, err := apply.New(cfg, db)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	items := decodeFrom(t, a, from, until)

	// Hold rows 1 and 2 (each in a transaction of its own), so the groups
	// that write them wait.
	var locks []*sql.Tx
	for _, id := range []string{"1", "2"} {
		lock, err := dst.Begin()
		if err != nil {
			t.Fatal(err)
		}
		defer lock.Rollback()
		if _, err := lock.Exec("SELECT * FROM " + name + ".t WHERE id=" + id + " FOR UPDATE"); err != nil {
			t.Fatal(err)
		}
		locks = append(locks, lock)
	}
	for _, it := range items {
		if err := a.Submit(ctx, it); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	sandboxtest.Eventually(t, time.Minute, "the groups fill the workers", func() bool {
		if err := a.Err(); err != nil {
			t.Fatalf("the groups never filled the workers: %+v (%v)", a.Stats(), err)
		}
		return ready(a.Stats())
	}, func() string { return fmt.Sprintf("%+v", a.Stats()) })
	for _, lock := range locks {
		if err := lock.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st := a.Stats()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	sameTables(t, src, dst, name+".t", name+".log")
	// The target committed the source's transactions in their order.
	commits := targetCommits(t, dstInst, dstStart, sourcePos(t, dst), name)
	var next int64 = 1
	for _, c := range commits {
		for _, id := range c {
			if id != next {
				t.Fatalf("target commits %v: row %d where %d was next", commits, id, next)
			}
			next++
		}
	}
	if next != int64(n)+1 {
		t.Fatalf("target commits: %d rows, want %d", next-1, n)
	}
	return st, commits
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
