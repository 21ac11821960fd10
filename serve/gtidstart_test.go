package serve_test

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestGTIDDumpStartsAtTheReplicasFile: a GTID dump starts in the newest
// file whose Gtid_list the replica has (not the relay's first file), skips
// the groups it has in that file, then sends the artificial Gtid_list of
// the binlog state at its position and only newer transactions, as a
// MariaDB primary does (go-mysql's BinlogSyncer as the client).
func TestGTIDDumpStartsAtTheReplicasFile(t *testing.T) {
	inst := sandboxtest.Start(t, "src")
	db := sandboxtest.MustOpen(t, inst, "")
	start := masterStatus(t, db)
	gtidPos := func() string {
		var p string
		if err := db.QueryRow("SELECT @@gtid_binlog_pos").Scan(&p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sandboxtest.MustExec(t, db, "CREATE DATABASE d", "CREATE TABLE d.t (id int primary key)", "FLUSH BINARY LOGS",
		"INSERT INTO d.t VALUES (1)")
	midSecond := gtidPos() // in the second file, one group in
	second := masterStatus(t, db).File
	sandboxtest.MustExec(t, db, "INSERT INTO d.t VALUES (2)")
	headThird := gtidPos() // the third file's Gtid_list
	sandboxtest.MustExec(t, db, "FLUSH BINARY LOGS", "INSERT INTO d.t VALUES (3)")
	third := masterStatus(t, db).File
	last := gtidPos()
	end := masterStatus(t, db)
	l, wait := startRelay(t, inst, filepath.Join(t.TempDir(), "relay"), start)
	wait(end)
	addr, pw := startServe(t, l)
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	// The service's GTID position is the source's at the same end, asked
	// twice (the second from what the first read).
	sdb, err := sql.Open("mysql", "repl:"+pw+"@tcp("+addr+")/")
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	for i := 0; i < 2; i++ {
		var got, name, val string
		if err := sdb.QueryRow("SELECT @@gtid_binlog_pos").Scan(&got); err != nil || got != last {
			t.Fatalf("@@gtid_binlog_pos on the service: %q (%v), the source's %q", got, err, last)
		}
		if err := sdb.QueryRow("SHOW GLOBAL VARIABLES LIKE 'gtid_binlog_pos'").Scan(&name, &val); err != nil || val != last {
			t.Fatalf("SHOW GLOBAL VARIABLES LIKE 'gtid_binlog_pos' on the service: %q (%v), the source's %q", val, err, last)
		}
	}

	for _, c := range []struct {
		name, state, file string
		want              []string // GTIDs sent after the fake Gtid_list
	}{
		{"at the third file's head", headThird, third, []string{last}},
		{"inside the second file", midSecond, second, []string{seqAfter(t, midSecond, 1), last}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{ServerID: 7100, Flavor: "mariadb", Host: host, Port: uint16(p), User: "repl", Password: pw})
			defer s.Close()
			set, err := mysql.ParseMariadbGTIDSet(c.state)
			if err != nil {
				t.Fatal(err)
			}
			st, err := s.StartSyncGTID(set)
			if err != nil {
				t.Fatal(err)
			}
			var gtids []string
			fake := false
			for len(gtids) < len(c.want) {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				ev, err := st.GetEvent(ctx)
				cancel()
				if err != nil {
					t.Fatalf("after GTIDs %v: %v", gtids, err)
				}
				artificial := ev.Header.Flags&replication.LOG_EVENT_ARTIFICIAL_F != 0
				switch e := ev.Event.(type) {
				case *replication.RotateEvent:
					if artificial && ev.Header.Timestamp == 0 && len(gtids) == 0 && string(e.NextLogName) != c.file {
						t.Fatalf("the dump starts in %s, want %s", e.NextLogName, c.file)
					}
				case *replication.MariadbGTIDListEvent:
					if artificial {
						fake = true
						var got []string
						for _, g := range e.GTIDs {
							got = append(got, fmt.Sprintf("%d-%d-%d", g.DomainID, g.ServerID, g.SequenceNumber))
						}
						if len(got) != 1 || got[0] != c.state || len(gtids) != 0 {
							t.Fatalf("fake Gtid_list %v after %v, want [%s] before any transaction", got, gtids, c.state)
						}
					}
				case *replication.MariadbGTIDEvent:
					if !fake {
						t.Fatalf("GTID %s before the fake Gtid_list", e.GTID.String())
					}
					gtids = append(gtids, e.GTID.String())
				}
			}
			if fmt.Sprint(gtids) != fmt.Sprint(c.want) {
				t.Fatalf("GTIDs sent %v, want %v", gtids, c.want)
			}
		})
	}
}

// seqAfter is the GTID n sequence numbers after g (same domain and server).
func seqAfter(t *testing.T, g string, n uint64) string {
	t.Helper()
	var d, s uint32
	var q uint64
	if _, err := fmt.Sscanf(g, "%d-%d-%d", &d, &s, &q); err != nil {
		t.Fatalf("GTID %q: %v", g, err)
	}
	return fmt.Sprintf("%d-%d-%d", d, s, q+n)
}
