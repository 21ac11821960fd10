package serve_test

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestStockReplicaXAThroughServe: two-phase XA groups pass the relay and
// the binlog service intact. A stock replica of the service applies a
// transaction prepared in one session and committed from another, one
// rolled back after its prepare, and one prepared while the replica was
// stopped, committed after it reconnected; it ends equal to the source.
func TestStockReplicaXAThroughServe(t *testing.T) {
	inst := sandboxtest.Start(t, "src")
	db := sandboxtest.MustOpen(t, inst, "")
	start := masterStatus(t, db)
	l, wait := startRelay(t, inst, filepath.Join(t.TempDir(), "relay"), start)
	wait(start)
	addr, pw := startServe(t, l)
	_, port, _ := net.SplitHostPort(addr)
	rep := sandboxtest.Start(t, "replica")
	rdb := sandboxtest.MustOpen(t, rep, "")
	sandboxtest.MustExec(t, rdb,
		"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT="+port+", MASTER_USER='repl', MASTER_PASSWORD='"+pw+"', "+
			"MASTER_LOG_FILE='"+start.File+"', MASTER_LOG_POS="+strconv.FormatUint(uint64(start.Pos), 10)+", MASTER_USE_GTID=no, MASTER_CONNECT_RETRY=1",
		"START SLAVE")
	xa := func(stmts ...string) {
		t.Helper()
		c, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range stmts {
			if _, err := c.ExecContext(context.Background(), q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		// End the session, so that another one completes the transaction.
		if err := c.Raw(func(any) error { return driver.ErrBadConn }); !errors.Is(err, driver.ErrBadConn) {
			t.Fatal(err)
		}
	}
	sandboxtest.MustExec(t, db, "CREATE DATABASE d", "CREATE TABLE d.t (id int primary key, v varchar(20))", "INSERT INTO d.t VALUES (1,'a'),(2,'b')")
	xa("XA START 'a'", "INSERT INTO d.t VALUES (3,'xa')", "UPDATE d.t SET v='xa' WHERE id=1", "XA END 'a'", "XA PREPARE 'a'")
	xa("XA START 'b'", "DELETE FROM d.t WHERE id=2", "XA END 'b'", "XA PREPARE 'b'")
	sandboxtest.MustExec(t, db, "INSERT INTO d.t VALUES (4,'plain')")
	xa("XA COMMIT 'a'", "XA ROLLBACK 'b'")
	waitReplica(t, rdb, masterStatus(t, db), wait)
	sandboxtest.MustExec(t, rdb, "STOP SLAVE")
	xa("XA START 'c'", "INSERT INTO d.t VALUES (5,'c')", "XA END 'c'", "XA PREPARE 'c'")
	sandboxtest.MustExec(t, rdb, "START SLAVE")
	waitReplica(t, rdb, masterStatus(t, db), wait)
	sandboxtest.MustExec(t, rdb, "STOP SLAVE")
	xa("XA COMMIT 'c'")
	sandboxtest.MustExec(t, rdb, "START SLAVE")
	waitReplica(t, rdb, masterStatus(t, db), wait)
	for _, q := range []string{"CHECKSUM TABLE d.t", "SELECT COUNT(*), GROUP_CONCAT(id, HEX(v) ORDER BY id) FROM d.t"} {
		var a, b [2]any
		if err := db.QueryRow(q).Scan(&a[0], &a[1]); err != nil {
			t.Fatal(err)
		}
		if err := rdb.QueryRow(q).Scan(&b[0], &b[1]); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("%s: source %s, replica %s", q, a, b)
		}
	}
}
