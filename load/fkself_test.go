package load_test

import (
	"fmt"
	"math/rand"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestModeAllResumesSelfReferencingTable is TestModeAllResumesForeignKeyGroups
// for a table whose foreign key references its own rows: parents in its
// first chunks, children in its last. Its integer key lets replication
// match chunks of two snapshots, but not a cascade: a parent DELETE between
// the snapshots, applied to a parent chunk of the first, cascades on the
// target onto the child that the second snapshot holds, re-inserted after
// it. The rerun must load the whole table from its snapshot.
func TestModeAllResumesSelfReferencingTable(t *testing.T) {
	const schema = "fkg_s"
	src, dst := sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, "")
	sandboxtest.MustExec(t, src,
		"DROP DATABASE IF EXISTS "+schema, "CREATE DATABASE "+schema,
		"CREATE TABLE "+schema+".tree (id INT PRIMARY KEY, pid INT, v INT, KEY (pid), "+
			"CONSTRAINT up FOREIGN KEY (pid) REFERENCES tree (id) ON DELETE CASCADE)",
		"INSERT INTO "+schema+".tree SELECT seq, NULL, seq FROM "+schema+".seq_1_to_2000",
		"INSERT INTO "+schema+".tree SELECT seq + 2000, seq, seq FROM "+schema+".seq_1_to_2000")
	task, copySchema := schema, schema+"_copy"
	cfg := taskFile(t, task, schema+".*", fmt.Sprintf("routes: [{schema: %s, target-schema: %s}]\nthreads: 1\npool-size: 1\nrows-per-chunk: 500\ndir: %s\nincremental: {worker-count: 4, batch: 20}",
		schema, copySchema, filepath.Join(t.TempDir(), "state")))
	seed := time.Now().UnixNano()
	t.Logf("workload seed %d", seed)
	gen := func(r *rand.Rand, n int) []string {
		x := 1 + r.Intn(2000)
		if r.Intn(4) == 0 {
			return []string{fmt.Sprintf("UPDATE %s.tree SET v = v + 1 WHERE id IN (%d, %d)", schema, x, x+2000)}
		}
		// Delete a parent (its child goes with it) and insert both again.
		return []string{
			fmt.Sprintf("DELETE FROM %s.tree WHERE id = %d", schema, x),
			fmt.Sprintf("INSERT INTO %s.tree VALUES (%d, NULL, %d)", schema, x, -n),
			fmt.Sprintf("INSERT INTO %s.tree VALUES (%d, %d, %d)", schema, x+2000, x, n),
		}
	}
	var w *fkWorkload
	// The first run copies the first chunks (parents) and is killed.
	killAfterChunksThen(t, dst, task, "`"+copySchema+"`.`tree`", 2, func() { w = startWorkload(t, src, seed, gen) },
		"migrate", "--config", cfg, "--mode", "all", "--commit-unit", "chunk", "--chunk-delay", "150ms")
	defer w.stop()
	checkpointsMatchData(t, dst, task, copySchema, "tree")
	if d, n := chunksDone(t, dst, task, copySchema, "tree"); d == n {
		t.Fatalf("the kill came too late: all %d chunks of tree are copied", n)
	}
	w.waitOps(t, 40)

	r := startAll(t, cfg)
	r.waitReplicating(t, task)
	out := r.out
	w.waitOps(t, 40)
	w.stop()
	r.waitApplied(t, src, dst, task)
	r.stop(t)
	t.Logf("rerun output:\n%s", out.String())
	if !strings.Contains(out.String(), "a foreign key references its own rows") {
		t.Errorf("the rerun does not say that it reloads tree whole:\n%s", out.String())
	}
	a, b := tableRows(t, src, schema, "tree"), tableRows(t, dst, copySchema, "tree")
	if strings.Join(a, "\n") != strings.Join(b, "\n") {
		t.Errorf("tree: %d rows on the source, %d on the target, contents differ", len(a), len(b))
	}
	if a, b := tableChecksum(t, src, schema, "tree"), tableChecksum(t, dst, copySchema, "tree"); a != b {
		t.Errorf("tree: CHECKSUM TABLE differs: source %s, target %s", a, b)
	}
}
