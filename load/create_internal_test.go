package load

import (
	"testing"

	"github.com/sluice-db/sluice"
)

// TestDefinitionDiffIgnoresIntDisplayWidth: TiDB reports "int" for the
// column MariaDB reports as "int(11)"; a table TiDB created exactly was
// refused as different (issue 32). Other type differences still count.
func TestDefinitionDiffIgnoresIntDisplayWidth(t *testing.T) {
	tbl := func(types ...string) *sluice.Table {
		t := &sluice.Table{}
		for i, ty := range types {
			t.Columns = append(t.Columns, sluice.Column{Name: string(rune('a' + i)), FullType: ty})
		}
		return t
	}
	if d := definitionDiff(tbl("int(11)", "bigint(20) unsigned", "tinyint(1)", "year(4)"), tbl("int", "bigint unsigned", "tinyint(1)", "year")); d != "" {
		t.Errorf("display widths counted: %s", d)
	}
	for _, c := range [][2]string{{"int(11)", "bigint"}, {"int(11)", "int unsigned"}, {"varchar(10)", "varchar(11)"}, {"decimal(10,2)", "decimal(10,3)"}} {
		if d := definitionDiff(tbl(c[0]), tbl(c[1])); d == "" {
			t.Errorf("%s and %s compared equal", c[0], c[1])
		}
	}
}
