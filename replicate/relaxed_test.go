package replicate_test

import (
	"database/sql"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/task"
)

// TestRelaxedTaskFile: incremental.commit-order reaches the applier.
func TestRelaxedTaskFile(t *testing.T) {
	sandboxtest.SkipShort(t)
	for order, want := range map[string]bool{"relaxed": true, "source": false} {
		tc, err := task.Parse([]byte(taskYAML("rt", t.TempDir(), srcInst, dstInst, sluice.Position{File: "b.000001", Pos: 4}, order)))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := replicate.FromTask(tc)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Apply.RelaxedOrder != want {
			t.Errorf("commit-order %s: RelaxedOrder %v", order, cfg.Apply.RelaxedOrder)
		}
	}
}

// TestRelaxedKill9ExactlyOnce is TestKill9ExactlyOnce with commit-order:
// relaxed: sluice is killed with SIGKILL at random moments while sysbench
// oltp_write_only and plain INSERTs into a table without a key run on the
// source, restarted each time, and finally the target must equal the
// source. Out of order, groups committed past the low-water mark at a kill
// must be skipped on restart and no others: a lost transaction, or a
// doubled one (an extra row in the keyless table), fails the comparison.
func TestRelaxedKill9ExactlyOnce(t *testing.T) {
	withDone := 0
	r := killScenario{schema: "rx9", dstName: "dstrx", tables: 4, order: "relaxed", afterKill: func(d *sql.DB) {
		var n int
		if err := d.QueryRow("SELECT COUNT(*) FROM sluice_meta.apply_checkpoint WHERE task='rx9' AND done IS NOT NULL").Scan(&n); err == nil && n > 0 {
			withDone++
		}
	}}.run(t)
	t.Logf("%d kills, %d distinct applied positions at the kills, %d kills left groups committed out of order in the checkpoint", r.kills, r.positions, withDone)
}
