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

// A stock replica whose GTID position is ahead of the binlog in a domain
// the binlog holds is refused with ERR 1236, by the real MariaDB primary
// and by the service alike, in the same test (issue 30 F1). The service
// accepted it and let it wait in silence: after a failover or a lost relay
// it would have skipped every transaction up to its sequence number.
func TestReplicaAheadOfBinlogIsRefused(t *testing.T) {
	inst := sandboxtest.Start(t, "src")
	db := sandboxtest.MustOpen(t, inst, "")
	start := masterStatus(t, db)
	sandboxtest.MustExec(t, db, "CREATE DATABASE d", "CREATE TABLE d.t (id int primary key)", "INSERT INTO d.t VALUES (1)")
	var pos string
	if err := db.QueryRow("SELECT @@gtid_binlog_pos").Scan(&pos); err != nil {
		t.Fatal(err)
	}
	end := masterStatus(t, db)
	l, wait := startRelay(t, inst, filepath.Join(t.TempDir(), "relay"), start)
	wait(end)
	addr, pw := startServe(t, l)
	_, port, _ := net.SplitHostPort(addr)
	var srcID int
	if err := db.QueryRow("SELECT @@server_id").Scan(&srcID); err != nil {
		t.Fatal(err)
	}
	ahead := fmt.Sprintf("0-%d-99999999", srcID)
	sandboxtest.MustExec(t, db, "CREATE USER IF NOT EXISTS 'rpl'@'127.0.0.1' IDENTIFIED BY 'rplpw'", "GRANT REPLICATION SLAVE ON *.* TO 'rpl'@'127.0.0.1'")

	ioError := func(r *sql.DB) string {
		var st map[string]string
		sandboxtest.Eventually(t, time.Minute, fmt.Sprintf("an IO error for a replica at %s (binlog at %s)", ahead, pos), func() bool {
			st = slaveStatus(t, r)
			return st["Last_IO_Error"] != ""
		}, func() string { return fmt.Sprint(st) })
		return st["Last_IO_Error"]
	}
	for _, c := range []struct{ name, port, user, pw string }{
		{"MariaDB", fmt.Sprint(inst.Port), "rpl", "rplpw"},
		{"sluice serve", port, "repl", pw},
	} {
		rep := sandboxtest.Start(t, "replica")
		r := sandboxtest.MustOpen(t, rep, "")
		sandboxtest.MustExec(t, r,
			"SET GLOBAL gtid_slave_pos='"+ahead+"'",
			"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT="+c.port+", MASTER_USER='"+c.user+"', MASTER_PASSWORD='"+c.pw+"', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1",
			"START SLAVE")
		e := ioError(r)
		t.Logf("%s: %s", c.name, e)
		if !strings.Contains(e, "1236") || !strings.Contains(e, "connecting slave requested to start from GTID "+ahead+", which is not in the master's binlog") {
			t.Errorf("%s: IO error %q, want 1236 naming GTID %s as not in the binlog", c.name, e, ahead)
		}
	}
}
