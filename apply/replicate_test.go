package apply_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/apply"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestReplicateTypesAndKeys replicates DDL and DML on tables with a primary
// key, with only a unique key, and with no key at all (duplicate rows), over
// many column types, and checks the target equals the source row for row.
func TestReplicateTypesAndKeys(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	until0 := seed(t, "types", src)
	_ = until0
	sandboxtest.MustExec(t, src,
		"CREATE DATABASE ty",
		`CREATE TABLE ty.a (id INT UNSIGNED NOT NULL PRIMARY KEY, big BIGINT UNSIGNED, s VARCHAR(50), c CHAR(3),
			bin VARBINARY(20), bl BLOB, d DECIMAL(20,6), f FLOAT, db DOUBLE, dt DATETIME(6), ts TIMESTAMP(3) NULL,
			dd DATE, tm TIME(2), y YEAR, e ENUM('x','y','z'), st SET('p','q','r'), b BIT(10), j JSON, mi MEDIUMINT UNSIGNED,
			l1 VARCHAR(10) CHARACTER SET latin1, g INT AS (id * 2) VIRTUAL)`,
		"CREATE TABLE ty.u (a INT NOT NULL, b VARCHAR(10) NOT NULL, v INT, UNIQUE KEY (b))",
		"CREATE TABLE ty.k (a INT, b VARCHAR(10))",
	)
	sandboxtest.MustExec(t, src,
		`INSERT INTO ty.a (id,big,s,c,bin,bl,d,f,db,dt,ts,dd,tm,y,e,st,b,j,mi,l1) VALUES
			(1, 18446744073709551615, 'it''s "q" \\ \n', 'abc', X'00FF27', X'DEADBEEF00', -12345678901234.123456, 1.5, 0.1,
			 '2024-02-29 23:59:59.123456', '2024-01-01 00:00:01.5', '1999-12-31', '-12:30:00.25', 2024, 'y', 'p,r', b'1010101010',
			 '{"k": [1, 2, "x"]}', 16777215, _latin1 X'636166E9'),
			(2, 0, NULL, '', '', '', 0, -3.25e10, -1e-300, '1000-01-01 00:00:00', NULL, NULL, NULL, NULL, NULL, '', NULL, NULL, 0, NULL),
			(3, 5, 'ünïcødé 😀', 'x', NULL, NULL, 1, 0, 0, NOW(), NOW(), CURDATE(), CURTIME(), 1901, 'z', 'q', 0, '[]', 1, 'x')`,
		"UPDATE ty.a SET s='changed', big=big-1 WHERE id=1",
		"DELETE FROM ty.a WHERE id=2",
		"UPDATE ty.a SET id=20 WHERE id=3",
		"INSERT INTO ty.u VALUES (1,'one',1),(2,'two',2),(3,'Three',3)",
		"UPDATE ty.u SET v=v*10, a=a+100",
		"DELETE FROM ty.u WHERE b='two'",
		"INSERT INTO ty.u VALUES (4,'two',4)",
		"INSERT INTO ty.k VALUES (1,'dup'),(1,'dup'),(1,'dup'),(2,NULL),(3,'x')",
		"UPDATE ty.k SET b='one' WHERE a=1 LIMIT 1",
		"DELETE FROM ty.k WHERE a=1 AND b='dup' LIMIT 1",
		"UPDATE ty.k SET a=20 WHERE b IS NULL",
	)
	// A transaction mixing tables, and one rolled back (not in the binlog).
	tx, err := src.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"INSERT INTO ty.a (id, s) VALUES (100, 'tx')", "UPDATE ty.u SET v=NULL WHERE a=101", "INSERT INTO ty.k VALUES (9, 'tx')"} {
		if _, err := tx.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	until := sourcePos(t, src)
	st, err := replicate(context.Background(), srcInst, runOpts{task: "types", workers: 4, until: until})
	if err != nil {
		t.Fatal(err)
	}
	sameTables(t, src, dst, "ty.a", "ty.u", "ty.k")
	if st.Applied.File != until.File || st.Applied.Pos != until.Pos || st.Applied.GTIDSet != until.GTIDSet {
		t.Fatalf("applied position %v, want %v", st.Applied, until)
	}
	if st.DDL != 4 {
		t.Errorf("DDL applied: %d, want 4", st.DDL)
	}
	// A restart at the end applies nothing twice: rows stay equal and the
	// checkpoint stays put.
	if _, err := replicate(context.Background(), srcInst, runOpts{task: "types", until: until}); err != nil {
		t.Fatal(err)
	}
	sameTables(t, src, dst, "ty.a", "ty.u", "ty.k")
	db, err := apply.OpenTarget(context.Background(), dstInst.Endpoint(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a, _ := apply.New(applierConfig(runOpts{task: "types"}), db)
	p, ok, err := a.Checkpoint(context.Background())
	if err != nil || !ok || p.File != until.File || p.Pos != until.Pos || p.GTIDSet != until.GTIDSet {
		t.Fatalf("checkpoint %v %v %v, want %v", p, ok, err, until)
	}
}

// TestUnsupportedDDLPauses checks that a DDL the tracker cannot follow stops
// replication with ErrUnsupportedDDL, after everything before it has been
// applied and with nothing of it or after it applied.
func TestUnsupportedDDLPauses(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	seed(t, "unsup", src)
	sandboxtest.MustExec(t, src,
		"CREATE DATABASE un",
		"CREATE TABLE un.t (id INT PRIMARY KEY, v INT)",
		"INSERT INTO un.t VALUES (1,1),(2,2)",
	)
	before := sourcePos(t, src)
	sandboxtest.MustExec(t, src,
		"ALTER TABLE un.t PARTITION BY HASH(id) PARTITIONS 2",
		"INSERT INTO un.t VALUES (3,3)",
	)
	until := sourcePos(t, src)
	_, err := replicate(context.Background(), srcInst, runOpts{task: "unsup", until: until})
	if !errors.Is(err, sluice.ErrUnsupportedDDL) {
		t.Fatalf("got %v, want ErrUnsupportedDDL", err)
	}
	var se *sluice.Error
	if !errors.As(err, &se) || se.Hint == "" {
		t.Fatalf("want a *sluice.Error with a hint, got %T %v", err, err)
	}
	t.Logf("error shown to the user: %v", err)
	var n int
	if err := dst.QueryRow("SELECT COUNT(*) FROM un.t").Scan(&n); err != nil || n != 2 {
		t.Fatalf("target rows %d (%v), want the 2 rows before the DDL", n, err)
	}
	var parts int
	if err := dst.QueryRow("SELECT COUNT(*) FROM information_schema.PARTITIONS WHERE TABLE_SCHEMA='un' AND TABLE_NAME='t' AND PARTITION_NAME IS NOT NULL").Scan(&parts); err != nil || parts != 0 {
		t.Fatalf("target partitions %d (%v): the DDL must not be applied", parts, err)
	}
	db, err := apply.OpenTarget(context.Background(), dstInst.Endpoint(), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a, _ := apply.New(applierConfig(runOpts{task: "unsup"}), db)
	p, _, err := a.Checkpoint(context.Background())
	if err != nil || p.File != before.File || p.Pos != before.Pos {
		t.Fatalf("checkpoint %v (%v), want the position before the DDL %v", p, err, before)
	}
}

// TestCompactedGroups replays row histories that the per-row compaction of
// a group must reduce correctly: insert/update/delete of one row inside one
// transaction, delete + re-insert (becomes an UPDATE), primary key changes,
// chains of key changes, and case-insensitive keys.
func TestCompactedGroups(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	seed(t, "compact", src)
	sandboxtest.MustExec(t, src,
		"CREATE DATABASE cg",
		"CREATE TABLE cg.t (id INT PRIMARY KEY, v VARCHAR(20), k INT, KEY (k))",
		"CREATE TABLE cg.s (name VARCHAR(20) PRIMARY KEY, n INT)",
		"CREATE TABLE cg.c (a INT, b INT, v INT, PRIMARY KEY (a, b))",
		"INSERT INTO cg.t VALUES (2,'two',2),(4,'four',4),(6,'six',6),(7,'seven',7)",
		"INSERT INTO cg.s VALUES ('x', 1)",
		"INSERT INTO cg.c VALUES (1,1,1),(1,2,2),(2,1,3)",
	)
	tx, err := src.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"INSERT INTO cg.t VALUES (1,'one',1)", "UPDATE cg.t SET v='uno' WHERE id=1", "DELETE FROM cg.t WHERE id=1", "INSERT INTO cg.t VALUES (1,'again',1)",
		"UPDATE cg.t SET id=3 WHERE id=2", "UPDATE cg.t SET id=2 WHERE id=3", "UPDATE cg.t SET id=20, v='moved' WHERE id=2",
		"DELETE FROM cg.t WHERE id=4", "INSERT INTO cg.t VALUES (4,'four again',44)",
		"INSERT INTO cg.t VALUES (5,'five',5)", "DELETE FROM cg.t WHERE id=5",
		"UPDATE cg.t SET id=8 WHERE id=7", "UPDATE cg.t SET id=7, v='back' WHERE id=6",
		"UPDATE cg.s SET name='X', n=2 WHERE name='x'", "INSERT INTO cg.s VALUES ('y', 3)", "DELETE FROM cg.s WHERE name='Y'", "INSERT INTO cg.s VALUES ('Y', 4)",
		"DELETE FROM cg.c WHERE a=1", "INSERT INTO cg.c VALUES (1,2,20)", "UPDATE cg.c SET b=9 WHERE a=2",
	} {
		if _, err := tx.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// The same history spread over small transactions that share one group.
	sandboxtest.MustExec(t, src,
		"INSERT INTO cg.t VALUES (100,'a',1)", "UPDATE cg.t SET k=2 WHERE id=100", "DELETE FROM cg.t WHERE id=100",
		"INSERT INTO cg.t VALUES (100,'b',3)", "UPDATE cg.t SET id=101 WHERE id=100",
	)
	until := sourcePos(t, src)
	st, err := replicate(context.Background(), srcInst, runOpts{task: "compact", workers: 2, batch: 50, until: until})
	if err != nil {
		t.Fatal(err)
	}
	sameTables(t, src, dst, "cg.t", "cg.s", "cg.c")
	if st.Compacted == 0 {
		t.Fatal("no group was compacted; the test did not exercise compaction")
	}
}
