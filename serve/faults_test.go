package serve_test

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestReplicaReconnectsMidTransaction: a stock MariaDB replica whose
// connection to the service is cut while it receives a 6 MB transaction
// (the cut placed when its Read_Master_Log_Pos is inside the transaction)
// reconnects on its own and ends equal to the source, with no duplicate
// (error 1593 or a duplicate key) and no error: by file and position,
// and by GTID.
func TestReplicaReconnectsMidTransaction(t *testing.T) {
	inst := sandboxtest.Start(t, "src")
	db := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db, "SET GLOBAL max_allowed_packet = 64*1024*1024")
	start := masterStatus(t, db)
	var startGTID string
	if err := db.QueryRow("SELECT @@gtid_binlog_pos").Scan(&startGTID); err != nil {
		t.Fatal(err)
	}
	l, wait := startRelay(t, inst, filepath.Join(t.TempDir(), "relay"), start)
	wait(start)
	addr, pw := startServe(t, l)
	sandboxtest.MustExec(t, db, "CREATE DATABASE d", "CREATE TABLE d.t (id int primary key, b mediumblob)")
	big := sandboxtest.MustOpen(t, inst, "") // after SET GLOBAL max_allowed_packet

	for i, mode := range []string{"position", "gtid"} {
		t.Run(mode, func(t *testing.T) {
			// A proxy that passes 400 KB/s: the cut falls inside the transaction.
			srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
			proxy := toxiproxy.NewProxy(srv, "cut-"+mode, "127.0.0.1:0", addr)
			if err := proxy.Start(); err != nil {
				t.Fatal(err)
			}
			defer proxy.Stop()
			if _, err := proxy.Toxics.AddToxicJson(strings.NewReader(`{"name":"slow","type":"bandwidth","stream":"downstream","attributes":{"rate":400}}`)); err != nil {
				t.Fatal(err)
			}
			_, port, _ := net.SplitHostPort(proxy.Listen)
			rep := sandboxtest.Start(t, "replica-"+mode)
			rdb := sandboxtest.MustOpen(t, rep, "")
			use := "MASTER_LOG_FILE='" + start.File + "', MASTER_LOG_POS=" + strconv.FormatUint(uint64(start.Pos), 10) + ", MASTER_USE_GTID=no"
			if mode == "gtid" {
				sandboxtest.MustExec(t, rdb, "SET GLOBAL gtid_slave_pos='"+startGTID+"'")
				use = "MASTER_USE_GTID=slave_pos"
			}
			sandboxtest.MustExec(t, rdb, "SET GLOBAL max_allowed_packet = 64*1024*1024", "SET GLOBAL slave_max_allowed_packet = 64*1024*1024",
				"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT="+port+", MASTER_USER='repl', MASTER_PASSWORD='"+pw+"', "+use+", MASTER_CONNECT_RETRY=1",
				"START SLAVE")
			txStart := masterStatus(t, db)
			sandboxtest.MustExec(t, big, "BEGIN")
			for r := 0; r < 6; r++ {
				sandboxtest.MustExec(t, big, fmt.Sprintf("INSERT INTO d.t VALUES (%d, REPEAT('%c', 1024*1024))", i*100+r, 'a'+r))
			}
			sandboxtest.MustExec(t, big, "COMMIT")
			end := masterStatus(t, db)
			wait(end)
			// Cut once the replica has read 1 MB into the transaction.
			var st map[string]string
			sandboxtest.Eventually(t, 2*time.Minute, "the replica 1 MB into the transaction", func() bool {
				st = slaveStatus(t, rdb)
				read, _ := strconv.ParseUint(st["Read_Master_Log_Pos"], 10, 32)
				if st["Master_Log_File"] == txStart.File && read > uint64(txStart.Pos)+1<<20 {
					if read >= uint64(end.Pos) {
						t.Fatalf("the replica read the whole transaction (%d of %s) before the cut", read, end)
					}
					return true
				}
				if st["Last_IO_Error"] != "" {
					t.Fatalf("the replica did not get into the transaction: %v", st)
				}
				return false
			}, func() string { return fmt.Sprint(st) })
			proxy.Stop() // closes the replica's connection in the middle of the transaction
			if err := proxy.Toxics.RemoveToxic(context.Background(), "slow"); err != nil {
				t.Fatal(err)
			}
			if err := proxy.Start(); err != nil {
				t.Fatal(err)
			}
			sandboxtest.MustExec(t, db, fmt.Sprintf("INSERT INTO d.t VALUES (%d, 'after')", i*100+99))
			after := masterStatus(t, db)
			wait(after)
			waitApplied(t, rdb, after) // its reconnect attempts while the proxy was down are no error
			st = slaveStatus(t, rdb)
			// Only the refused connects of the cut may show; a duplicate
			// (1593) or any SQL error may not.
			if st["Slave_IO_Running"] != "Yes" || st["Last_SQL_Errno"] != "0" ||
				st["Last_IO_Errno"] != "0" && !strings.Contains(st["Last_IO_Error"], "error reconnecting to master") {
				t.Fatalf("replica: IO %s %s %q, SQL %s %q", st["Slave_IO_Running"], st["Last_IO_Errno"], st["Last_IO_Error"], st["Last_SQL_Errno"], st["Last_SQL_Error"])
			}
			sameTable(t, db, rdb, "d.t")
		})
	}
}

// sameTable fails unless CHECKSUM TABLE tb is the same, and not NULL, on
// both servers.
func sameTable(t *testing.T, a, b *sql.DB, tb string) {
	t.Helper()
	want, got := sandboxtest.Checksum(t, a, tb), sandboxtest.Checksum(t, b, tb)
	if want == "NULL" || got != want {
		t.Fatalf("CHECKSUM TABLE %s: source %s, replica %s", tb, want, got)
	}
}

// TestSourceRestartWhileServing: the source restarts while the service
// serves a stock replica; the relay reconnects, the writes after the
// restart reach the replica, and it ends equal to the source.
func TestSourceRestartWhileServing(t *testing.T) {
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
		"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT="+port+", MASTER_USER='repl', MASTER_PASSWORD='"+pw+"', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1",
		"START SLAVE")
	sandboxtest.MustExec(t, db, "CREATE DATABASE d", "CREATE TABLE d.t (id int primary key, v varchar(20))", "INSERT INTO d.t VALUES (1, 'before')")
	waitGTID(t, db, rdb, wait)
	if err := inst.Stop(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	sandboxtest.Up(t, inst)
	db2 := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, db2, "INSERT INTO d.t VALUES (2, 'after')", "UPDATE d.t SET v='restarted' WHERE id=1")
	waitGTID(t, db2, rdb, wait)
	sameTable(t, db2, rdb, "d.t")
	if end := masterStatus(t, db2); !l.Has(sluice.Position{File: end.File, Pos: end.Pos}) {
		t.Fatalf("the relay lacks the source's end %s after the restart", end)
	}
}
