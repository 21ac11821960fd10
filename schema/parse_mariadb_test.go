package schema

import "testing"

// TestParseMariaDBSyntax: MariaDB DDL the TiDB parser needs help with
// (tracker_fix.go, collations.go) parses; syntax sluice does not replicate
// yet still fails to parse rather than being read as something else.
func TestParseMariaDBSyntax(t *testing.T) {
	unsupported := map[string]bool{
		"CREATE TABLE d.t9 (a INT) WITH SYSTEM VERSIONING":                  true,
		"CREATE TABLE d.t14 (a INT, KEY (a) IGNORED)":                       true,
		"CREATE TABLE d.t17 (a BLOB COMPRESSED, b VARCHAR(100) COMPRESSED)": true,
	}
	tr := NewTracker()
	for _, q := range []string{
		"CREATE TABLE d.t1 (a VARCHAR(10) COLLATE utf8mb4_nopad_bin, b CHAR(3) CHARACTER SET latin1 COLLATE latin1_swedish_nopad_ci) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_nopad_ci",
		"CREATE TABLE d.t2 (a VARCHAR(10) COLLATE utf8mb4_uca1400_ai_ci, b VARCHAR(5) COLLATE utf8mb4_uca1400_nopad_as_cs)",
		"CREATE TABLE d.t3 (id INT PRIMARY KEY, g GEOMETRY NOT NULL, SPATIAL INDEX sg (g))",
		"ALTER TABLE d.t3 ADD SPATIAL INDEX s2 (g)",
		"CREATE SPATIAL INDEX s3 ON d.t3 (g)",
		"CREATE OR REPLACE TABLE d.t4 (id INT PRIMARY KEY)",
		"CREATE OR REPLACE TABLE d.t5 LIKE d.t4",
		"CREATE TABLE d.t6 (id INT PRIMARY KEY) /*!100500 PAGE_CHECKSUM=1 */",
		"CREATE TABLE d.t7 (id INT PRIMARY KEY, c INT /*M!100301 INVISIBLE */)",
		"CREATE DATABASE lag",
		"CREATE TABLE d.lag (lead INT, `rank` INT, row_number INT)",
		"CREATE TABLE d.t8 (lag INT, lead INT)",
		"ALTER TABLE d.t8 CHANGE lag lag2 BIGINT",
		"CREATE DATABASE d2 COLLATE utf8mb4_nopad_bin",
		"ALTER TABLE d.t1 MODIFY a VARCHAR(20) COLLATE utf8mb4_nopad_bin",
		"ALTER TABLE d.t1 CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_nopad_ci",
		"CREATE TABLE d.t9 (a INT) WITH SYSTEM VERSIONING",
		"CREATE TABLE IF NOT EXISTS d.t10 (a INT) ENGINE=InnoDB PAGE_COMPRESSED=1",
		"CREATE TABLE d.t11 (a INT, b INT AS (a+1) PERSISTENT)",
		"CREATE TABLE d.t12 (a INT) SEQUENCE=0",
		"CREATE TABLE d.t13 (j JSON CHECK (JSON_VALID(j)))",
		"CREATE TABLE d.t14 (a INT, KEY (a) IGNORED)",
		"ALTER TABLE d.t8 ADD COLUMN IF NOT EXISTS x INT",
		"ALTER TABLE d.t8 DROP COLUMN IF EXISTS x",
		"CREATE TABLE d.t15 (a INT) ENGINE=InnoDB DEFAULT CHARSET=utf8mb3",
		"CREATE TABLE d.t16 (a VARCHAR(3) CHARACTER SET utf8mb3 COLLATE utf8mb3_general_nopad_ci)",
		"CREATE TABLE d.t17 (a BLOB COMPRESSED, b VARCHAR(100) COMPRESSED)",
		"CREATE TABLE d.t18 (a INT) COMMENT 'x' /*!50100 PARTITION BY HASH (a) PARTITIONS 2 */",
	} {
		_, err := tr.Parse(q)
		if (err != nil) != unsupported[q] {
			t.Errorf("%s: %v", q, err)
		}
	}
}

func TestStripExecComments(t *testing.T) {
	for in, want := range map[string]string{
		"CREATE TABLE t (a INT) /*!100500 PAGE_CHECKSUM=1 */":     "CREATE TABLE t (a INT)   PAGE_CHECKSUM=1  ",
		"CREATE TABLE t (a INT) /*!999999 FUTURE=1 */":            "CREATE TABLE t (a INT)  ",
		"CREATE TABLE t (a INT /*M!100301 INVISIBLE */)":          "CREATE TABLE t (a INT   INVISIBLE  )",
		"CREATE TABLE t (a INT) /*!50100 PARTITION BY HASH(a) */": "CREATE TABLE t (a INT)   PARTITION BY HASH(a)  ",
		"CREATE TABLE t (a VARCHAR(9) DEFAULT '/*!1 x */')":       "CREATE TABLE t (a VARCHAR(9) DEFAULT '/*!1 x */')",
		"CREATE TABLE t (a INT) /* plain */":                      "CREATE TABLE t (a INT) /* plain */",
	} {
		if got := stripExecComments(in); got != want {
			t.Errorf("stripExecComments(%q) = %q, want %q", in, got, want)
		}
	}
}
