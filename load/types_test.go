package load_test

import (
	"strings"
	"testing"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// typeMatrix creates, in schema ty, one table per family of types with the
// values at their limits and the bytes that are hard to carry: every byte
// value, NUL, tab, newline, backslash, quotes, 4-byte UTF-8, latin1, NULL
// beside the empty string, generated columns, composite and missing keys.
var typeMatrix = []string{
	`CREATE TABLE ty.ints (id INT PRIMARY KEY,
  ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED, mi MEDIUMINT, miu MEDIUMINT UNSIGNED,
  i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED)`,
	`INSERT INTO ty.ints VALUES
 (1,-128,0,-32768,0,-8388608,0,-2147483648,0,-9223372036854775808,0),
 (2,127,255,32767,65535,8388607,16777215,2147483647,4294967295,9223372036854775807,18446744073709551615),
 (3,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL)`,
	`CREATE TABLE ty.nums (id INT PRIMARY KEY, d DECIMAL(65,30), du DECIMAL(10,2) UNSIGNED, f FLOAT, dbl DOUBLE)`,
	`INSERT INTO ty.nums VALUES
 (1, '99999999999999999999999999999999999.999999999999999999999999999999', 0, 0.1234567, 0.1),
 (2, '-99999999999999999999999999999999999.999999999999999999999999999999', 99999999.99, 3.4028234e38, 1.7976931348623157e308),
 (3, '0.000000000000000000000000000001', NULL, 1.17549435e-38, 4.9e-324),
 (4, NULL, 1.5, -1.4e-45, -2.2250738585072014e-308),
 (5, 0, 0, 16777217, 0.30000000000000004)`,
	`CREATE TABLE ty.times (id INT PRIMARY KEY, d DATE, dt DATETIME(6), ts TIMESTAMP(6) NULL, t TIME(6), y YEAR, dt0 DATETIME)`,
	`INSERT INTO ty.times VALUES
 (1,'1000-01-01','1000-01-01 00:00:00.000000','1970-01-01 00:00:01.000000','-838:59:59.000000',1901,'0000-00-00 00:00:00'),
 (2,'9999-12-31','9999-12-31 23:59:59.999999','2038-01-19 03:14:07.999999','838:59:59.000000',2155,'2020-02-29 12:00:00'),
 (3,'0000-00-00','2024-03-10 02:30:00.123456','2024-03-10 02:30:00.123456','-00:00:00.000001',0,NULL),
 (4,NULL,NULL,NULL,'25:00:00.500000',NULL,NULL)`,
	`CREATE TABLE ty.strs (id INT PRIMARY KEY, c CHAR(10), v VARCHAR(100), tx TEXT, l1 VARCHAR(50) CHARACTER SET latin1, l1t TEXT CHARACTER SET latin1) DEFAULT CHARSET=utf8mb4`,
	`INSERT INTO ty.strs VALUES
 (1,'a','😀 four-byte 𝄞','tab\there\nnewline\\backslash ''q'' "dq"', 'café', CONCAT('ÿ', CHAR(0x81 USING latin1))),
 (2,'','',  '', '', ''),
 (3,NULL,NULL,NULL,NULL,NULL),
 (4,'\\N','\\N','N', '\\', CONCAT('a', CHAR(0), 'b', CHAR(13), CHAR(10), CHAR(9)))`,
	`CREATE TABLE ty.bins (id INT PRIMARY KEY, b BINARY(4), vb VARBINARY(300), bl BLOB, lb LONGBLOB)`,
	`INSERT INTO ty.bins VALUES (1, X'00090A5C', X'00', X'', NULL), (2, NULL, '', NULL, X'27225C0D0A1A'), (3, X'FFFFFFFF', X'5C4E', X'5C', X'00')`,
	`UPDATE ty.bins SET bl = (SELECT GROUP_CONCAT(CHAR(seq) SEPARATOR '') FROM ty.seq_0_to_255) WHERE id = 3`,
	`UPDATE ty.bins SET vb = (SELECT CAST(GROUP_CONCAT(CHAR(255-seq) SEPARATOR '') AS BINARY) FROM ty.seq_0_to_255) WHERE id = 1`,
	`CREATE TABLE ty.misc (id INT PRIMARY KEY, e ENUM('a','b','c d'), s SET('x','y','z'), b1 BIT(1), b64 BIT(64), b7 BIT(7), j JSON,
  g INT AS (id * 2) VIRTUAL, gs VARCHAR(20) AS (CONCAT('g', id)) STORED)`,
	`INSERT INTO ty.misc (id,e,s,b1,b64,b7,j) VALUES
 (1,'a','x,z',b'1',b'1111111111111111111111111111111111111111111111111111111111111111',b'1010101','{"k": [1, 2.5, "😀", null]}'),
 (2,'c d','',b'0',b'0',b'0','[]'),
 (3,NULL,NULL,NULL,NULL,NULL,NULL),
 (4,'b','x,y,z',b'1',b'1000000000000000000000000000000000000000000000000000000000000000',b'0000001','"str\\u0000"')`,
	`CREATE TABLE ty.composite (a VARCHAR(20), b INT, c BINARY(3), v TEXT, PRIMARY KEY (a, b, c))`,
	`INSERT INTO ty.composite VALUES ('x',1,X'000102','1'),('x',2,X'000102','2'),('y',1,X'FF0000','3'),('Y2',-5,X'000000','4'),('',0,X'000000','5')`,
	`CREATE TABLE ty.uniq (a INT NOT NULL, b VARCHAR(10) NOT NULL, v INT, UNIQUE KEY (b, a))`,
	`INSERT INTO ty.uniq VALUES (1,'a',1),(2,'a',2),(1,'b',3),(3,'c',NULL)`,
	`CREATE TABLE ty.nokey (a INT, b TEXT)`,
	`INSERT INTO ty.nokey VALUES (1,'x'),(1,'x'),(NULL,NULL),(2,'')`,
	`CREATE TABLE ty.geo (id INT PRIMARY KEY, p POINT, g GEOMETRY, l LINESTRING NOT NULL)`,
	`INSERT INTO ty.geo VALUES (1, ST_GeomFromText('POINT(1.5 -2.25)'), ST_GeomFromText('POLYGON((0 0,1 0,1 1,0 0))'), ST_GeomFromText('LINESTRING(0 0,1e300 -1e-300)')), (2, NULL, NULL, ST_GeomFromText('LINESTRING(1 1,2 2)'))`,
	// MariaDB's own fixed-length types (issue 13 bug 2): edge values, values
	// whose last bytes are zero, NULL, a UUID primary key to chunk by, and
	// an INET6 whose text form is 16 characters long, like its binary form.
	`CREATE TABLE ty.fbt (u UUID PRIMARY KEY, a INET6, b INET4, c BINARY(4), n INT)`,
	`INSERT INTO ty.fbt VALUES
 ('00000000-0000-0000-0000-000000000000', '::', '0.0.0.0', X'00000000', 1),
 ('ffffffff-ffff-ffff-ffff-ffffffffffff', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', '255.255.255.255', X'FFFFFFFF', 2),
 ('123e4567-e89b-12d3-a456-426614174000', 'ffff:ffff:ffff::', '1.0.0.0', X'61000000', 3),
 ('12345678-9abc-4def-8000-000000000000', '1::', '10.0.0.0', X'00000001', 4),
 ('00000000-0000-4000-8000-000000000001', '::1', '0.0.0.1', NULL, NULL),
 ('6ccd780c-baba-1026-9564-5b8c656024db', NULL, NULL, X'5C4E0000', 6)`,
	// Random floats and doubles over their whole exponent range: each must
	// come back bit for bit.
	`CREATE TABLE ty.floats (id INT PRIMARY KEY, f FLOAT, d DOUBLE)`,
	`INSERT INTO ty.floats SELECT seq, (RAND(seq) - 0.5) * POW(10, CAST(seq % 70 AS SIGNED) - 35), (RAND(seq + 7) - 0.5) * POW(10, CAST(seq % 600 AS SIGNED) - 300) FROM ty.seq_1_to_3000`,
}

func createTypeMatrix(t *testing.T, schema string) {
	t.Helper()
	db := sandboxtest.MustOpen(t, srcInst, "")
	sandboxtest.MustExec(t, db, "DROP DATABASE IF EXISTS "+schema, "CREATE DATABASE "+schema)
	for _, s := range typeMatrix {
		sandboxtest.MustExec(t, db, strings.ReplaceAll(s, "ty.", schema+"."))
	}
}

// TestTypesDumpLoad: dump to a directory, load into a routed schema, and
// every table must come back with the same definition and the same bytes.
func TestTypesDumpLoad(t *testing.T) {
	sandboxtest.SkipShort(t)
	createTypeMatrix(t, "types_dl")
	cfg := taskFile(t, "types_dl", "types_dl.*", "routes: [{schema: types_dl, target-schema: types_dl_copy}]\nthreads: 3\npool-size: 3\nrows-per-chunk: 2")
	dir := t.TempDir()
	mustSluice(t, "dump", "--config", cfg, "--dir", dir+"/d")
	mustSluice(t, "load", "--config", cfg, "--dir", dir+"/d")
	sameTables(t, sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, ""), "types_dl", "types_dl_copy")
}

// TestTypesMigrate: the streaming path, with LOAD DATA and with INSERTs.
func TestTypesMigrate(t *testing.T) {
	sandboxtest.SkipShort(t)
	createTypeMatrix(t, "types_mg")
	for _, tc := range []struct{ name, extra, unit string }{
		{"chunk", "rows-per-statement: 0", "chunk"},
		{"insert", "rows-per-statement: 2", "chunk"},
		{"table", "rows-per-statement: 0", "table"},
		{"auto", "rows-per-statement: 0", "auto"},
		{"tableinsert", "rows-per-statement: 3", "table"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := "types_mg_" + tc.name
			cfg := taskFile(t, "types_mg_"+tc.name, "types_mg.*", "routes: [{schema: types_mg, target-schema: "+dst+"}]\nthreads: 2\npool-size: 4\nrows-per-chunk: 2\n"+tc.extra)
			args := []string{"migrate", "--config", cfg, "--mode", "full", "--commit-unit", tc.unit}
			out := mustSluice(t, args...)
			if !strings.Contains(out, "| migrate (stream) |") {
				t.Errorf("no summary table in the output:\n%s", out)
			}
			sameTables(t, sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, ""), "types_mg", dst)
		})
	}
}
