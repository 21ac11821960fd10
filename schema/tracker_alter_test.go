package schema

import (
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
)

// TestAlterResolvesOldNamesOnce: every clause of an ALTER TABLE names the
// columns of the table as it was (issue 29, N6). Before the fix the clauses
// were applied one after the other: `CHANGE a b, CHANGE b a` left the
// columns as they were, so rows decoded by name went to each other's
// column, and keys followed the wrong column.
func TestAlterResolvesOldNamesOnce(t *testing.T) {
	tr := NewTracker()
	ref := sluice.TableRef{Schema: "db", Name: "t"}
	for _, c := range []struct {
		q, cols, keys string
	}{
		{"CREATE TABLE t (id INT PRIMARY KEY, a INT NOT NULL, b VARCHAR(5), UNIQUE KEY ua (a))", "id int,a int,b varchar", "PRIMARY(id) ua(a)"},
		{"ALTER TABLE t CHANGE a b INT NOT NULL, CHANGE b a VARCHAR(5)", "id int,b int,a varchar", "PRIMARY(id) ua(b)"},
		{"ALTER TABLE t RENAME COLUMN a TO b, RENAME COLUMN b TO a", "id int,a int,b varchar", "PRIMARY(id) ua(a)"},
		{"ALTER TABLE t CHANGE a b INT NOT NULL, CHANGE b a VARCHAR(5) FIRST", "a varchar,id int,b int", "PRIMARY(id) ua(b)"},
		{"ALTER TABLE t DROP COLUMN a, ADD COLUMN a BIGINT AFTER id, MODIFY b BIGINT NOT NULL", "id int,a bigint,b bigint", "PRIMARY(id) ua(b)"},
		{"ALTER TABLE t ADD COLUMN c INT FIRST, ADD COLUMN d INT, DROP COLUMN b", "c int,id int,a bigint,d int", "PRIMARY(id)"},
	} {
		stmts, err := tr.Parse(c.q)
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.Apply("db", stmts[0]); err != nil {
			t.Fatalf("%s: %v", c.q, err)
		}
		tb := tr.Table(ref)
		var cols []string
		for _, col := range tb.Columns {
			cols = append(cols, col.Name+" "+col.DataType)
		}
		d := tr.tables[keyOf(ref)]
		var keys []string
		for _, k := range d.Keys {
			keys = append(keys, k.Name+"("+strings.Join(k.Cols, ",")+")")
		}
		if got := strings.Join(cols, ","); got != c.cols {
			t.Errorf("%s\n columns %s\n want    %s", c.q, got, c.cols)
		}
		if got := strings.Join(keys, " "); got != c.keys {
			t.Errorf("%s\n keys %s\n want %s", c.q, got, c.keys)
		}
	}
}
