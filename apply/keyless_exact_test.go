package apply_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestKeylessRowsMatchExactly: a row of a table without a key is found on
// the target by every column's exact value. Rows that differ only in a
// FLOAT or DOUBLE, by letter case in a _ci column, by a trailing space in a
// PAD SPACE collation (utf8mb4_bin included), or by accents must never be
// mistaken for one another (issue 13 bugs 3 and 4). The source chooses which
// row a DELETE/UPDATE ... LIMIT 1 changes; the target must change the same
// one. Seeded: a failure prints its seed (set SLUICE_TEST_SEED to rerun it).
func TestKeylessRowsMatchExactly(t *testing.T) {
	seedVal := sandboxtest.Seed(t)
	r := rand.New(rand.NewSource(seedVal))
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	seed(t, "keylessexact", src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE kx",
		"CREATE TABLE kx.f (a INT, s VARCHAR(4), f FLOAT, d DOUBLE)",
		"CREATE TABLE kx.ci (s VARCHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci, n INT)",
		"CREATE TABLE kx.bin (s VARCHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin, c CHAR(4) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci, n INT)",
		"CREATE TABLE kx.l1 (s VARCHAR(8) CHARACTER SET latin1 COLLATE latin1_swedish_ci, t TEXT CHARACTER SET latin1, n INT)",
		"CREATE TABLE kx.j (j JSON, b VARBINARY(4), n INT)")
	// The issue's own repro first.
	sandboxtest.MustExec(t, src, "INSERT INTO kx.f VALUES (1,'x',1.5,1),(1,'x',2.5,1)", "DELETE FROM kx.f WHERE f=2.5",
		"INSERT INTO kx.ci VALUES ('a',1),('A',1)", "DELETE FROM kx.ci WHERE s='A' COLLATE utf8mb4_bin",
		"INSERT INTO kx.bin VALUES ('a',NULL,1),('a ',NULL,1)", "UPDATE kx.bin SET n=2 WHERE s='a ' COLLATE utf8mb4_nopad_bin")
	floats := []string{"0.1", "0.2", "1.5", "2.5", "-0.1", "1e-30", "3.4e38", "100000.1", "NULL"}
	texts := []string{"a", "A", "a ", "á", "Á", "ä", "Ä", "e", "é", "É", "E", "ss", "ß", "", "NULL", "x\\0"}
	latin := []string{"a", "A", "a ", "ä", "Ä", "ö", "Ö", "", "NULL"}
	pick := func(l []string) string {
		v := l[r.Intn(len(l))]
		if v == "NULL" {
			return v
		}
		return "'" + v + "'"
	}
	for i := 0; i < 300; i++ {
		n := r.Intn(3)
		var q string
		switch r.Intn(8) {
		case 0:
			row := fmt.Sprintf("(%d,%s,%s,%s)", n, pick([]string{"x", "X", "x "}), pick(floats), pick(floats))
			q = "INSERT INTO kx.f VALUES " + row + "," + row
		case 1:
			q = fmt.Sprintf("INSERT INTO kx.ci VALUES (%s,%d),(%s,%d)", pick(texts), n, pick(texts), n)
		case 2:
			q = fmt.Sprintf("INSERT INTO kx.bin VALUES (%s,%s,%d)", pick(texts), pick([]string{"a", "A", "á", "NULL", ""}), n)
		case 3:
			q = fmt.Sprintf("INSERT INTO kx.l1 VALUES (%s,%s,%d)", pick(latin), pick(latin), n)
		case 4:
			q = fmt.Sprintf("INSERT INTO kx.j VALUES (%s,%s,%d)", pick([]string{`{"a":1}`, `{"a": 1}`, `[1,2]`, "NULL"}), pick([]string{"a", "a ", "A", "NULL"}), n)
		case 5:
			tbl := []string{"f", "ci", "bin", "l1", "j"}[r.Intn(5)]
			q = fmt.Sprintf("DELETE FROM kx.%s WHERE n=%d ORDER BY RAND(%d) LIMIT 1", tbl, n, r.Int())
			if tbl == "f" {
				q = fmt.Sprintf("DELETE FROM kx.f WHERE a=%d ORDER BY RAND(%d) LIMIT 1", n, r.Int())
			}
		default:
			tbl := []string{"ci", "bin", "l1", "j"}[r.Intn(4)]
			q = fmt.Sprintf("UPDATE kx.%s SET n=n+10 WHERE n=%d ORDER BY RAND(%d) LIMIT 1", tbl, n, r.Int())
			if r.Intn(3) == 0 {
				q = fmt.Sprintf("UPDATE kx.f SET f=%s WHERE a=%d ORDER BY RAND(%d) LIMIT 1", pick(floats), n, r.Int())
			}
		}
		if _, err := src.Exec(q); err != nil {
			t.Fatalf("seed %d: %s: %v", seedVal, q, err)
		}
	}
	until := sourcePos(t, src)
	if _, err := replicate(context.Background(), srcInst, runOpts{task: "keylessexact", workers: 4, until: until}); err != nil {
		t.Fatalf("seed %d: %v", seedVal, err)
	}
	for _, tbl := range []string{"kx.f", "kx.ci", "kx.bin", "kx.l1", "kx.j"} {
		a, b := hexDump(t, src, tbl), hexDump(t, dst, tbl)
		if a != b {
			t.Errorf("seed %d: %s differs:\nsource:\n%s\ntarget:\n%s", seedVal, tbl, a, b)
		}
	}
}

// hexDump is every row of table as the HEX() of each column, sorted (a
// keyless table compares as a multiset of rows).
func hexDump(tb testing.TB, db *sql.DB, table string) string {
	tb.Helper()
	schema, name, _ := strings.Cut(table, ".")
	rows, err := db.Query("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA=? AND TABLE_NAME=? ORDER BY ORDINAL_POSITION", schema, name)
	if err != nil {
		tb.Fatal(err)
	}
	var exprs []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			tb.Fatal(err)
		}
		exprs = append(exprs, "IFNULL(HEX(`"+c+"`),'NULL')")
	}
	rows.Close()
	var out []string
	rs, err := db.Query("SELECT CONCAT_WS('|'," + strings.Join(exprs, ",") + ") FROM " + table)
	if err != nil {
		tb.Fatal(err)
	}
	defer rs.Close()
	for rs.Next() {
		var v string
		if err := rs.Scan(&v); err != nil {
			tb.Fatal(err)
		}
		out = append(out, v)
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}
