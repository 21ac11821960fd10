package replicate_test

import (
	"fmt"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestUniqueKeyMovesDoNotStall moves values of a secondary unique key from
// row to row, one small transaction at a time, so that groups on different
// workers touch neighbouring entries of the unique index. InnoDB's
// duplicate checks lock those entries (and the gaps before them) even at
// READ COMMITTED, so a later group, done and waiting for its commit turn,
// can hold a lock that an earlier group needs: a deadlock the server
// cannot see, because one side of it is the applier's commit order. The
// applier must resolve it itself instead of waiting out
// innodb_lock_wait_timeout and restarting from the checkpoint: with the
// PROCESS privilege by asking the server who blocks whom, without it by
// rolling back the waiting groups after a second of no progress.
func TestUniqueKeyMovesDoNotStall(t *testing.T) {
	dst := sandboxtest.MustOpen(t, dstInst, "")
	sandboxtest.MustExec(t, dst, "CREATE USER IF NOT EXISTS noproc@'127.0.0.1'",
		"GRANT ALL ON *.* TO noproc@'127.0.0.1'", "REVOKE PROCESS ON *.* FROM noproc@'127.0.0.1'")
	for _, c := range []struct{ name, user string }{{"process", "root"}, {"noprocess", "noproc"}} {
		t.Run(c.name, func(t *testing.T) {
			schema := "uk_" + c.name
			src := sandboxtest.MustOpen(t, srcInst, "")
			start := masterStatus(t, src)
			sandboxtest.MustExec(t, src, "CREATE DATABASE "+schema,
				"CREATE TABLE "+schema+".u (id INT PRIMARY KEY, u INT NOT NULL, v VARCHAR(20), UNIQUE KEY u (u))",
				"INSERT INTO "+schema+".u SELECT seq, seq, 'v' FROM "+schema+".seq_1_to_400")
			cfg := taskConfig(t, schema, srcInst, dstInst, start)
			cfg.Target.User = c.user
			cfg.Decode.Selected = func(r sluice.TableRef) bool { return r.Schema == schema }
			r := run(t, cfg)
			for i := 1; i <= 150; i++ {
				// Each pair frees a value and gives it to another row.
				sandboxtest.MustExec(t, src, fmt.Sprintf("UPDATE %s.u SET u = u + 100000 WHERE id = %d", schema, i),
					fmt.Sprintf("UPDATE %s.u SET u = %d WHERE id = %d", schema, i, i+200))
			}
			s := r.waitApplied(t, masterStatus(t, src))
			r.stop(t)
			sameData(t, srcInst, dstInst, schema)
			if s.Restarts != 0 {
				t.Errorf("the applier restarted %d times (lock wait timeouts between its own workers)", s.Restarts)
			}
		})
	}
}
