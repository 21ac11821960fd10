package sandboxtest

import (
	"database/sql"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-db/sluice"
)

// WaitReplicaAt waits until the native replica rdb has executed its
// source's binlog up to pos or past it (the source may write on its own
// after pos was read: 43 bytes once, under load, and the replica follows
// it), and fails the test at once with the replica's own error if its IO
// or SQL thread stops.
func WaitReplicaAt(tb testing.TB, rdb *sql.DB, pos sluice.Position) {
	tb.Helper()
	var st map[string]string
	Eventually(tb, 2*time.Minute, fmt.Sprintf("replica executed up to %s", pos), func() bool {
		st = SlaveStatus(tb, rdb)
		exec, _ := strconv.ParseUint(st["Exec_Master_Log_Pos"], 10, 32)
		if f := st["Relay_Master_Log_File"]; f > pos.File || f == pos.File && uint32(exec) >= pos.Pos {
			return true
		}
		if st["Last_IO_Error"] != "" || st["Last_SQL_Error"] != "" {
			tb.Fatalf("replica stopped: IO %q, SQL %q", st["Last_IO_Error"], st["Last_SQL_Error"])
		}
		return false
	}, func() string {
		return fmt.Sprintf("replica at %s:%s (IO running %s)", st["Relay_Master_Log_File"], st["Exec_Master_Log_Pos"], st["Slave_IO_Running"])
	})
}

// Checksum is CHECKSUM TABLE's value for table on db ("NULL" when it is
// missing).
func Checksum(tb testing.TB, db *sql.DB, table string) string {
	tb.Helper()
	var name string
	var sum sql.NullString
	if err := db.QueryRow("CHECKSUM TABLE "+table).Scan(&name, &sum); err != nil {
		tb.Fatal(err)
	}
	if !sum.Valid {
		return "NULL"
	}
	return sum.String
}
