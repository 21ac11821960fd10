package apply

import (
	"testing"

	"github.com/sluice-db/sluice"
)

func TestDDLSessionSQL(t *testing.T) {
	maria := sluice.StreamItem{End: sluice.Position{Flavor: "mariadb"}, Timestamp: 100, Micros: 5,
		Session: sluice.DDLSession{SQLMode: 1 << 20, HasSQLMode: true, Charset: [3]uint16{8, 8, 45}, TimeZone: "+02:00",
			NoFKChecks: true, HasFlags: true, AutoIncIncrement: 2, AutoIncOffset: 1}}
	want := "SET SESSION sql_mode=1048704, character_set_client=8, collation_connection=8, collation_server=45, time_zone='+02:00', " +
		"foreign_key_checks=0, explicit_defaults_for_timestamp=0, auto_increment_increment=2, auto_increment_offset=1, timestamp=100.000005"
	if got := ddlSessionSQL(maria); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	my := sluice.StreamItem{End: sluice.Position{Flavor: "mysql"},
		Session: sluice.DDLSession{SQLMode: 1, HasSQLMode: true, Charset: [3]uint16{255, 255, 255}, HasFlags: true, ExplicitTimestamp: true}}
	want = "SET SESSION sql_mode='" + ddlSQLMode + "', character_set_client=utf8mb4, foreign_key_checks=1, timestamp=DEFAULT"
	if got := ddlSessionSQL(my); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	for _, c := range []struct {
		in   string
		want ddlMark
	}{
		{"f:10", ddlMark{end: "f:10"}},
		{"f:10 0-1-5\n2 abcd", ddlMark{end: "f:10 0-1-5", stmt: 2, digest: "abcd", exact: true}},
		{"f:10\n1 ", ddlMark{end: "f:10", stmt: 1, exact: true}},
	} {
		if got := parseMark(c.in); got != c.want || got.String() != c.in {
			t.Errorf("parseMark(%q) = %+v (%q), want %+v", c.in, got, got.String(), c.want)
		}
	}
}
