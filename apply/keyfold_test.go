package apply_test

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/sluice-db/sluice/apply"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestKeyFoldAgreesWithTarget: for every pair of values that the target's
// collation calls equal (its own = operator on the real server), the
// writeset hashes must be equal too, or two transactions on one key could
// run in parallel (issue 13 bug 5). Seeded: random strings built from case,
// accent, expansion, trailing-space and supplementary-character variants.
// It also checks that the exact folds still tell different keys apart,
// since folding everything would pass the first check and lose all
// parallelism.
func TestKeyFoldAgreesWithTarget(t *testing.T) {
	seedVal := sandboxtest.Seed(t)
	r := rand.New(rand.NewSource(seedVal))
	db := sandboxtest.MustOpen(t, dstInst, "")
	ctx := context.Background()
	parts := []string{"a", "A", "á", "Á", "ä", "e", "é", "É", "E", "ê", "s", "ss", "ß", "o", "ö", "Ö", " ", "1", "😀", "😃", "ǆ", "Ǆ", "ı", "I", "i"}
	latinParts := []string{"a", "A", "ä", "Ä", "e", "é", "É", "E", "s", "ß", " ", "1", "ö", "Ö", "y", "ü", "Ü"}
	colls := []struct {
		coll, cs string
		exact    bool // distinct values must hash apart (no fold to one class)
	}{
		{"utf8mb4_general_ci", "utf8mb4", true}, {"utf8mb4_general_nopad_ci", "utf8mb4", true},
		{"utf8mb3_general_ci", "utf8mb3", true}, {"utf8mb4_bin", "utf8mb4", true}, {"utf8mb4_nopad_bin", "utf8mb4", true},
		{"utf8mb4_unicode_ci", "utf8mb4", false}, {"utf8mb4_uca1400_ai_ci", "utf8mb4", false},
		{"latin1_swedish_ci", "latin1", true}, {"latin1_bin", "latin1", true}, {"latin1_german2_ci", "latin1", false},
	}
	for _, c := range colls {
		pool := parts
		if c.cs == "latin1" {
			pool = latinParts
		}
		if c.cs == "utf8mb3" {
			pool = pool[:len(pool)-4] // no supplementary characters in utf8mb3
		}
		var vals []string
		for i := 0; i < 120; i++ {
			var b strings.Builder
			for j := 0; j <= r.Intn(3); j++ {
				b.WriteString(pool[r.Intn(len(pool))])
			}
			vals = append(vals, b.String())
		}
		args := make([]any, len(vals))
		for i, v := range vals {
			if c.cs == "latin1" {
				var conv []byte
				if err := db.QueryRow("SELECT CAST(CONVERT(? USING latin1) AS BINARY)", v).Scan(&conv); err != nil {
					t.Fatal(err)
				}
				args[i] = conv // latin1 values reach the applier as raw bytes
			} else {
				args[i] = v
			}
		}
		hs, err := apply.FoldHashes(ctx, db, c.coll, c.cs, args...)
		if err != nil {
			t.Fatal(err)
		}
		pairs, apart := 0, 0
		for n := 0; n < 400; n++ {
			i, j := r.Intn(len(vals)), r.Intn(len(vals))
			var eq int
			q := fmt.Sprintf("SELECT CONVERT(? USING %s) COLLATE %s = CONVERT(? USING %s) COLLATE %s", c.cs, c.coll, c.cs, c.coll)
			if err := db.QueryRow(q, vals[i], vals[j]).Scan(&eq); err != nil {
				t.Fatal(err)
			}
			if eq == 1 {
				pairs++
				if hs[i] != hs[j] {
					t.Errorf("seed %d: %s: the target finds %q = %q but their writeset hashes differ", seedVal, c.coll, vals[i], vals[j])
				}
			} else if hs[i] != hs[j] {
				apart++
			}
		}
		if c.exact && apart == 0 {
			t.Errorf("seed %d: %s: no two distinct values hashed apart; the fold puts everything in one class", seedVal, c.coll)
		}
		t.Logf("%s: %d equal pairs, %d told apart", c.coll, pairs, apart)
	}
}

// TestCollatedKeyVariantsApplyInOrder: the repro. A primary key in a
// _ci collation whose values are case and accent variants of one another
// ('é', 'É', 'E'): one transaction deletes the row and the next inserts a variant,
// in two transactions, so consecutive transactions touch one key under the
// collation though their bytes differ. Run on four workers, they must still apply in order
// (before the fix: "Duplicate entry 'E-2' for key 'PRIMARY'").
func TestCollatedKeyVariantsApplyInOrder(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	seed(t, "keyvariants", src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE kv",
		"CREATE TABLE kv.t (s VARCHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL, n INT NOT NULL, v INT, PRIMARY KEY (s, n))",
		"CREATE TABLE kv.u (id INT PRIMARY KEY, s VARCHAR(8) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci, UNIQUE KEY (s))",
		"CREATE TABLE kv.l (s VARCHAR(8) CHARACTER SET latin1 COLLATE latin1_swedish_ci NOT NULL PRIMARY KEY, v INT)",
		"INSERT INTO kv.t VALUES ('é', 2, 0)", "INSERT INTO kv.u VALUES (1, 'ß')", "INSERT INTO kv.l VALUES ('ä', 0)")
	variants := []string{"é", "É", "E", "e", "ê", "E "}
	uvariants := []string{"ss", "ß", "SS", "Ss"}
	lvariants := []string{"ä", "Ä", "ä "}
	cur, ucur, lcur := "é", "ß", "ä"
	for i := 0; i < 200; i++ {
		next := variants[i%len(variants)]
		unext := uvariants[i%len(uvariants)]
		lnext := lvariants[i%len(lvariants)]
		// Two transactions: the delete of the stored value, then the
		// insert of a variant, whose bytes differ from the deleted key's.
		sandboxtest.MustExec(t, src, fmt.Sprintf("DELETE FROM kv.t WHERE s = '%s' AND n = 2", cur),
			fmt.Sprintf("INSERT INTO kv.t VALUES ('%s', 2, %d)", next, i))
		// The same through a unique key that is not the primary key.
		sandboxtest.MustExec(t, src, "DELETE FROM kv.u WHERE id = 1",
			fmt.Sprintf("INSERT INTO kv.u VALUES (1, '%s')", unext))
		sandboxtest.MustExec(t, src, fmt.Sprintf("UPDATE kv.l SET s = '%s', v = %d WHERE s = '%s'", lnext, i, lcur))
		cur, ucur, lcur = next, unext, lnext
	}
	_ = ucur
	until := sourcePos(t, src)
	if _, err := replicate(context.Background(), srcInst, runOpts{task: "keyvariants", workers: 4, batch: 1, until: until}); err != nil {
		t.Fatal(err)
	}
	for _, tbl := range []string{"kv.t", "kv.u", "kv.l"} {
		if a, b := hexDump(t, src, tbl), hexDump(t, dst, tbl); a != b {
			t.Errorf("%s differs:\nsource:\n%s\ntarget:\n%s", tbl, a, b)
		}
	}
}
