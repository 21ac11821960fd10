package serve_test

import (
	"context"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// A COM_BINLOG_DUMP whose file name is four NUL bytes (what
// python-mysql-replication sends with is_mariadb=True and no GTID start)
// streams from the first file, as MariaDB does: it reads the name as a C
// string. The service answered ERR 1236 with the raw NULs in its message
// (issue 30 F3).
func TestDumpFileNameEndsAtNUL(t *testing.T) {
	inst := sandboxtest.Start(t, "src")
	db := sandboxtest.MustOpen(t, inst, "")
	start := masterStatus(t, db)
	start.Pos = 4 // the relay holds the first file whole, as MariaDB its first binlog
	sandboxtest.MustExec(t, db, "CREATE DATABASE d", "CREATE TABLE d.t (id int primary key)", "INSERT INTO d.t VALUES (1)")
	end := masterStatus(t, db)
	l, wait := startRelay(t, inst, filepath.Join(t.TempDir(), "relay"), start)
	wait(end)
	addr, pw := startServe(t, l)
	host, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	s := replication.NewBinlogSyncer(replication.BinlogSyncerConfig{ServerID: 7101, Flavor: "mariadb", Host: host, Port: uint16(p), User: "repl", Password: pw})
	defer s.Close()
	st, err := s.StartSync(mysql.Position{Name: "\x00\x00\x00\x00", Pos: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ev, err := st.GetEvent(ctx)
	if err != nil {
		t.Fatalf("first event: %v", err)
	}
	rot, ok := ev.Event.(*replication.RotateEvent)
	if !ok || string(rot.NextLogName) != l.Files()[0] {
		t.Fatalf("first event %T %+v, want a Rotate to the first file %q", ev.Event, ev.Event, l.Files()[0])
	}
}
