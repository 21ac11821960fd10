package schema

import (
	"testing"

	"github.com/sluice-db/sluice"
)

// TestTrackerMariaDBTypes: CREATE and ALTER with UUID, INET6 and INET4
// columns are followed, with the real types, and names or functions spelled
// like these types are left alone.
func TestTrackerMariaDBTypes(t *testing.T) {
	tr := NewTracker()
	mustApply(t, tr, "db",
		"CREATE TABLE t (id UUID NOT NULL DEFAULT UUID(), `uuid` INT, inet6 INET6, a inet4 /* inet4 */ DEFAULT '0.0.0.0', b VARCHAR(10) DEFAULT 'uuid', PRIMARY KEY (id), KEY inet4 (a))",
		"ALTER TABLE t ADD COLUMN c UUID AFTER id, ADD COLUMN IF NOT EXISTS d INET4, ADD (e INET6 NOT NULL, f INT), MODIFY b INET6, CHANGE COLUMN inet6 g uuid NULL",
		"ALTER TABLE t ADD INDEX inet6 (c), ADD uuid4 /*!50100 INET6 */",
	)
	tb := tr.Table(sluice.TableRef{Schema: "db", Name: "t"})
	if tb == nil {
		t.Fatal("table not tracked")
	}
	want := map[string]string{"id": "uuid", "c": "uuid", "uuid": "int", "g": "uuid", "a": "inet4", "b": "inet6", "d": "inet4", "e": "inet6", "f": "int", "uuid4": "inet6"}
	if len(tb.Columns) != len(want) {
		t.Fatalf("columns %s", names(tb))
	}
	for _, c := range tb.Columns {
		if want[c.Name] != c.DataType {
			t.Errorf("column %s: type %q, want %q", c.Name, c.DataType, want[c.Name])
		}
		if mariadbTypes[c.DataType] > 0 && (c.FullType != c.DataType || c.Charset != "") {
			t.Errorf("column %s: full type %q charset %q", c.Name, c.FullType, c.Charset)
		}
	}
	if len(tb.PK) != 1 || tb.Columns[tb.PK[0]].Name != "id" {
		t.Errorf("primary key %v", tb.PK)
	}
	if RestoreTypes("x ENUM('"+typeMarker+"inet4') y") != "x INET4 y" {
		t.Error("RestoreTypes")
	}
	mustApply(t, tr, "db", "CREATE TABLE g (id INT, p POINT NOT NULL, c INT INVISIBLE, `invisible` INT, point INT)")
	g := tr.Table(sluice.TableRef{Schema: "db", Name: "g"})
	if g == nil || names(g) != "id,p,c,invisible,point" || g.Columns[1].DataType != "point" || g.Columns[1].Nullable || g.Columns[4].DataType != "int" {
		t.Errorf("spatial/invisible table: %+v", g)
	}
	// The words as names only: no rewrite at all.
	for _, q := range []string{
		"CREATE TABLE uuid (inet6 INT)", "ALTER TABLE inet4 ADD COLUMN uuid INT", "DROP TABLE uuid, inet6",
		"RENAME TABLE a TO uuid", "ALTER TABLE t ADD UNIQUE uuid (a)", "ALTER TABLE t ADD CONSTRAINT inet6 UNIQUE (a)",
		"ALTER TABLE t CHANGE uuid inet6 INT", "CREATE TABLE t (a VARCHAR(36) DEFAULT (uuid()))", "SELECT x.uuid FROM x",
	} {
		if got, changed := rewriteMariaDBTypes(q); changed {
			t.Errorf("%s: rewritten to %s", q, got)
		}
	}
}
