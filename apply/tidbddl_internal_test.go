package apply

import (
	"strings"
	"testing"

	"github.com/sluice-db/sluice"
)

// TestTiDBDDLSession: the source's DDL session context by name, as TiDB
// takes it (MariaDB's numeric form is refused there), and a DDL naming a
// TIMESTAMP under explicit_defaults_for_timestamp=OFF refused.
func TestTiDBDDLSession(t *testing.T) {
	// STRICT_TRANS_TABLES (21), ERROR_FOR_DIVISION_BY_ZERO (26),
	// NO_AUTO_CREATE_USER (28), NO_ENGINE_SUBSTITUTION (30): MariaDB
	// 10.11's default; SIMULTANEOUS_ASSIGNMENT (33) is not TiDB's.
	mode := uint64(1<<21 | 1<<26 | 1<<28 | 1<<30 | 1<<33)
	it := sluice.StreamItem{End: sluice.Position{Flavor: "mariadb"}, Session: sluice.DDLSession{SQLMode: mode, HasSQLMode: true,
		Charset: [3]uint16{45, 45, 8}, TimeZone: "+00:00", HasFlags: true, ExplicitTimestamp: true}}
	got, err := tidbDDLSessionSQL(it, "CREATE TABLE t (a TIMESTAMP)")
	if err != nil {
		t.Fatal(err)
	}
	want := "SET SESSION sql_mode='NO_DIR_IN_CREATE,STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_AUTO_CREATE_USER,NO_ENGINE_SUBSTITUTION', " +
		"character_set_client='utf8mb4', collation_connection='utf8mb4_general_ci', collation_server='latin1_swedish_ci', time_zone='+00:00', foreign_key_checks=1, timestamp=DEFAULT"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	it.Session.ExplicitTimestamp = false
	if _, err := tidbDDLSessionSQL(it, "ALTER TABLE t ADD c TIMESTAMP"); err == nil || !strings.Contains(err.Error(), "explicit_defaults_for_timestamp=OFF") {
		t.Fatalf("TIMESTAMP DDL under explicit_defaults_for_timestamp=OFF: %v", err)
	}
	if _, err := tidbDDLSessionSQL(it, "ALTER TABLE t ADD c INT"); err != nil {
		t.Fatalf("a DDL without TIMESTAMP: %v", err)
	}
	it.Session.Charset[1] = 9999
	if _, err := tidbDDLSessionSQL(it, "CREATE INDEX i ON t (a)"); err == nil {
		t.Fatal("an unknown collation id was taken")
	}
}
