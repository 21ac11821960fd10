package serve_test

import (
	"context"
	"database/sql"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestGoMySQLSyncerFollowsTheService: go-mysql's BinlogSyncer, a blocking
// dump as CDC tools make it, gets through the service the same events at
// the same positions as from the source, and, once it has caught up,
// heartbeats that carry the current file and position.
func TestGoMySQLSyncerFollowsTheService(t *testing.T) {
	inst := sandboxtest.Start(t, "src")
	db := sandboxtest.MustOpen(t, inst, "")
	start := masterStatus(t, db)
	sandboxtest.MustExec(t, db,
		"CREATE DATABASE d",
		"CREATE TABLE d.t (id int primary key, v varchar(20))",
		"INSERT INTO d.t VALUES (1,'a'),(2,'b')",
		"FLUSH BINARY LOGS",
	)
	// MariaDB writes the new file's Binlog_checkpoint on its own once the
	// old file's commits are durable, possibly after the UPDATE: then it
	// lay past the end taken below, where the service (read until its
	// heartbeat) had it and the source (read to the end) did not.
	waitCheckpoint(t, db, masterStatus(t, db).File)
	sandboxtest.MustExec(t, db, "UPDATE d.t SET v='c'")
	end := masterStatus(t, db)
	l, wait := startRelay(t, inst, filepath.Join(t.TempDir(), "relay"), start)
	wait(end)
	addr, pw := startServe(t, l)

	read := func(hostport, user, password string, heartbeat time.Duration) (evs []string, hb *replication.BinlogEvent) {
		t.Helper()
		host, port, _ := net.SplitHostPort(hostport)
		p, _ := strconv.Atoi(port)
		s := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{ServerID: 7001, Flavor: "mariadb", Host: host,
			Port: uint16(p), User: user, Password: password, HeartbeatPeriod: heartbeat})
		defer s.Close()
		st, err := s.StartSync(mysql.Position{Name: start.File, Pos: start.Pos})
		file := start.File
		if err != nil {
			t.Fatalf("%s: %v", hostport, err)
		}
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			ev, err := st.GetEvent(ctx)
			cancel()
			if err != nil {
				t.Fatalf("%s: after %d events %v: %v (end %s)", hostport, len(evs), evs, err, end)
			}
			h := ev.Header
			if h.EventType == replication.HEARTBEAT_EVENT {
				return evs, ev
			}
			evs = append(evs, h.EventType.String()+"@"+strconv.FormatUint(uint64(h.LogPos), 10))
			// The last event may be an XID or the Binlog_checkpoint that
			// MariaDB writes after it on its own.
			if re, ok := ev.Event.(*replication.RotateEvent); ok {
				file = string(re.NextLogName)
			} else if file == end.File && h.LogPos >= end.Pos && heartbeat == 0 {
				return evs, nil
			}
		}
	}
	direct, _ := read("127.0.0.1:"+strconv.Itoa(inst.Port), "root", "", 0)
	served, hb := read(addr, "repl", pw, 500*time.Millisecond)
	if len(served) != len(direct) {
		t.Fatalf("%d events through the service, %d from the source:\nserved %v\nsource %v", len(served), len(direct), served, direct)
	}
	for i := range direct {
		if served[i] != direct[i] {
			t.Fatalf("event %d: served %s, source %s", i, served[i], direct[i])
		}
	}
	he, ok := hb.Event.(*replication.HeartbeatEvent)
	if !ok || hb.Header.LogPos != end.Pos || he.Filename != end.File {
		t.Fatalf("heartbeat %#v at log_pos %d, want %s", hb.Event, hb.Header.LogPos, end)
	}
}

// waitCheckpoint waits until file holds the Binlog_checkpoint that names
// it.
func waitCheckpoint(t *testing.T, db *sql.DB, file string) {
	t.Helper()
	sandboxtest.Eventually(t, time.Minute, "a Binlog_checkpoint in "+file, func() bool {
		var n int
		rows, err := db.Query("SHOW BINLOG EVENTS IN '" + file + "'")
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		vals := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			// The one written when the file opened names the file
			// before it; the one that matters names this file.
			if string(vals[2]) == "Binlog_checkpoint" && strings.Contains(string(vals[5]), file) {
				n++
			}
		}
		rows.Close()
		return n > 0
	})
}
