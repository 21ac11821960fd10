package apply_test

import (
	"context"
	"testing"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestMariaDBOnlyDDL replicates DDL that MariaDB runs and the TiDB parser
// could not read, which stopped replication ("unsupported DDL: cannot
// parse", difftest bug C): NO PAD, uca1400, utf8mb3 and single-byte
// collations; SPATIAL indexes in CREATE TABLE, ALTER TABLE and CREATE
// INDEX; CREATE OR REPLACE TABLE; executable comments with MariaDB's
// six-digit versions and /*M!; PERSISTENT; names TiDB reserves and MariaDB
// does not. The target must end with the source's definitions (SHOW CREATE
// TABLE) and rows.
func TestMariaDBOnlyDDL(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	task := "mariadb_ddl"
	seed(t, task, src)
	sandboxtest.MustExec(t, src,
		"CREATE DATABASE md",
		"CREATE TABLE md.np (id INT PRIMARY KEY, a VARCHAR(10) COLLATE utf8mb4_nopad_bin, b CHAR(3) CHARACTER SET latin1 COLLATE latin1_swedish_nopad_ci, "+
			"c VARCHAR(10) COLLATE utf8mb4_uca1400_ai_ci, d VARCHAR(5) CHARACTER SET utf8mb3 COLLATE utf8mb3_general_nopad_ci, e VARCHAR(5) CHARACTER SET cp1251, "+
			"UNIQUE KEY ua (a)) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_nopad_ci",
		"INSERT INTO md.np VALUES (1, 'ab', 'é', 'Straße', 'x', 'д'), (2, 'ab ', 'é ', 'strasse', 'y ', 'Д')",
		"ALTER TABLE md.np MODIFY a VARCHAR(12) COLLATE utf8mb4_nopad_bin, ADD COLUMN f VARCHAR(4) COLLATE uca1400_as_cs",
		"UPDATE md.np SET b = 'ö', f = 'Ab' WHERE a = 'ab '",
		"CREATE TABLE md.sp (id INT PRIMARY KEY, g GEOMETRY NOT NULL, SPATIAL INDEX sg (g))",
		"INSERT INTO md.sp VALUES (1, ST_GeomFromText('POINT(1 2)'))",
		"ALTER TABLE md.sp ADD SPATIAL INDEX (g)",
		"CREATE SPATIAL INDEX s3 ON md.sp (g)",
		"INSERT INTO md.sp VALUES (2, ST_GeomFromText('LINESTRING(0 0, 3 4)'))",
		"CREATE OR REPLACE TABLE md.r (id INT PRIMARY KEY, v INT)",
		"INSERT INTO md.r VALUES (1, 1)",
		"CREATE OR REPLACE TABLE md.r (id INT PRIMARY KEY, w VARCHAR(5))",
		"INSERT INTO md.r VALUES (2, 'x')",
		"CREATE TABLE md.vc (id INT PRIMARY KEY) /*!100500 PAGE_CHECKSUM=1 */",
		"ALTER TABLE md.vc ADD COLUMN c INT /*M!100301 INVISIBLE */",
		"INSERT INTO md.vc (id, c) VALUES (1, 5)",
		"CREATE TABLE md.pers (a INT PRIMARY KEY, b INT AS (a + 1) PERSISTENT)",
		"INSERT INTO md.pers (a) VALUES (3)",
		"CREATE DATABASE lag",
		"CREATE TABLE lag.lead (lag INT PRIMARY KEY, `rank` INT, first_value INT, ntile INT)",
		"INSERT INTO lag.lead VALUES (1, 2, 3, 4)",
		"ALTER TABLE lag.lead CHANGE rank dense_rank BIGINT",
		"UPDATE lag.lead SET dense_rank = 9 WHERE lag = 1")
	until := sourcePos(t, src)
	if _, err := replicate(context.Background(), srcInst, runOpts{task: task, until: until}); err != nil {
		t.Fatal(err)
	}
	tables := []string{"md.np", "md.sp", "md.r", "md.vc", "md.pers", "lag.lead"}
	for _, tb := range tables {
		var n1, n2, c1, c2 string
		if err := src.QueryRow("SHOW CREATE TABLE "+tb).Scan(&n1, &c1); err != nil {
			t.Fatal(err)
		}
		if err := dst.QueryRow("SHOW CREATE TABLE "+tb).Scan(&n2, &c2); err != nil {
			t.Fatalf("target %s: %v", tb, err)
		}
		if c1 != c2 {
			t.Errorf("%s definitions differ:\nsource %s\ntarget %s", tb, c1, c2)
		}
	}
	sameTables(t, src, dst, "md.np", "md.r", "md.pers", "lag.lead")
	for _, q := range []string{"SELECT GROUP_CONCAT(id, HEX(g) ORDER BY id) FROM md.sp", "SELECT GROUP_CONCAT(id, ':', c ORDER BY id) FROM md.vc"} {
		var a, b string
		if err := src.QueryRow(q).Scan(&a); err != nil {
			t.Fatal(err)
		}
		if err := dst.QueryRow(q).Scan(&b); err != nil {
			t.Fatal(err)
		}
		if a != b {
			t.Errorf("%s: source %s, target %s", q, a, b)
		}
	}
}
