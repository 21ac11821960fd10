package apply_test

import (
	"context"
	"testing"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/schema"
	"github.com/sluice-db/sluice/sqlgen"
)

// TestKeyMatchIsExact: in utf8mb4_unicode_nopad_ci a unique CHAR key holds
// both 'ss' and 'ß', but a scan compares them equal, so a merged DELETE ...
// IN that the optimizer runs as a scan removed both (difftest seed 1102; on
// a table this small the target scans). Row changes by key must match the
// key's exact bytes as well as its collation.
func TestKeyMatchIsExact(t *testing.T) {
	db := sandboxtest.MustOpen(t, dstInst, "")
	sandboxtest.MustExec(t, db, "DROP DATABASE IF EXISTS kx", "CREATE DATABASE kx",
		"CREATE TABLE kx.t (k CHAR(2) CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_nopad_ci NOT NULL, v INT, UNIQUE KEY uk (k))",
		"INSERT INTO kx.t VALUES ('ss', 1), ('ß', 2), ('x', 3), ('ｆ', 4), ('Ä', 5), ('i', 6)", "ANALYZE TABLE kx.t")
	ref := sluice.TableRef{Schema: "kx", Name: "t"}
	tb, err := schema.Inspect(context.Background(), db, ref)
	if err != nil {
		t.Fatal(err)
	}
	spec := sqlgen.NewTableSpec(tb, ref)
	rows := [][]any{{"Ä", int64(5)}, {"ｆ", int64(4)}, {"i", int64(6)}, {"ss", int64(1)}, {"x", int64(3)}}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.Exec(string(spec.AppendDeleteIn(nil, rows...)))
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 5 {
		t.Errorf("the merged delete of 5 rows deleted %d", n)
	}
	upd, _ := spec.AppendUpdate(nil, []any{"ß", int64(2)}, []any{"ß", int64(7)})
	if res, err = tx.Exec(string(upd)); err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Errorf("the update of 'ß' changed %d rows", n)
	}
	q, args := spec.Delete([]any{"ß", int64(7)})
	if res, err = tx.Exec(q, args...); err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Errorf("the delete of 'ß' deleted %d rows", n)
	}
}
