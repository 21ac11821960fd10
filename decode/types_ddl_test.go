package decode

import (
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
)

// TestDDLKeepsMariaDBTypes: statements with UUID, INET6 and INET4 columns
// reach the target with those types, and the tracker knows the columns.
func TestDDLKeepsMariaDBTypes(t *testing.T) {
	d, err := New(DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ q, want string }{
		{"CREATE TABLE t (id INT PRIMARY KEY, u UUID NOT NULL DEFAULT UUID(), a INET6, b INET4 DEFAULT '0.0.0.0')",
			"CREATE TABLE IF NOT EXISTS `db`.`t` (`id` INT PRIMARY KEY,`u` UUID NOT NULL DEFAULT (UUID()),`a` INET6,`b` INET4 DEFAULT _UTF8MB4'0.0.0.0')"},
		{"ALTER TABLE t ADD COLUMN c UUID, MODIFY a INET4 NOT NULL, CHANGE b e INET6",
			"ALTER TABLE `db`.`t` ADD COLUMN IF NOT EXISTS `c` UUID, MODIFY COLUMN IF EXISTS `a` INET4 NOT NULL, CHANGE COLUMN IF EXISTS `b` `e` INET6"},
	}
	for _, c := range cases {
		items, err := d.Feed(queryEvent("db", c.q), sluice.Position{File: "f", Pos: 10})
		if err != nil {
			t.Fatalf("%s: %v", c.q, err)
		}
		if len(items) != 1 || items[0].Kind != sluice.ItemDDL {
			t.Fatalf("%s: items %+v", c.q, items)
		}
		if got := strings.Join(items[0].DDL, ";"); got != c.want {
			t.Errorf("%s\n got  %s\n want %s", c.q, got, c.want)
		}
	}
	tb := d.Tracker().Table(sluice.TableRef{Schema: "db", Name: "t"})
	var types []string
	for _, c := range tb.Columns {
		types = append(types, c.Name+" "+c.DataType)
	}
	if got := strings.Join(types, ","); got != "id int,u uuid,a inet4,e inet6,c uuid" {
		t.Errorf("tracked columns: %s", got)
	}
}
