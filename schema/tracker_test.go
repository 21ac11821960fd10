package schema

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
)

func mustApply(t *testing.T, tr *Tracker, db string, sqls ...string) {
	t.Helper()
	for _, s := range sqls {
		stmts, err := tr.Parse(s)
		if err != nil {
			t.Fatalf("parse %q: %v", s, err)
		}
		for _, st := range stmts {
			if err := tr.Apply(db, st); err != nil {
				t.Fatalf("apply %q: %v", s, err)
			}
		}
	}
}

func names(tb *sluice.Table) string {
	var out []string
	for _, c := range tb.Columns {
		out = append(out, c.Name)
	}
	return strings.Join(out, ",")
}

func TestTrackerFollowsDDL(t *testing.T) {
	tr := NewTracker()
	mustApply(t, tr, "db",
		"CREATE TABLE t (a INT NOT NULL, b VARCHAR(10), c INT UNSIGNED, UNIQUE KEY uc (c), PRIMARY KEY (a))")
	ref := sluice.TableRef{Schema: "db", Name: "t"}
	v1 := tr.Table(ref)
	if names(v1) != "a,b,c" || len(v1.PK) != 1 || v1.PK[0] != 0 || !v1.PKIsPrimary || !v1.Columns[2].Unsigned || len(v1.UniqueKeys) != 2 {
		t.Fatalf("after create: %+v", v1)
	}
	mustApply(t, tr, "db", "ALTER TABLE t ADD COLUMN z INT FIRST, DROP COLUMN b, MODIFY c BIGINT NOT NULL AFTER z")
	v2 := tr.Table(ref)
	if v2 == v1 {
		t.Fatal("a change must produce a new table version")
	}
	if names(v2) != "z,c,a" || v2.PK[0] != 2 || v2.Columns[1].DataType != "bigint" {
		t.Fatalf("after alter: %s pk=%v %+v", names(v2), v2.PK, v2.Columns)
	}
	mustApply(t, tr, "db", "ALTER TABLE t DROP PRIMARY KEY, CHANGE COLUMN z y INT NOT NULL")
	v3 := tr.Table(ref)
	// With the primary key gone, the NOT NULL unique key on c identifies rows.
	if names(v3) != "y,c,a" || len(v3.PK) != 1 || v3.PK[0] != 1 || v3.PKIsPrimary {
		t.Fatalf("after drop pk: %s pk=%v", names(v3), v3.PK)
	}
	mustApply(t, tr, "db", "RENAME TABLE t TO u", "CREATE TABLE other.k (x INT)")
	if tr.Table(ref) != nil || tr.Table(sluice.TableRef{Schema: "db", Name: "u"}) == nil {
		t.Fatal("rename not followed")
	}
	if k := tr.Table(sluice.TableRef{Schema: "other", Name: "k"}); k == nil || k.HasKey() {
		t.Fatalf("keyless table: %+v", k)
	}
	snap, err := tr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, tr, "db", "DROP TABLE u", "DROP DATABASE other")
	if len(tr.Tables()) != 0 {
		t.Fatalf("drop not followed: %v", tr.Tables())
	}
	if err := tr.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if got := tr.Table(sluice.TableRef{Schema: "db", Name: "u"}); got == nil || names(got) != "y,c,a" || got.PK[0] != 1 {
		t.Fatalf("restore: %+v", got)
	}
}

func TestTrackerUnsupported(t *testing.T) {
	tr := NewTracker()
	mustApply(t, tr, "db", "CREATE TABLE t (a INT PRIMARY KEY)")
	before := tr.Version()
	stmts, err := tr.Parse("ALTER TABLE t ADD COLUMN b INT, COALESCE PARTITION 2")
	if err != nil {
		t.Fatal(err)
	}
	err = tr.Apply("db", stmts[0])
	if !errors.Is(err, sluice.ErrUnsupportedDDL) {
		t.Fatalf("got %v, want ErrUnsupportedDDL", err)
	}
	if tr.Version() != before || names(tr.Table(sluice.TableRef{Schema: "db", Name: "t"})) != "a" {
		t.Fatal("a rejected ALTER must leave the schema unchanged")
	}
}

// TestSeededKeysDropByName: a table seeded from Inspect (Put) must lose its
// primary key on DROP PRIMARY KEY and a unique key on DROP INDEX, as one
// created by DDL in the stream does. Keys seeded under made-up names stayed
// behind, and the applier went on matching rows by a key that was no longer
// unique (the difftest's droppk script).
func TestSeededKeysDropByName(t *testing.T) {
	ref := sluice.TableRef{Schema: "db", Name: "t"}
	seeded := &sluice.Table{Ref: ref, Columns: []sluice.Column{{Name: "id"}, {Name: "u"}, {Name: "v", Nullable: true}},
		PK: []int{0}, PKIsPrimary: true, UniqueKeys: [][]int{{0}, {1}}, UniqueKeyNames: []string{"PRIMARY", "uu"}}
	tr := NewTracker()
	tr.Put(seeded)
	mustApply(t, tr, "db", "ALTER TABLE t DROP PRIMARY KEY")
	tb := tr.Table(ref)
	if len(tb.UniqueKeys) != 1 || tb.PKIsPrimary || len(tb.PK) != 1 || tb.PK[0] != 1 {
		t.Fatalf("after DROP PRIMARY KEY: PK %v primary %v unique keys %v, want only uu as the key", tb.PK, tb.PKIsPrimary, tb.UniqueKeys)
	}
	mustApply(t, tr, "db", "ALTER TABLE t DROP INDEX uu")
	if tb := tr.Table(ref); len(tb.UniqueKeys) != 0 || tb.HasKey() {
		t.Fatalf("after DROP INDEX uu: PK %v unique keys %v, want none", tb.PK, tb.UniqueKeys)
	}
	// Without names (an older saved state), the primary key is still found.
	tr.Put(&sluice.Table{Ref: ref, Columns: seeded.Columns, PK: []int{0}, PKIsPrimary: true, UniqueKeys: [][]int{{0}}})
	mustApply(t, tr, "db", "ALTER TABLE t DROP PRIMARY KEY")
	if tb := tr.Table(ref); tb.HasKey() {
		t.Fatalf("after DROP PRIMARY KEY of an unnamed seeded key: PK %v", tb.PK)
	}
}
