package replicate_test

import (
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestSeedsSchemaFromTarget starts a new task on tables that existed before
// its start position (as after a full copy: same tables on both sides,
// nothing about them in the stream). The schema tracker must know them, or
// the ALTER TABLEs that follow would stop replication as "not tracked".
func TestSeedsSchemaFromTarget(t *testing.T) {
	src, dst := sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, "")
	setup := []string{"CREATE DATABASE sd", "CREATE TABLE sd.u (id INT PRIMARY KEY, u INT NOT NULL, v VARCHAR(20), UNIQUE KEY u (u))",
		"INSERT INTO sd.u SELECT seq, seq, 'v' FROM sd.seq_1_to_200"}
	// The target gets the same tables without replicating the statements.
	sandboxtest.MustExec(t, dst, setup...)
	sandboxtest.MustExec(t, src, setup...)
	start := masterStatus(t, src)
	cfg := taskConfig(t, "sd", srcInst, dstInst, start)
	cfg.Decode.Selected = func(r sluice.TableRef) bool { return r.Schema == "sd" }
	r := run(t, cfg)
	sandboxtest.MustExec(t, src,
		"ALTER TABLE sd.u ADD COLUMN extra INT DEFAULT 7",
		"INSERT INTO sd.u (id, u, v, extra) VALUES (1000, 1000, 'new', 1)",
		"ALTER TABLE sd.u MODIFY COLUMN v VARCHAR(40)")
	sandboxtest.MustExec(t, src, "UPDATE sd.u SET u = u + 100000 WHERE id = 1", "UPDATE sd.u SET u = 1 WHERE id = 2")
	r.waitApplied(t, masterStatus(t, src))
	r.stop(t)
	sameData(t, srcInst, dstInst, "sd")
}
