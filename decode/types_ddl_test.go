package decode

import (
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice"
)

// TestDDLKeepsMariaDBTypes: statements with UUID, INET6 and INET4 columns
// reach the target with those types, and the tracker knows the columns.
func TestDDLKeepsMariaDBTypes(t *testing.T) {
	d, err := New(DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// The target runs the source's own text (want "": q itself); the
	// tracker still has to read the types.
	cases := []struct{ q, want string }{
		{"CREATE TABLE t (id INT PRIMARY KEY, u UUID NOT NULL DEFAULT UUID(), a INET6, b INET4 DEFAULT '0.0.0.0')",
			""},
		{"ALTER TABLE t ADD COLUMN c UUID, MODIFY a INET4 NOT NULL, CHANGE b e INET6",
			""},
		// Spatial types and invisible columns, which the parser does not
		// know either (difftest bug C).
		{"CREATE TABLE g (id INT PRIMARY KEY, p POINT NOT NULL, g GEOMETRY, c INT INVISIBLE, d INT DEFAULT 1 INVISIBLE COMMENT 'x', KEY (c))",
			""},
		{"ALTER TABLE g ADD COLUMN e POLYGON INVISIBLE, MODIFY c BIGINT INVISIBLE",
			""},
	}
	for _, c := range cases {
		items, err := d.Feed(queryEvent("db", c.q), sluice.Position{File: "f", Pos: 10})
		if err != nil {
			t.Fatalf("%s: %v", c.q, err)
		}
		if len(items) != 1 || items[0].Kind != sluice.ItemDDL {
			t.Fatalf("%s: items %+v", c.q, items)
		}
		if c.want == "" {
			c.want = c.q
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

// TestCreateSelectRefusedClearly: a CREATE TABLE ... SELECT group whose
// statement cannot be replicated stops at the statement with a message that
// names the statement, its GTID and position, and does not tell the user to
// resume right after the statement (its rows would be lost).
func TestCreateSelectRefusedClearly(t *testing.T) {
	d, err := New(DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	gtid := &replication.BinlogEvent{Header: &replication.EventHeader{Timestamp: 1}, Event: &replication.MariadbGTIDEvent{
		GTID: mysql.MariadbGTID{DomainID: 0, ServerID: 1, SequenceNumber: 7}, Flags: replication.BINLOG_MARIADB_FL_DDL}}
	if _, err := d.Feed(gtid, sluice.Position{File: "f", Pos: 100}); err != nil {
		t.Fatal(err)
	}
	_, err = d.Feed(queryEvent("db", "CREATE TABLE t (a INT) WITH SYSTEM VERSIONING"), sluice.Position{File: "f", Pos: 200})
	if err == nil {
		t.Fatal("an unparsable CREATE ... SELECT was accepted")
	}
	msg := err.Error()
	t.Log(msg)
	for _, want := range []string{"CREATE TABLE ... SELECT", "0-1-7", "f:200", "CREATE TABLE t (a INT) WITH SYSTEM VERSIONING", "after the whole transaction"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q: %s", want, msg)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("message is not one line: %q", msg)
	}
}
