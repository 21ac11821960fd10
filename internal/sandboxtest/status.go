package sandboxtest

import (
	"database/sql"
	"testing"

	"github.com/sluice-db/sluice"
)

// MasterStatus is SHOW MASTER STATUS's file and position on db.
func MasterStatus(tb testing.TB, db *sql.DB) sluice.Position {
	tb.Helper()
	var p sluice.Position
	var a, b any
	if err := db.QueryRow("SHOW MASTER STATUS").Scan(&p.File, &p.Pos, &a, &b); err != nil {
		tb.Fatal(err)
	}
	return p
}

// SlaveStatus is SHOW SLAVE STATUS on db, column by column (empty when
// db replicates from nothing).
func SlaveStatus(tb testing.TB, db *sql.DB) map[string]string {
	tb.Helper()
	rows, err := db.Query("SHOW SLAVE STATUS")
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	out := map[string]string{}
	if !rows.Next() {
		return out
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		tb.Fatal(err)
	}
	for i, c := range cols {
		out[c] = vals[i].String
	}
	return out
}

// MasterStatusGTID is MasterStatus with the GTID position (@@gtid_binlog_pos).
func MasterStatusGTID(tb testing.TB, db *sql.DB) sluice.Position {
	tb.Helper()
	p := MasterStatus(tb, db)
	if err := db.QueryRow("SELECT @@gtid_binlog_pos").Scan(&p.GTIDSet); err != nil {
		tb.Fatal(err)
	}
	return p
}
