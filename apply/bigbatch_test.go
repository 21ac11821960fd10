package apply_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// globalStatus reads one counter of SHOW GLOBAL STATUS.
func globalStatus(tb testing.TB, db *sql.DB, name string) int64 {
	tb.Helper()
	var k string
	var v int64
	if err := db.QueryRow("SHOW GLOBAL STATUS LIKE '"+name+"'").Scan(&k, &v); err != nil {
		tb.Fatal(err)
	}
	return v
}

// TestStreamedBatches: a streamed (large) transaction writes runs of
// UPDATEs and DELETEs of a table keyed by its primary key alone as
// multi-row statements (issue 34: one statement per row was 20x slower
// than a native replica), and everything the multi-row statements must
// not merge still lands as the source left it: a row changed twice in a
// row, primary key changes in the middle of a run (in the order the
// source made them, which a single statement could not repeat), a row
// deleted, inserted again and deleted again, string keys under a
// case-insensitive collation, a composite key, a secondary unique key,
// generated columns, a keyless table, foreign keys with a cascade, rows
// written with foreign_key_checks off, and a ROLLBACK TO a savepoint in
// the middle of a run. The source's statements interleave tables, so runs
// end and start again all through the transaction.
func TestStreamedBatches(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	task := "bigbatch"
	seed(t, task, src)
	const n = 1000
	sandboxtest.MustExec(t, src,
		"CREATE DATABASE bb",
		"CREATE TABLE bb.t (id INT PRIMARY KEY, k INT NOT NULL, pad CHAR(60) NOT NULL, KEY (k))",
		"CREATE TABLE bb.s (name VARCHAR(20) COLLATE utf8mb4_general_ci PRIMARY KEY, n INT)",
		"CREATE TABLE bb.c (a INT, b INT, v INT, PRIMARY KEY (a, b))",
		"CREATE TABLE bb.u (id INT PRIMARY KEY, u INT, v INT, UNIQUE KEY (u))",
		"CREATE TABLE bb.g (id INT PRIMARY KEY, n INT, d INT AS (n * 2) STORED, e INT AS (n + 1) VIRTUAL)",
		"CREATE TABLE bb.nk (a INT, b VARCHAR(10))",
		"CREATE TABLE bb.p (id INT PRIMARY KEY, v INT)",
		"CREATE TABLE bb.ch (id INT PRIMARY KEY, pid INT, v INT, FOREIGN KEY (pid) REFERENCES bb.p (id) ON DELETE CASCADE)",
		fmt.Sprintf("INSERT INTO bb.t SELECT seq, seq, CONCAT('p', seq) FROM bb.seq_1_to_%d", n),
		"INSERT INTO bb.s VALUES ('a',1),('B',2),('c',3),('D',4),('e',5)",
		"INSERT INTO bb.c SELECT seq DIV 10, seq MOD 10, seq FROM bb.seq_1_to_100",
		"INSERT INTO bb.u SELECT seq, seq, seq FROM bb.seq_1_to_100",
		"INSERT INTO bb.g (id, n) SELECT seq, seq FROM bb.seq_1_to_300",
		"INSERT INTO bb.nk SELECT seq MOD 7, 'x' FROM bb.seq_1_to_50",
		"INSERT INTO bb.p SELECT seq, seq FROM bb.seq_1_to_50",
		"INSERT INTO bb.ch SELECT seq, 1 + seq MOD 50, seq FROM bb.seq_1_to_200",
	)
	until := sourcePos(t, src)
	if _, err := replicate(context.Background(), srcInst, runOpts{task: task, until: until}); err != nil {
		t.Fatal(err)
	}
	updates0, multi0 := globalStatus(t, dst, "Com_update"), globalStatus(t, dst, "Com_update_multi")
	deletes0 := globalStatus(t, dst, "Com_delete")

	tx, err := src.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"UPDATE bb.t SET k = k + 1000, pad = CONCAT(pad, 'x')",
		// Each row twice in a row: the second change of a row ends the run.
		"UPDATE bb.t SET k = k + 1 WHERE id <= 300",
		"UPDATE bb.t SET k = k + 1 WHERE id <= 300",
		// Key changes, in an order only the source's row order allows.
		"UPDATE bb.t SET id = id + 1 WHERE id > 900 ORDER BY id DESC",
		"UPDATE bb.t SET pad = 'moved' WHERE id > 950",
		"DELETE FROM bb.t WHERE id % 3 = 0",
		"INSERT INTO bb.t VALUES (3, 3, 'again')",
		"DELETE FROM bb.t WHERE id IN (3, 4, 5)",
		"INSERT INTO bb.t VALUES (3, 33, 'thrice')",
		"UPDATE bb.s SET n = n + 10",
		"DELETE FROM bb.s WHERE name IN ('A', 'd')",
		"INSERT INTO bb.s VALUES ('A', 100)",
		"UPDATE bb.c SET v = v + 1",
		"DELETE FROM bb.c WHERE b = 3",
		// Swapping unique values one row at a time.
		"UPDATE bb.u SET u = NULL WHERE id = 1", "UPDATE bb.u SET u = 1 WHERE id = 2", "UPDATE bb.u SET u = 2 WHERE id = 1",
		"UPDATE bb.u SET v = v * 2",
		"DELETE FROM bb.u WHERE id > 90",
		"UPDATE bb.g SET n = n + 5",
		"DELETE FROM bb.g WHERE id > 250",
		"UPDATE bb.nk SET b = 'y' WHERE a = 3",
		"DELETE FROM bb.nk WHERE a = 4",
		"DELETE FROM bb.p WHERE id <= 10",
		"UPDATE bb.ch SET v = -v",
		"SET foreign_key_checks = 0",
		"DELETE FROM bb.p WHERE id = 20",
		"UPDATE bb.t SET k = -k WHERE id <= 100",
		"SET foreign_key_checks = 1",
		"UPDATE bb.t SET k = -k WHERE id <= 200",
		"SAVEPOINT sp",
		"UPDATE bb.t SET pad = 'undone' WHERE id BETWEEN 500 AND 700",
		"DELETE FROM bb.t WHERE id BETWEEN 400 AND 450",
		"ROLLBACK TO SAVEPOINT sp",
		"UPDATE bb.t SET pad = 'kept' WHERE id BETWEEN 600 AND 800",
		"DELETE FROM bb.t WHERE id % 7 = 0",
	} {
		if _, err := tx.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	until = sourcePos(t, src)
	// 16 KB: the transaction (about 400 KB) is streamed after its first rows.
	if _, err := replicate(context.Background(), srcInst, runOpts{task: task, large: 16 << 10, until: until}); err != nil {
		t.Fatal(err)
	}
	sameTables(t, src, dst, "bb.t", "bb.s", "bb.c", "bb.u", "bb.g", "bb.nk", "bb.p", "bb.ch")
	// About 3,000 UPDATE and 1,000 DELETE rows of bb.t went as multi-row
	// statements of up to 1,000 rows; one statement per row would be
	// thousands.
	updates := globalStatus(t, dst, "Com_update") - updates0
	multi := globalStatus(t, dst, "Com_update_multi") - multi0
	deletes := globalStatus(t, dst, "Com_delete") - deletes0
	t.Logf("target statements: %d UPDATE, %d multi-table UPDATE, %d DELETE", updates, multi, deletes)
	if multi == 0 || updates > 1200 || deletes > 200 {
		t.Fatalf("the streamed transaction was written one statement per row: %d UPDATE, %d multi-table UPDATE, %d DELETE", updates, multi, deletes)
	}
	sandboxtest.MustExec(t, src, "DROP DATABASE bb")
	sandboxtest.MustExec(t, dst, "DROP DATABASE bb")
}
