package e2e_test

import (
	"encoding/hex"
	"fmt"
	"math/rand"
	"testing"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// fixedValue returns n random bytes shaped like the values that go wrong:
// all zero, all 0xFF, a random prefix followed by zeros (the binlog strips
// trailing 0x00), leading zeros, or random.
func fixedValue(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	if n == 0 {
		return b
	}
	switch r.Intn(6) {
	case 0: // all zero
	case 1:
		for i := range b {
			b[i] = 0xFF
		}
	case 2, 3:
		k := r.Intn(n + 1)
		r.Read(b[:k])
		if k > 0 && b[k-1] == 0 {
			b[k-1] = 1
		}
	case 4:
		r.Read(b[r.Intn(n):])
	default:
		r.Read(b)
	}
	return b
}

// uuidValue is fixedValue with a version 4 and RFC variant when the value is
// neither all zero nor all 0xFF. MariaDB 10.11 does not keep every 16-byte
// binary input as is: an input that is not an RFC-variant UUID but looks
// like the storage form of one is rearranged on the source already, and its
// record then differs from the one the same value gets on any other server
// (HEX() agrees, CHECKSUM TABLE does not; a MariaDB replica has the same
// difference). Such values are not this test's subject.
func uuidValue(r *rand.Rand) []byte {
	b := fixedValue(r, 16)
	zero, ff := true, true
	for _, c := range b {
		zero, ff = zero && c == 0, ff && c == 0xFF
	}
	if !zero && !ff {
		b[6] = b[6]&0x0F | 0x40
		b[8] = b[8]&0x3F | 0x80
	}
	return b
}

func lit(b []byte) string { return "X'" + hex.EncodeToString(b) + "'" }

// TestFixedBinaryReplicates is the regression test for issue 13 bugs 1
// and 7: UUID, INET6, INET4 and BINARY(N) values whose last bytes are 0x00
// (the binlog drops them) arrive exactly, as keys too, through inserts,
// updates and deletes found by such keys, in keyed and keyless tables; and
// the tables are created and altered through the replicated stream, so the
// schema tracker has to read these types.
func TestFixedBinaryReplicates(t *testing.T) {
	seed := sandboxtest.Seed(t)
	r := rand.New(rand.NewSource(seed))
	src := sandboxtest.MustOpen(t, srcInst, "")
	start := masterStatus(t, src)
	run := startTask(t, "fixedbin", start, "fb")
	sandboxtest.MustExec(t, src, "CREATE DATABASE fb",
		"CREATE TABLE fb.t (id INT PRIMARY KEY, u UUID, a INET6, b INET4, c BINARY(4), v VARBINARY(8))",
		"CREATE TABLE fb.k (u UUID PRIMARY KEY, a INET6 NOT NULL, b INET4, c BINARY(3), n INT, UNIQUE KEY ua (a))",
		"CREATE TABLE fb.k4 (b INET4 NOT NULL, c BINARY(4) NOT NULL, n INT, PRIMARY KEY (b, c))",
		"CREATE TABLE fb.nk (u UUID, a INET6, b INET4, c BINARY(4), n INT)",
		"ALTER TABLE fb.t ADD COLUMN u2 UUID AFTER u, MODIFY v VARBINARY(16), ADD COLUMN i4 INET4 NOT NULL DEFAULT '0.0.0.0'",
		// Spatial types and invisible columns, created in the stream too.
		"CREATE TABLE fb.g (id INT PRIMARY KEY, p POINT NOT NULL, g GEOMETRY, c INT INVISIBLE, d INT DEFAULT 1 INVISIBLE COMMENT 'x', KEY (c))",
		"ALTER TABLE fb.g ADD COLUMN e POLYGON INVISIBLE, MODIFY c BIGINT INVISIBLE",
		"INSERT INTO fb.g (id, p, g, c, d, e) VALUES (1, ST_PointFromText('POINT(1.5 -2)'), NULL, 7, 8, ST_GeomFromText('POLYGON((0 0,1 0,1 1,0 0))')), (2, ST_PointFromText('POINT(0 0)'), ST_GeomFromText('LINESTRING(0 0,1 1)'), NULL, DEFAULT, NULL)",
		"UPDATE fb.g SET c = c + 1, p = ST_PointFromText('POINT(3 4)') WHERE id = 1",
		// String literals in generated columns and defaults keep their text
		// (no _utf8mb4 introducer added; an explicit one kept): difftest bug E.
		"CREATE TABLE fb.gen (id INT PRIMARY KEY, c VARCHAR(10), g VARCHAR(20) AS (CONCAT(c, '|')) VIRTUAL, h VARCHAR(20) CHARACTER SET latin1 AS (CONCAT(c, _latin1'x')) STORED, d VARCHAR(5) DEFAULT 'x y')",
		"INSERT INTO fb.gen (id, c) VALUES (1, 'a'), (2, NULL)",
		// The issue's own repro.
		"INSERT INTO fb.t (id, u, a, b) VALUES (1,'123e4567-e89b-12d3-a456-426614174000','::','0.0.0.0')",
		"INSERT INTO fb.k (u, a, b, c) VALUES ('123e4567-e89b-12d3-a456-426614174000','::','0.0.0.0', X'000000')",
	)
	keys := map[string][][]byte{"k": {mustHex("123e4567e89b12d3a456426614174000")}}
	var k4 [][2][]byte
	pick := func(list [][]byte) []byte {
		if len(list) == 0 {
			return uuidValue(r)
		}
		return list[r.Intn(len(list))]
	}
	for i := 0; i < 400; i++ {
		var stmts []string
		for j := 0; j <= r.Intn(3); j++ {
			switch r.Intn(10) {
			case 0, 1:
				stmts = append(stmts, fmt.Sprintf("REPLACE INTO fb.t (id, u, u2, a, b, c, v, i4) VALUES (%d, %s, %s, %s, %s, %s, %s, %s)",
					r.Intn(60), lit(uuidValue(r)), lit(uuidValue(r)), lit(fixedValue(r, 16)), lit(fixedValue(r, 4)), lit(fixedValue(r, 4)), lit(fixedValue(r, r.Intn(17))), lit(fixedValue(r, 4))))
			case 2:
				stmts = append(stmts, fmt.Sprintf("UPDATE fb.t SET u = %s, c = %s, i4 = %s WHERE id = %d", lit(uuidValue(r)), lit(fixedValue(r, 4)), lit(fixedValue(r, 4)), r.Intn(60)))
			case 3:
				u := uuidValue(r)
				keys["k"] = append(keys["k"], u)
				stmts = append(stmts, fmt.Sprintf("INSERT IGNORE INTO fb.k VALUES (%s, %s, %s, %s, %d)", lit(u), lit(fixedValue(r, 16)), lit(fixedValue(r, 4)), lit(fixedValue(r, 3)), r.Intn(100)))
			case 4:
				nu := uuidValue(r)
				keys["k"] = append(keys["k"], nu)
				stmts = append(stmts, fmt.Sprintf("UPDATE IGNORE fb.k SET u = %s, n = n + 1 WHERE u = %s", lit(nu), lit(pick(keys["k"]))))
			case 5:
				stmts = append(stmts, fmt.Sprintf("UPDATE IGNORE fb.k SET a = %s, c = %s WHERE u = %s", lit(fixedValue(r, 16)), lit(fixedValue(r, 3)), lit(pick(keys["k"]))))
			case 6:
				stmts = append(stmts, fmt.Sprintf("DELETE FROM fb.k WHERE u = %s", lit(pick(keys["k"]))))
			case 7:
				kv := [2][]byte{fixedValue(r, 4), fixedValue(r, 4)}
				k4 = append(k4, kv)
				stmts = append(stmts, fmt.Sprintf("INSERT IGNORE INTO fb.k4 VALUES (%s, %s, %d)", lit(kv[0]), lit(kv[1]), r.Intn(100)))
				if len(k4) > 1 && r.Intn(2) == 0 {
					old := k4[r.Intn(len(k4)-1)]
					stmts = append(stmts, fmt.Sprintf("UPDATE IGNORE fb.k4 SET c = %s WHERE b = %s AND c = %s", lit(fixedValue(r, 4)), lit(old[0]), lit(old[1])))
				}
			case 8:
				// Keyless: duplicates, then changes found by the whole row.
				row := fmt.Sprintf("(%s, %s, %s, %s, %d)", lit(uuidValue(r)), lit(fixedValue(r, 16)), lit(fixedValue(r, 4)), lit(fixedValue(r, 4)), r.Intn(3))
				stmts = append(stmts, "INSERT INTO fb.nk VALUES "+row+", "+row)
			default:
				if r.Intn(2) == 0 {
					stmts = append(stmts, fmt.Sprintf("UPDATE fb.nk SET n = n + 1 WHERE n = %d LIMIT 1", r.Intn(3)))
				} else {
					stmts = append(stmts, fmt.Sprintf("DELETE FROM fb.nk WHERE n = %d LIMIT 1", r.Intn(4)))
				}
			}
		}
		// One source transaction per step, of one to three statements.
		tx, err := src.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range stmts {
			if _, err := tx.Exec(s); err != nil {
				t.Fatalf("seed %d: %s: %v", seed, s, err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	run.waitApplied(t, masterStatus(t, src))
	sameTables(t, "fb", "t", "k", "k4", "nk", "g", "gen")
	if t.Failed() {
		t.Logf("rerun with SLUICE_TEST_SEED=%d", seed)
	}
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}
