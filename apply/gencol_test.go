package apply_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/sluice-db/sluice/apply"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestLossyGeneratedColumns: a source that is not strict (or INSERT/UPDATE
// IGNORE) stores generated column values computed with a warning: text
// converted to a narrower character set ('?'), an integer clipped at its
// range, a string cut to its length, a DECIMAL rounded. The row events
// carry those values; the target must store the same (as a MariaDB replica
// does), not stop because its strict session turns the computation into an
// error (difftest bug L). Tables with a key and without, single rows and
// multi-row statements, both commit orders. Seeded: the values are random.
func TestLossyGeneratedColumns(t *testing.T) {
	seedVal := sandboxtest.Seed(t)
	r := rand.New(rand.NewSource(seedVal))
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	for _, relaxed := range []bool{false, true} {
		name := fmt.Sprintf("gc_%v", relaxed)
		task := "gencol_" + name
		seed(t, task, src)
		sandboxtest.MustExec(t, src, "CREATE DATABASE "+name,
			"CREATE TABLE "+name+".k (id INT PRIMARY KEY, a VARCHAR(20) CHARACTER SET utf8mb4, n BIGINT, "+
				"s VARCHAR(20) CHARACTER SET latin1 AS (CONCAT(a, '|')) STORED, "+
				"o INT AS (n * 2 + 1) STORED, "+
				"c CHAR(3) AS (a) STORED, "+
				"d DECIMAL(6,1) AS (n / 3) STORED, "+
				"v VARCHAR(20) CHARACTER SET latin1 AS (CONCAT('<', a)) VIRTUAL)",
			"CREATE TABLE "+name+".nk (a VARCHAR(20) CHARACTER SET utf8mb4, n BIGINT, "+
				"s VARCHAR(20) CHARACTER SET latin1 AS (CONCAT(a, '|')) STORED, o INT AS (n * 2 + 1) STORED)",
			// Every statement that looks at a row of these computes v, with
			// a warning for a binary b ("Truncated incorrect DOUBLE value"),
			// a DELETE too, which stores nothing (difftest seed 2001).
			"CREATE TABLE "+name+".bv (id INT PRIMARY KEY, b VARBINARY(20), v BIGINT AS (b * 2 + 1) VIRTUAL)",
			"CREATE TABLE "+name+".nbv (b VARBINARY(20), n INT, v BIGINT AS (b * 2 + 1) VIRTUAL)")
		texts := []string{"x", "Ǆ", "é", "abcdef", "😀", "ab", "ÿÿÿÿ"}
		nums := []string{"1", "-7", "3000000000", "-3000000000", "2147483647", "100", "NULL"}
		row := func(id int) string {
			return fmt.Sprintf("(%d, '%s', %s)", id, texts[r.Intn(len(texts))], nums[r.Intn(len(nums))])
		}
		var stmts []string
		for i := 1; i <= 40; i++ {
			stmts = append(stmts, fmt.Sprintf("INSERT INTO %s.k (id, a, n) VALUES %s", name, row(i)))
			if i%4 == 0 {
				stmts = append(stmts, fmt.Sprintf("INSERT INTO %s.k (id, a, n) VALUES %s, %s", name, row(1000+i), row(2000+i)))
			}
			if i%3 == 0 {
				stmts = append(stmts, fmt.Sprintf("UPDATE %s.k SET a = '%s', n = %s WHERE id = %d", name, texts[r.Intn(len(texts))], nums[r.Intn(len(nums))], r.Intn(i)+1))
			}
			nk := row(0)
			nk = "(" + nk[strings.Index(nk, ",")+2:]
			stmts = append(stmts, fmt.Sprintf("INSERT INTO %s.nk (a, n) VALUES %s", name, nk))
		}
		for i := 1; i <= 12; i++ {
			b := fmt.Sprintf("X'%016x'", r.Uint64())
			if i%4 == 0 {
				b = "'12'"
			}
			stmts = append(stmts, fmt.Sprintf("INSERT INTO %s.bv (id, b) VALUES (%d, %s)", name, i, b),
				fmt.Sprintf("INSERT INTO %s.nbv (b, n) VALUES (%s, %d)", name, b, i%3))
		}
		stmts = append(stmts, fmt.Sprintf("UPDATE %s.bv SET b = X'ff00' WHERE id = 3", name),
			fmt.Sprintf("DELETE FROM %s.bv WHERE id IN (2, 4, 5)", name),
			fmt.Sprintf("UPDATE %s.nbv SET n = 9 WHERE n = 1 LIMIT 1", name),
			fmt.Sprintf("DELETE FROM %s.nbv WHERE n = 2", name))
		stmts = append(stmts, fmt.Sprintf("UPDATE %s.nk SET n = n + 1 WHERE a = 'Ǆ' LIMIT 1", name),
			fmt.Sprintf("DELETE FROM %s.k WHERE id %% 5 = 0", name))
		// The source session is not strict, as many are.
		conn, err := src.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(context.Background(), "SET SESSION sql_mode = ''"); err != nil {
			t.Fatal(err)
		}
		for _, q := range stmts {
			if _, err := conn.ExecContext(context.Background(), q); err != nil {
				t.Fatalf("seed %d: %s: %v", seedVal, q, err)
			}
		}
		// A strict session with IGNORE stores the same kind of values.
		if _, err := src.Exec(fmt.Sprintf("INSERT IGNORE INTO %s.k (id, a, n) VALUES (5000, 'Ǆ', 3000000000)", name)); err != nil {
			t.Fatal(err)
		}
		conn.Close()
		var warned int
		if err := src.QueryRow(fmt.Sprintf("SELECT COUNT(*) FROM %s.k WHERE s LIKE '%%?%%' OR o IN (2147483647, -2147483648)", name)).Scan(&warned); err != nil || warned == 0 {
			t.Fatalf("seed %d: the source stored no lossy generated value (%d, %v): the test tests nothing", seedVal, warned, err)
		}
		until := sourcePos(t, src)
		if _, err := replicate(context.Background(), srcInst, runOpts{task: task, until: until, relaxed: relaxed, workers: 4}); err != nil {
			t.Fatalf("seed %d, relaxed %v: %v", seedVal, relaxed, err)
		}
		sameTables(t, src, dst, name+".k", name+".nk", name+".bv", name+".nbv")
	}
}

// TestGeneratedColumnDiffers: a target whose generation expression differs
// from the source's stores another value; the row check stops the task
// instead of keeping it, with one line that names the table and the row,
// and commits nothing of the transaction.
func TestGeneratedColumnDiffers(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	task := "gencol_differs"
	seed(t, task, src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE gd", "CREATE TABLE gd.t (id INT PRIMARY KEY, a INT, g INT AS (a + 1) STORED)")
	until := sourcePos(t, src)
	if _, err := replicate(context.Background(), srcInst, runOpts{task: task, until: until}); err != nil {
		t.Fatal(err)
	}
	sandboxtest.MustExec(t, dst, "ALTER TABLE gd.t MODIFY g INT AS (a + 2) STORED")
	sandboxtest.MustExec(t, src, "INSERT INTO gd.t (id, a) VALUES (1, 10)")
	until = sourcePos(t, src)
	_, err := replicate(context.Background(), srcInst, runOpts{task: task, until: until})
	if !errors.Is(err, apply.ErrTargetRowDiffers) {
		t.Fatalf("got %v, want ErrTargetRowDiffers", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "`gd`.`t`") || !strings.Contains(msg, "`id`=1") || strings.Contains(msg, "\n") {
		t.Errorf("error %q does not name the table and row on one line", msg)
	}
	if n := count(t, dst, "SELECT COUNT(*) FROM gd.t"); n != 0 {
		t.Errorf("the differing row was committed (%d rows)", n)
	}
	var mode string
	if err := dst.QueryRow("SELECT @@GLOBAL.sql_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
}
