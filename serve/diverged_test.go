package serve_test

import (
	"database/sql"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// A stock replica whose GTID the binlog lacks, although its domain has
// reached that sequence number, is refused as diverged with ERR 1236, by
// the real MariaDB primary and by the service alike, in the same test
// (issue 30 F2): a server id that never appears in the domain, and one
// that appears but never reached the replica's sequence number. The
// service served both by sequence number, so the replica kept its extra
// transactions and missed the primary's of the same numbers. A replica in
// GTID strict mode whose GTID falls in a gap of its server id's sequence
// numbers gets MariaDB's hole error; a replica at the last GTID of a
// server id that is not the domain's last is accepted by both.
func TestDivergedReplicaIsRefused(t *testing.T) {
	inst := sandboxtest.Start(t, "src")
	db := sandboxtest.MustOpen(t, inst, "")
	db.SetMaxOpenConns(1) // the session's server_id and gtid_seq_no hold for the statements after them
	start := masterStatus(t, db)
	var srcID int
	if err := db.QueryRow("SELECT @@server_id").Scan(&srcID); err != nil {
		t.Fatal(err)
	}
	// Domain 0: srcID 1-3, 77 at 4, srcID 5-6, then a hole: srcID 20-23.
	sandboxtest.MustExec(t, db, "CREATE DATABASE d", "CREATE TABLE d.t (id int primary key)", "INSERT INTO d.t VALUES (1)",
		"SET SESSION server_id=77", "INSERT INTO d.t VALUES (2)", fmt.Sprintf("SET SESSION server_id=%d", srcID),
		"INSERT INTO d.t VALUES (3)", "INSERT INTO d.t VALUES (4)",
		"SET SESSION gtid_seq_no=20", "INSERT INTO d.t VALUES (5)", "INSERT INTO d.t VALUES (6)")
	// Logged: the last two GTIDs of the source are 22 and 23.
	sandboxtest.MustExec(t, db, "CREATE USER IF NOT EXISTS 'rpl'@'127.0.0.1' IDENTIFIED BY 'rplpw'", "GRANT REPLICATION SLAVE ON *.* TO 'rpl'@'127.0.0.1'")
	var pos string
	if err := db.QueryRow("SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("0-%d-23", srcID); pos != want {
		t.Fatalf("source at %s, want %s", pos, want)
	}
	end := masterStatus(t, db)
	l, wait := startRelay(t, inst, filepath.Join(t.TempDir(), "relay"), start)
	wait(end)
	addr, pw := startServe(t, l)
	_, port, _ := net.SplitHostPort(addr)

	diverged := "which is not in the master's binlog. Since the master's binlog contains GTIDs with higher sequence numbers, " +
		"it probably means that the slave has diverged due to executing extra erroneous transactions"
	cases := []struct {
		name, slavePos string
		want           string // in Last_IO_Error; "" for accepted
	}{
		{"unknown server id", "0-999-3", "connecting slave requested to start from GTID 0-999-3, " + diverged},
		{"server id short of the seq", "0-77-5", "connecting slave requested to start from GTID 0-77-5, " + diverged},
		{"hole", fmt.Sprintf("0-%d-10", srcID), fmt.Sprintf("The binlog on the master is missing the GTID 0-%d-10 requested by the slave "+
			"(even though both a prior and a subsequent sequence number does exist), and GTID strict mode is enabled", srcID)},
		{"last of another server id", "0-77-4", ""},
		{"before another server id's first", "0-77-2", "The binlog on the master is missing the GTID 0-77-2 requested by the slave " +
			"(even though both a prior and a subsequent sequence number does exist), and GTID strict mode is enabled"},
	}
	primaries := []struct{ name, port, user, pw string }{
		{"MariaDB", fmt.Sprint(inst.Port), "rpl", "rplpw"},
		{"sluice serve", port, "repl", pw},
	}
	rep := sandboxtest.Start(t, "replica")
	r := sandboxtest.MustOpen(t, rep, "")
	for _, c := range cases {
		for _, p := range primaries {
			sandboxtest.MustExec(t, r, "STOP SLAVE", "RESET SLAVE ALL",
				"SET GLOBAL gtid_slave_pos='"+c.slavePos+"'",
				"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT="+p.port+", MASTER_USER='"+p.user+"', MASTER_PASSWORD='"+p.pw+"', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1",
				"START SLAVE IO_THREAD")
			e, ioPos := ioOutcome(t, r, pos)
			t.Logf("%s, %s at %s: error %q, IO position %q", c.name, p.name, c.slavePos, e, ioPos)
			switch {
			case c.want == "" && e != "":
				t.Errorf("%s: %s refused a replica at %s: %s", c.name, p.name, c.slavePos, e)
			case c.want != "" && (!strings.Contains(e, "1236") || !strings.Contains(e, c.want)):
				t.Errorf("%s: %s gave a replica at %s IO error %q (IO position %s), want 1236 with %q", c.name, p.name, c.slavePos, e, ioPos, c.want)
			}
		}
	}
	sandboxtest.MustExec(t, r, "STOP SLAVE")
}

// ioOutcome waits until a replica's IO thread has an error, or has
// received everything up to the source's GTID position pos.
func ioOutcome(t *testing.T, r *sql.DB, pos string) (ioErr, ioPos string) {
	t.Helper()
	var st map[string]string
	sandboxtest.Eventually(t, time.Minute, "a replica's IO error or "+pos, func() bool {
		st = slaveStatus(t, r)
		return st["Last_IO_Error"] != "" || st["Gtid_IO_Pos"] == pos
	}, func() string { return fmt.Sprint(st) })
	if e := st["Last_IO_Error"]; e != "" {
		return e, st["Gtid_IO_Pos"]
	}
	return "", pos
}
