package apply

import (
	"context"
	"testing"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestFoldsForPrefixKeys: a column that is part of a unique key only
// through a prefix folds to one class (rows that differ after the prefix
// are one key); a prefix in a non-unique key, or a whole column in a
// unique key, keeps its collation's fold. Column names match whatever
// their case (the prefixes are read in a query of their own, foldsFor).
func TestFoldsForPrefixKeys(t *testing.T) {
	inst := sandboxtest.Start(t, "kfold")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db, "CREATE DATABASE kf", `CREATE TABLE kf.t (id INT PRIMARY KEY,
		c VARCHAR(20) CHARACTER SET latin1 COLLATE latin1_bin, Mixed VARCHAR(20) CHARACTER SET latin1 COLLATE latin1_bin,
		d VARCHAR(20) CHARACTER SET latin1 COLLATE latin1_bin, e VARCHAR(20) CHARACTER SET latin1 COLLATE latin1_bin,
		UNIQUE KEY (c(3)), UNIQUE KEY (id, Mixed(2)), KEY (d(3)), UNIQUE KEY (e))`)
	a := &Applier{db: db}
	folds, err := a.foldsFor(context.Background(), "kf", "t")
	if err != nil {
		t.Fatal(err)
	}
	for col, want := range map[string]foldKind{"c": foldAll, "mixed": foldAll, "d": foldBin, "e": foldBin} {
		if f := folds[col]; f == nil || f.kind != want {
			t.Errorf("column %s: fold %+v, want kind %v", col, f, want)
		}
	}
	if len(folds) != 5 {
		t.Errorf("%d columns folded, want 5: %v", len(folds), folds)
	}
}
