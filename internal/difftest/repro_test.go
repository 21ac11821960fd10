package difftest

import (
	"flag"
	"strings"
	"testing"
)

var flagKnown = flag.Bool("difftest.known", false, "run the scripts of known, unfixed bugs too")

// scripts are failures the tester found, reduced to their statements.
// An entry with bug set hits a bug that is not fixed on this branch yet:
// it is skipped unless -difftest.known is given. Clear bug once the fix
// is merged, so that it guards the fix.
var scripts = []struct {
	sc   Script
	note string
	bug  string
}{
	{Script{Name: "latin1keyless",
		Before: []string{"CREATE TABLE {s}.t (a INT NULL, c CHAR(7) CHARACTER SET latin1 COLLATE latin1_swedish_nopad_ci NOT NULL, UNIQUE KEY (a))",
			"INSERT INTO {s}.t VALUES (1, 'ä'), (NULL, 'é')"},
		After: []string{"INSERT INTO {s}.t VALUES (2, 'ö'), (NULL, 'ÿ')", "UPDATE {s}.t SET a = 3 WHERE c = 'é'", "DELETE FROM {s}.t WHERE c = 'ÿ'"},
	}, "seed 2: latin1 text in a keyless row match (fixed in main 4d94f69)", ""},
	{Script{Name: "latin1nopad",
		Before: []string{"CREATE TABLE {s}.t (id INT PRIMARY KEY, a CHAR(4) CHARACTER SET latin1 COLLATE latin1_swedish_nopad_ci, b VARCHAR(4) CHARACTER SET latin1 COLLATE latin1_nopad_bin)",
			"INSERT INTO {s}.t VALUES (3, 'ä', 'é')"},
		After: []string{"INSERT INTO {s}.t VALUES (1, 'ä', 'é'), (2, 'ÿ', 'ß')", "UPDATE {s}.t SET a = 'Ö' WHERE id = 2"},
	}, "latin1 NO PAD collations were not in decode's latin1 list: values arrived as '?' (fixed in main 4d94f69)", ""},
	{Script{Name: "bincase",
		Before: []string{"CREATE TABLE {s}.t (a VARCHAR(4) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY, v INT)",
			"CREATE TABLE {s}.b (a VARBINARY(4) NOT NULL PRIMARY KEY, v INT)"},
		After: []string{"INSERT INTO {s}.t VALUES ('AB', 1), ('ab', 2)", "UPDATE {s}.t SET v = v + 10",
			"INSERT INTO {s}.b VALUES ('x', 1), ('X', 2)", "UPDATE {s}.b SET v = v + 10",
			"CREATE TABLE {s}.c (a VARCHAR(13) CHARACTER SET latin1 COLLATE latin1_bin NOT NULL, b CHAR(1) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL, v INT, PRIMARY KEY (a, b))",
			"INSERT INTO {s}.c VALUES ('', 'B', 1), ('AB', 'b', 2), ('ab', 'B', 3)", "UPDATE {s}.c SET v = v + 10"},
	}, "seed 4 (-no-key-variants): rows whose _bin / binary key differs only by ASCII case merge in compaction", "" /* fixed in main b5f9133 */},
	{Script{Name: "seed4",
		Before: []string{"CREATE TABLE {s}.t1 (c1 VARCHAR(13) CHARACTER SET latin1 COLLATE latin1_bin NOT NULL, c2 CHAR(1) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL, v INT, PRIMARY KEY (c1, c2))",
			"INSERT INTO {s}.t1 VALUES ('A', 'B', 1), ('a', 'b', 1)"},
		After: []string{"UPDATE {s}.t1 SET v = 3"},
	}, "seed 4 (-no-key-variants), reduced: a composite key of a _bin and a _ci column; compaction folds the case of both",
		"" /* fixed in main b5f9133 */},
	{Script{Name: "compactdelete",
		Before: []string{"CREATE TABLE {s}.t1 (c1 VARCHAR(13) CHARACTER SET latin1 COLLATE latin1_bin NOT NULL, c2 CHAR(1) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL, v INT, PRIMARY KEY (c1, c2))",
			"INSERT INTO {s}.t1 VALUES ('A', 'B', 1), ('a', 'b', 1)"},
		After: []string{"BEGIN", "UPDATE {s}.t1 SET v = 3 WHERE c1 = 'A'", "DELETE FROM {s}.t1 WHERE c1 = 'a'", "COMMIT"},
	}, "seed 4 variant: the DELETE of one row lands on the other", "" /* fixed in main b5f9133 */},
	{Script{Name: "nopadspace",
		Before: []string{"CREATE TABLE {s}.t (a VARCHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_nopad_ci NOT NULL, b CHAR(1) NOT NULL, v INT, PRIMARY KEY (a, b))",
			"INSERT INTO {s}.t VALUES ('ab', 'x', 1), ('ab ', 'x', 1)"},
		After: []string{"BEGIN", "UPDATE {s}.t SET v = 3 WHERE a = 'ab'", "DELETE FROM {s}.t WHERE a = 'ab '", "COMMIT"},
	}, "seed 2 (-no-key-variants -no-bin-keys): in a NO PAD collation 'ab' and 'ab ' are two keys; compaction trims trailing spaces",
		"" /* fixed in main b5f9133 */},
	{Script{Name: "createlike",
		Before: []string{"CREATE TABLE {s}.a (id INT PRIMARY KEY, v VARCHAR(8))", "INSERT INTO {s}.a VALUES (1, 'x'), (2, 'y')",
			"CREATE TABLE {s}.n (a INT, v VARCHAR(8))", "INSERT INTO {s}.n VALUES (1, 'x'), (1, 'x')"},
		After: []string{"CREATE TABLE {s}.b LIKE {s}.a", "INSERT INTO {s}.b SELECT * FROM {s}.a", "INSERT INTO {s}.b VALUES (3, 'z')",
			"UPDATE {s}.b SET v = 'w' WHERE id = 1", "DELETE FROM {s}.b WHERE id = 2",
			"CREATE TABLE {s}.m LIKE {s}.n", "INSERT INTO {s}.m SELECT * FROM {s}.n", "INSERT INTO {s}.m VALUES (2, 'q')",
			"DELETE FROM {s}.m WHERE a = 1 LIMIT 1", "TRUNCATE TABLE {s}.m", "INSERT INTO {s}.m VALUES (5, 'r')",
			"RENAME TABLE {s}.b TO {s}.c", "INSERT INTO {s}.c VALUES (4, 'u')", "ALTER TABLE {s}.c DROP PRIMARY KEY", "INSERT INTO {s}.c VALUES (4, 'u')", "DELETE FROM {s}.c WHERE id = 4 LIMIT 1"},
	}, "CREATE ... LIKE, INSERT ... SELECT, TRUNCATE, RENAME (passes; kept as a guard)", ""},
	{Script{Name: "droppkcol",
		Before: []string{"CREATE TABLE {s}.t (id INT NOT NULL PRIMARY KEY, a INT, v INT)", "INSERT INTO {s}.t VALUES (1, 7, 1), (2, 7, 2), (3, 8, 3)"},
		After: []string{"ALTER TABLE {s}.t DROP COLUMN id", "DELETE FROM {s}.t WHERE v = 1", "UPDATE {s}.t SET v = 9 WHERE v = 3",
			"INSERT INTO {s}.t VALUES (8, 4)", "UPDATE {s}.t SET a = 0 WHERE v = 4"},
	}, "dropping the primary key's column (passes; kept as a guard)", ""},
	{Script{Name: "keylessmix",
		Before: []string{"CREATE TABLE {s}.t (c21 INT NOT NULL, c35 YEAR, c23 DATE, c24 BIT(21), c25 VARBINARY(12), c26_j JSON, c27 VARBINARY(31), c50 VARCHAR(3) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci) DEFAULT CHARSET=latin1"},
		After: []string{
			"INSERT INTO {s}.t VALUES (29, 2091, '2000-01-09', NULL, X'C6FF', '{\"a\": 1, \"b\": [1, 2.5, \"x\"]}', X'6733009E', NULL), (29, 2091, '2000-01-09', NULL, X'C6FF', '{\"a\": 1, \"b\": [1, 2.5, \"x\"]}', X'6733009E', NULL)",
			"INSERT INTO {s}.t VALUES (-1, 2155, '1994-01-03', b'01', X'2099C762AEFED2AC0042', '{\"n\": 291, \"s\": \"é\\\\u0000\"}', X'54BD2C202060FF2000FFFF2013836FCBC500472061FFBC41FFFF00976661', 'w8w')",
			"INSERT INTO {s}.t VALUES (16, 0, '2012-10-05', b'011100', X'C4', '[1, -0.0, 1e300]', X'06BA9EEEC883FA2020FF93FF2D000052F5008D00AC00FFA3D4F37D4420C640', 'w4')",
			"INSERT INTO {s}.t VALUES (0, 0, NULL, b'0001', X'C920FFE34864BC', '{}', X'FF20202BFFD20F06849F2F2B19489A0BA520FF', 'w5')",
			"UPDATE {s}.t SET c24 = b'10', c25 = X'B2' WHERE c21 BETWEEN 7 AND 20 LIMIT 2",
			"UPDATE {s}.t SET c50 = 'w6', c27 = X'3B33018AFF002319206FC000FFFF20093F0000D421007E', c26_j = '{}' WHERE c35 = 2091 LIMIT 1",
			"UPDATE {s}.t SET c35 = 0, c50 = 'w3w' WHERE c50 IS NULL",
			"UPDATE {s}.t SET c26_j = '\"str\"' WHERE c50 = 'w4'",
			"DELETE FROM {s}.t WHERE c35 = 0 LIMIT 1",
			"DELETE FROM {s}.t WHERE c21 = -1",
		},
	}, "seed 4 (all switches): a keyless table of many types (passes; kept as a guard)", ""},
	{Script{Name: "droppk",
		Before: []string{"CREATE TABLE {s}.t (id INT NOT NULL, v INT, PRIMARY KEY (id))", "INSERT INTO {s}.t VALUES (1, 1), (2, 2)"},
		After: []string{"ALTER TABLE {s}.t DROP PRIMARY KEY", "INSERT INTO {s}.t VALUES (1, 5), (1, 6)",
			"DELETE FROM {s}.t WHERE id = 1 AND v = 5", "UPDATE {s}.t SET v = 9 WHERE id = 1 AND v = 6"},
	}, "seed 4 (all switches, -ddl-kinds addindex,dropindex,default): after DROP PRIMARY KEY the old key still matches rows",
		"" /* fixed in main b091ce9 */},
	{Script{Name: "renamedropindex",
		Before: []string{"CREATE TABLE {s}.t3 (a INT NOT NULL, d DATE NOT NULL, v INT, UNIQUE KEY uk (a))", "INSERT INTO {s}.t3 VALUES (7, '2000-01-01', 7)"},
		After: []string{"ALTER TABLE {s}.t3 ADD UNIQUE INDEX ix36 (d)", "ALTER TABLE {s}.t3 DROP INDEX uk", "RENAME TABLE {s}.t3 TO {s}.t5",
			"ALTER TABLE {s}.t5 DROP INDEX ix36", "INSERT INTO {s}.t5 VALUES (1, '0000-00-00', 1), (2, '0000-00-00', 2)", "DELETE FROM {s}.t5 WHERE a = 1"},
	}, "long run seed 3: keys changed by DDL, then RENAME, then DROP INDEX of the last key", ""},
	{Script{Name: "gencolignore",
		Before: []string{"CREATE TABLE {s}.t (id INT PRIMARY KEY, a VARCHAR(10) CHARACTER SET utf8mb4, g VARCHAR(20) AS (CONCAT(a, '|')) STORED) DEFAULT CHARSET=latin1"},
		After:  []string{"INSERT IGNORE INTO {s}.t (id, a) VALUES (1, 'ı')", "UPDATE IGNORE {s}.t SET a = 'ǆ' WHERE id = 1"},
	}, "long run seed 4: the source stores '?|' in a latin1 generated column under IGNORE; the strict target session refused to compute it",
		"" /* fixed in main 0798fb3 */},
	{Script{Name: "mariadbddl",
		Before: []string{"CREATE TABLE {s}.t (id INT PRIMARY KEY, a VARCHAR(8) COLLATE utf8mb4_nopad_bin)", "INSERT INTO {s}.t VALUES (1, 'a ')"},
		After: []string{"CREATE TABLE {s}.n (id INT PRIMARY KEY, a VARCHAR(8) CHARACTER SET latin1 COLLATE latin1_swedish_nopad_ci, g POINT NOT NULL, SPATIAL INDEX (g)) /*!100500 PAGE_CHECKSUM=1 */",
			"INSERT INTO {s}.n VALUES (1, 'ä ', ST_GeomFromText('POINT(1 1)'))", "CREATE OR REPLACE TABLE {s}.t (id INT PRIMARY KEY, lag INT)", "INSERT INTO {s}.t VALUES (2, 3)"},
	}, "seeds 401, 402, 406, 409 (bug C): NO PAD collations, SPATIAL INDEX, six-digit executable comments, CREATE OR REPLACE, TiDB-reserved names in the stream", ""},
	{Script{Name: "rerunempty",
		Before:  []string{"CREATE TABLE {s}.t (id INT PRIMARY KEY, v INT)", "INSERT INTO {s}.t VALUES (1, 1), (2, 2)", "CREATE TABLE {s}.u (id INT PRIMARY KEY)", "INSERT INTO {s}.u VALUES (1)"},
		After:   []string{"DELETE FROM {s}.t", "TRUNCATE TABLE {s}.u"},
		Stopped: []string{"INSERT INTO {s}.t VALUES (3, 3)", "INSERT INTO {s}.u VALUES (5)"},
	}, "long run seed 3: a table emptied by replication (DELETE of every row, TRUNCATE) looks lost to a --mode all rerun, which copies it again from a new snapshot while replication replays the same rows", ""},
	{Script{Name: "yearzero",
		Before: []string{"CREATE TABLE {s}.t (y YEAR, v INT)", "CREATE TABLE {s}.k (y YEAR NOT NULL PRIMARY KEY, v INT)"},
		After: []string{"INSERT INTO {s}.t VALUES (0, 1), (2000, 2)", "UPDATE {s}.t SET v = 3 WHERE y = 0",
			"INSERT INTO {s}.k VALUES (0, 1)", "UPDATE {s}.k SET v = 5 WHERE y = 0", "DELETE FROM {s}.t WHERE y = 0"},
	}, "YEAR 0 in a key and a keyless row (passes; kept as a guard)", ""},
	{Script{Name: "binarypad",
		Before: []string{"CREATE TABLE {s}.t (a BINARY(2) NOT NULL PRIMARY KEY, v INT, u INT, UNIQUE KEY (u))",
			"CREATE TABLE {s}.t2 (a BINARY(3) NOT NULL PRIMARY KEY, v INT)"},
		After: []string{"INSERT INTO {s}.t VALUES (X'', 1, 1), (X'01', 2, 2)", "UPDATE {s}.t SET v = 5 WHERE a = X'0000'",
			"DELETE FROM {s}.t WHERE a = X'0100'", "REPLACE INTO {s}.t VALUES (X'', 9, 1)",
			"INSERT INTO {s}.t2 VALUES (X'', 1), (X'61', 2)", "UPDATE {s}.t2 SET v = 7 WHERE a = X'000000'", "DELETE FROM {s}.t2 WHERE a = X'610000'"},
	}, "seed 1: BINARY(n) key values with trailing 0x00 bytes (fixed in main, h-types)", ""},
	{Script{Name: "varbinspace",
		Before: []string{"CREATE TABLE {s}.t (c5 VARBINARY(4) NOT NULL, c6 DATETIME(6) NOT NULL, c7 VARBINARY(9), UNIQUE KEY uk (c5, c6))",
			"INSERT INTO {s}.t VALUES (X'2020', '2001-02-11 11:12:46.217823', X'20FFFE'), (X'2020', '2002-04-05 16:05:40.900906', NULL), (X'20', '2002-04-05 16:05:40.900906', X'2020'), ('A', '2002-02-24 02:05:36.668215', X'2033')",
			"INSERT INTO {s}.t SELECT X'', '2000-01-01' + INTERVAL seq SECOND, NULL FROM {s}.seq_1_to_40"},
		After: []string{"DELETE FROM {s}.t WHERE c5 = X'2020' LIMIT 2", "UPDATE {s}.t SET c7 = X'01' WHERE c5 = X'20'", "DELETE FROM {s}.t WHERE c5 = X'' LIMIT 20"},
	}, "seed 602: a chunk bound of '' in a VARBINARY key was sent as NULL: the chunks it bounded were dumped empty (fixed)", ""},
	{Script{Name: "virtualwarn",
		Before: []string{"CREATE TABLE {s}.t (c14 INT UNSIGNED, n INT, c15 BIGINT AS (c14 * 2 + 1) VIRTUAL, c16 VARCHAR(40) AS (CONCAT(c14, '|')) STORED)",
			"INSERT INTO {s}.t (c14, n) VALUES (1, 1), (2, 2)", "ALTER TABLE {s}.t MODIFY COLUMN c14 VARBINARY(20) NULL",
			"SET STATEMENT sql_mode='' FOR INSERT INTO {s}.t (c14, n) VALUES (X'c5609400', 3), (X'd7203e6b', 4)"},
		After: []string{"SET STATEMENT sql_mode='' FOR INSERT INTO {s}.t (c14, n) VALUES (X'fb6cbb9dcc002057', 5), (X'ff', 6)",
			"DELETE FROM {s}.t WHERE n IN (3, 5)", "SET STATEMENT sql_mode='' FOR UPDATE {s}.t SET n = n + 10 WHERE n = 4"},
	}, "seed 2001 (bug T): a virtual column over a column MODIFYed to VARBINARY warns on every row a DELETE looks at; the strict applier stopped", ""},
	{Script{Name: "ddltime",
		Before: []string{"CREATE TABLE {s}.t (ts TIMESTAMP(5) NULL, v VARCHAR(8) COLLATE latin1_nopad_bin NOT NULL, n INT)",
			"INSERT INTO {s}.t (ts, v, n) VALUES (NULL, 'a', 0), (NULL, 'b', 0)"},
		After: []string{"INSERT INTO {s}.t (ts, v, n) VALUES (NULL, 'c', 0)", "ALTER TABLE {s}.t ADD PRIMARY KEY (ts, v)",
			"ALTER TABLE {s}.t ADD COLUMN c TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)", "UPDATE {s}.t SET n = n + 1", "DELETE FROM {s}.t WHERE v = 'b'"},
	}, "seed 2111 (bug U): an ALTER that fills NULL TIMESTAMPs (ADD PRIMARY KEY) or a DEFAULT CURRENT_TIMESTAMP column from the clock ran at the apply time on the target", ""},
	{Script{Name: "ghost",
		Before: []string{"CREATE TABLE {s}.t (id INT PRIMARY KEY, v INT)", "INSERT INTO {s}.t VALUES (1, 1), (2, 2), (3, 3)"},
		After: []string{"CREATE TABLE {s}._t_ghc (id BIGINT AUTO_INCREMENT PRIMARY KEY, hint VARCHAR(64), value TEXT)",
			"CREATE TABLE {s}._t_gho LIKE {s}.t", "ALTER TABLE {s}._t_gho ADD COLUMN w INT NOT NULL DEFAULT 7, ADD KEY kv (v)",
			"INSERT INTO {s}._t_ghc (hint, value) VALUES ('state', 'GhostTableMigrated')",
			"INSERT INTO {s}._t_gho (id, v) SELECT id, v FROM {s}.t",
			"UPDATE {s}.t SET v = 20 WHERE id = 2", "REPLACE INTO {s}._t_gho (id, v) VALUES (2, 20)",
			"DELETE FROM {s}.t WHERE id = 3", "DELETE FROM {s}._t_gho WHERE id = 3",
			"RENAME TABLE {s}.t TO {s}._t_del, {s}._t_gho TO {s}.t",
			"DROP TABLE IF EXISTS {s}._t_del", "DROP TABLE IF EXISTS {s}._t_ghc",
			"INSERT INTO {s}.t (id, v) VALUES (100, 5)", "UPDATE {s}.t SET w = 8 WHERE id = 1"},
	}, "issue 16: a gh-ost migration replicates as one ALTER TABLE of t at its cut-over; its ghost and helper tables stay off the target", ""},
	{Script{Name: "ptosc",
		Before: []string{"CREATE TABLE {s}.t (id INT PRIMARY KEY, v INT)", "INSERT INTO {s}.t VALUES (1, 1), (2, 2)"},
		After: []string{"CREATE TABLE {s}._t_new LIKE {s}.t", "ALTER TABLE {s}._t_new MODIFY COLUMN v BIGINT",
			"CREATE TRIGGER {s}.pt_osc_t_ins AFTER INSERT ON {s}.t FOR EACH ROW REPLACE INTO {s}._t_new (id, v) VALUES (NEW.id, NEW.v)",
			"INSERT LOW_PRIORITY IGNORE INTO {s}._t_new (id, v) SELECT id, v FROM {s}.t LOCK IN SHARE MODE",
			"INSERT INTO {s}.t VALUES (3, 3)",
			"RENAME TABLE {s}.t TO {s}._t_old, {s}._t_new TO {s}.t",
			"DROP TABLE IF EXISTS {s}._t_old", "DROP TRIGGER IF EXISTS {s}.pt_osc_t_ins",
			"INSERT INTO {s}.t VALUES (4, 40000000000)"},
	}, "issue 16: a pt-online-schema-change migration replicates as one ALTER TABLE of t at its cut-over", ""},
}

func TestScripts(t *testing.T) {
	for _, s := range scripts {
		t.Run(s.sc.Name, func(t *testing.T) {
			if s.bug != "" && !*flagKnown {
				t.Skipf("known bug, not fixed on this branch: %s (run with -difftest.known)", s.bug)
			}
			res := runScript(t, s.sc)
			if !res.Pass {
				t.Errorf("%s (%s):\n%s", s.sc.Name, s.note, strings.Join(res.Problems, "\n"))
			}
		})
	}
}
