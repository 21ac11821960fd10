package apply_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-db/sluice/apply"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// relaxedWorkload runs n source transactions from 4 writers. Most touch
// rows no other transaction touches (an insert into a keyed log and an
// update of one of 200 counters), so their groups run and commit on
// different workers; every fifth also appends to a table without a key with
// a plain INSERT, so a transaction applied twice shows up as an extra row
// there, and a lost one as a missing row.
func relaxedWorkload(t *testing.T, src *sql.DB, db string, n int) {
	t.Helper()
	sandboxtest.MustExec(t, src,
		"CREATE DATABASE "+db,
		"CREATE TABLE "+db+".acc (id INT PRIMARY KEY, n INT NOT NULL)",
		"CREATE TABLE "+db+".log (id INT PRIMARY KEY, v VARCHAR(40))",
		"CREATE TABLE "+db+".nk (a INT, b INT)",
		"INSERT INTO "+db+".acc SELECT seq, 0 FROM "+db+".seq_0_to_199",
	)
	parallelWriters(t, n, func(i int) error {
		stmts := []string{
			fmt.Sprintf("INSERT INTO %s.log VALUES (%d, 'v%d')", db, i, i),
			fmt.Sprintf("UPDATE %s.acc SET n = n + 1 WHERE id = %d", db, i%200),
		}
		if i%5 == 0 {
			stmts = append(stmts, fmt.Sprintf("INSERT INTO %s.nk VALUES (%d, %d)", db, i%3, i))
		}
		return retryTxn(src, stmts)
	})
}

// TestRelaxedOrderApplies applies independent transactions with
// RelaxedOrder: groups commit out of source order, the target ends equal to
// the source, and once caught up the checkpoint is the source's end again
// (the low-water mark caught up with the groups committed past it).
func TestRelaxedOrderApplies(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	seed(t, "relaxed", src)
	const n = 2000
	relaxedWorkload(t, src, "rx", n)
	until := sourcePos(t, src)
	// maxBatch bounds the groups: a whole backlog read at once grows them to
	// thousands of transactions (chain.go), a handful of groups that rarely
	// overtake one another, and the test then saw no group out of order
	// on a quiet machine.
	st, err := replicate(context.Background(), srcInst, runOpts{task: "relaxed", workers: 8, batch: 2, maxBatch: 20, relaxed: true, until: until})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d txns in %d commits, %d committed before an earlier group, up to %d in flight", st.Txns, st.Commits, st.OutOfOrder, st.MaxInFlight)
	if st.OutOfOrder == 0 {
		t.Fatal("no group committed out of order: the option had no effect")
	}
	if st.Applied.File != until.File || st.Applied.Pos != until.Pos || st.Applied.GTIDSet != until.GTIDSet {
		t.Fatalf("applied position %v, want %v", st.Applied, until)
	}
	sameTables(t, src, dst, "rx.acc", "rx.log", "rx.nk")
	// The stored checkpoint is the end: a restart finds nothing past it.
	db, err := apply.OpenTarget(context.Background(), dstInst.Endpoint(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a, err := apply.New(applierConfig(runOpts{task: "relaxed", workers: 1, relaxed: true}), db)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	pos, _, err := a.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if pos.File != until.File || pos.Pos != until.Pos {
		t.Fatalf("stored checkpoint %v, want %v", pos, until)
	}
	if sr := a.Stats().SkipRanges; sr != 0 {
		t.Fatalf("%d ranges past a caught-up checkpoint", sr)
	}
}

var skipRangesRE = regexp.MustCompile(`start: skip-ranges=(\d+)`)

// TestRelaxedKill9ExactlyOnce is TestKill9ExactlyOnce with RelaxedOrder:
// a replication process is killed with SIGKILL at random moments and
// restarted, then left to finish, and the target must equal the source
// (the counters' sum, the keyed log and the keyless table, where a doubled
// plain INSERT would be an extra row). The restarts must have found groups
// committed past the low-water mark and skipped them, or the test proved
// nothing about relaxed order.
func TestRelaxedKill9ExactlyOnce(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	seed(t, "rcrash", src)
	const n = 6000
	relaxedWorkload(t, src, "rc", n)
	until := sourcePos(t, src)
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	kills, ranges := 0, 0
	committed := counterSum(dst, "rc.acc")
	for round := 0; round < 12; round++ {
		// Groups may grow to twice the batch (MaxBatch and ChainBatch):
		// the default 8,000 could take a round past the last transaction
		// before the kill lands.
		batch := 1 + rng.Intn(8)
		cmd := childCmd(srcInst, "rcrash", until, "SLUICE_RELAXED=1", "SLUICE_WORKERS=8", "SLUICE_BATCH="+strconv.Itoa(batch), "SLUICE_MAX_BATCH="+strconv.Itoa(2*batch))
		// Killed by observed progress (transactions committed on the
		// target), never by time; the steps add up to well under n.
		out := killAfterProgress(t, round, cmd, committed, 1+rng.Intn(300), n)
		kills++
		if m := skipRangesRE.FindStringSubmatch(out); m != nil {
			k, _ := strconv.Atoi(m[1])
			ranges += k
		}
	}
	cmd := childCmd(srcInst, "rcrash", until, "SLUICE_RELAXED=1", "SLUICE_WORKERS=8", "SLUICE_BATCH=4")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("final run: %v: %s", err, out)
	}
	if m := skipRangesRE.FindStringSubmatch(string(out)); m != nil {
		k, _ := strconv.Atoi(m[1])
		ranges += k
	}
	t.Logf("%d kills; restarts found %d groups committed past the low-water mark; final run: %s", kills, ranges, strings.TrimSpace(string(out)))
	var finalTxns int
	if i := strings.Index(string(out), "txns="); i >= 0 {
		fmt.Sscanf(string(out[i:]), "txns=%d", &finalTxns)
	}
	if finalTxns >= n {
		t.Fatalf("the final run applied %d transactions: the killed runs committed nothing", finalTxns)
	}
	if ranges == 0 {
		t.Fatal("no restart found a group committed out of order past the low-water mark: the skip was never exercised")
	}
	sameTables(t, src, dst, "rc.acc", "rc.log", "rc.nk")
	var sum, nk int
	if err := dst.QueryRow("SELECT SUM(n), (SELECT COUNT(*) FROM rc.nk) FROM rc.acc").Scan(&sum, &nk); err != nil || sum != n || nk != n/5 {
		t.Fatalf("target counter sum %d, keyless rows %d (%v), want %d and %d", sum, nk, err, n, n/5)
	}
}
