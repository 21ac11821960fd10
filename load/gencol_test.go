package load_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestCopyLossyGeneratedColumns: rows that a non-strict source stored with
// generated values computed with a warning ('Ǆ|' as '?|' in latin1, an INT
// clipped) are copied, by LOAD DATA and by INSERT, and the target computes
// the same values instead of refusing the chunk (difftest bug L). A
// warning about a written column still fails the copy (TestBadInput).
func TestCopyLossyGeneratedColumns(t *testing.T) {
	src, dst := sandboxtest.MustOpen(t, srcInst, ""), sandboxtest.MustOpen(t, dstInst, "")
	for _, rps := range []int{0, 7} {
		schema := fmt.Sprintf("gcl%d", rps)
		conn, err := src.Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{"SET SESSION sql_mode = ''", "DROP DATABASE IF EXISTS " + schema, "CREATE DATABASE " + schema,
			"CREATE TABLE " + schema + ".k (id INT PRIMARY KEY, a VARCHAR(20), n BIGINT, s VARCHAR(20) CHARACTER SET latin1 AS (CONCAT(a, '|')) STORED, " +
				"o INT AS (n * 2 + 1) STORED, c CHAR(2) AS (a) STORED, v VARCHAR(20) CHARACTER SET latin1 AS (CONCAT('<', a)) VIRTUAL)",
			"INSERT INTO " + schema + ".k (id, a, n) SELECT seq, ELT(1 + seq % 4, 'x', 'Ǆ', 'abc', '😀'), IF(seq % 3 = 0, 3000000000, seq) FROM " + schema + ".seq_1_to_300",
			"CREATE TABLE " + schema + ".nk (a VARCHAR(20), s VARCHAR(20) CHARACTER SET latin1 AS (CONCAT(a, '|')) STORED)",
			"INSERT INTO " + schema + ".nk (a) SELECT ELT(1 + seq % 2, 'Ǆ', 'y') FROM " + schema + ".seq_1_to_40",
			// v warns for a binary b on every row written ("Truncated
			// incorrect DOUBLE value", a warning that names no column).
			"CREATE TABLE " + schema + ".bv (id INT PRIMARY KEY, b VARBINARY(20), v BIGINT AS (b * 2 + 1) VIRTUAL)",
			"INSERT INTO " + schema + ".bv (id, b) SELECT seq, IF(seq % 3 = 0, '12', UNHEX(SHA1(seq))) FROM " + schema + ".seq_1_to_50",
		} {
			if _, err := conn.ExecContext(t.Context(), q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		conn.Close()
		cfg := taskFile(t, schema, schema+".*", fmt.Sprintf("rows-per-chunk: 100\nrows-per-statement: %d\ndir: %s", rps, filepath.Join(t.TempDir(), "state")))
		mustSluice(t, "migrate", "--config", cfg, "--mode", "full")
		sameTables(t, src, dst, schema, schema)
	}
}
