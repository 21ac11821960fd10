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

// TestSeedsTablesRenamedOrDroppedSince starts a new task at a position
// after which the source dropped, renamed and re-keyed tables before the
// task started (as while a long full copy runs). The tracker is seeded
// before the stream is read, so the source's list of tables at that moment
// is later than the start position: srn.a is gone (renamed to srn.b), and
// srn.b is another table than the one the target has under that name. The
// stream must apply on the target's tables as they are at the start
// position: the old srn.b dropped, srn.a renamed to srn.b and its unique key
// dropped (rows with equal v then deleted by the dropped key would delete
// the wrong ones), srn.c renamed away after rows went into it.
func TestSeedsTablesRenamedOrDroppedSince(t *testing.T) {
	src, dst := sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, "")
	setup := []string{"CREATE DATABASE srn",
		"CREATE TABLE srn.a (id INT PRIMARY KEY, v INT NOT NULL, UNIQUE KEY uv (v))",
		"CREATE TABLE srn.b (id INT PRIMARY KEY, w VARCHAR(10))",
		"CREATE TABLE srn.c (v INT NOT NULL, UNIQUE KEY uv (v))",
		"INSERT INTO srn.a SELECT seq, seq FROM srn.seq_1_to_20",
		"INSERT INTO srn.b VALUES (1,'x'),(2,'y')",
		"INSERT INTO srn.c SELECT seq FROM srn.seq_1_to_10"}
	sandboxtest.MustExec(t, dst, setup...)
	sandboxtest.MustExec(t, src, setup...)
	start := masterStatus(t, src)
	sandboxtest.MustExec(t, src,
		"DROP TABLE srn.b",
		"RENAME TABLE srn.a TO srn.b",
		"ALTER TABLE srn.b DROP INDEX uv",
		"INSERT INTO srn.b VALUES (21,5),(22,5),(23,6)",
		"DELETE FROM srn.b WHERE v=5 AND id>3",
		"UPDATE srn.b SET v=v+100 WHERE v=6",
		"INSERT INTO srn.c VALUES (11),(12)",
		"DELETE FROM srn.c WHERE v<3",
		"RENAME TABLE srn.c TO srn.d")
	cfg := taskConfig(t, "srn", srcInst, dstInst, start)
	cfg.Decode.Selected = func(r sluice.TableRef) bool { return r.Schema == "srn" }
	r := run(t, cfg)
	r.waitApplied(t, masterStatus(t, src))
	r.stop(t)
	for _, tbl := range []string{"srn.b", "srn.d"} {
		var q = "SELECT GROUP_CONCAT(HEX(id), ':', HEX(v) ORDER BY id) FROM " + tbl
		if tbl == "srn.d" {
			q = "SELECT GROUP_CONCAT(HEX(v) ORDER BY v) FROM " + tbl
		}
		var a, b string
		if err := src.QueryRow(q).Scan(&a); err != nil {
			t.Fatal(err)
		}
		if err := dst.QueryRow(q).Scan(&b); err != nil {
			t.Fatalf("target %s: %v", tbl, err)
		}
		if a != b {
			t.Errorf("%s: source %s, target %s", tbl, a, b)
		}
		var n1, n2, c1, c2 string
		if err := src.QueryRow("SHOW CREATE TABLE "+tbl).Scan(&n1, &c1); err != nil {
			t.Fatal(err)
		}
		if err := dst.QueryRow("SHOW CREATE TABLE "+tbl).Scan(&n2, &c2); err != nil {
			t.Fatal(err)
		}
		if c1 != c2 {
			t.Errorf("%s definitions differ:\nsource %s\ntarget %s", tbl, c1, c2)
		}
	}
	for _, gone := range []string{"a", "c"} {
		var n int
		if err := dst.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA='srn' AND TABLE_NAME=?", gone).Scan(&n); err != nil || n != 0 {
			t.Errorf("target still has srn.%s (%d, %v)", gone, n, err)
		}
	}
}
