package serve_test

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/binlog"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/relay"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/sandbox"
	"github.com/sluice-db/sluice/serve"
)

func masterStatus(tb testing.TB, db *sql.DB) sluice.Position { return sandboxtest.MasterStatus(tb, db) }

// startRelay copies inst's binlog from start into a new relay in dir
// until the test ends; wait blocks until the relay holds a position.
func startRelay(tb testing.TB, inst *sandbox.Instance, dir string, start sluice.Position) (l *relay.Log, wait func(sluice.Position)) {
	tb.Helper()
	l, err := relay.Open(relay.DefaultConfig(dir))
	if err != nil {
		tb.Fatal(err)
	}
	cfg := binlog.DefaultConfig(inst.Endpoint())
	cfg.Flavor = "mariadb"
	cfg.Heartbeat = 200 * time.Millisecond
	r, err := binlog.NewReader(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	w, err := l.NewWriter()
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.Start(ctx, w.Resume(start)); err != nil {
		cancel()
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx, r) }()
	stopped := false
	tb.Cleanup(func() {
		cancel()
		if !stopped {
			<-done
		}
		r.Close()
		w.Close()
		l.Close()
	})
	return l, func(pos sluice.Position) {
		tb.Helper()
		for l.End().Compare(pos) < 0 {
			select {
			case err := <-done:
				stopped = true
				tb.Fatalf("relay writer stopped at %s before %s: %v", l.End(), pos, err)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}

// startServe serves l on a free loopback port as user sluice.
func startServe(tb testing.TB, l *relay.Log) (addr, password string) {
	tb.Helper()
	password = "pw-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	s, err := serve.New(serve.Config{ServerID: 999, Users: []serve.User{{Name: "repl", Password: password}}}, replicate.ServeLog(l), nil)
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	go s.Serve(ln) //nolint:errcheck // ends with Close
	tb.Cleanup(func() { ln.Close(); s.Close() })
	return ln.Addr().String(), password
}

// remoteBinlog runs mariadb-binlog --read-from-remote-server (no
// --stop-never: a non-blocking dump) and returns its decoded output.
func remoteBinlog(tb testing.TB, addr, user, password, file string, pos uint32) (string, error) {
	tb.Helper()
	host, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("mariadb-binlog", "--read-from-remote-server", "--host", host, "--port", port, "--user", user,
		"--to-last-log", "--start-position", strconv.FormatUint(uint64(pos), 10), "--base64-output=decode-rows", "-vv", file)
	cmd.Env = append(os.Environ(), "MYSQL_PWD="+password) // not on the command line
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestMariadbBinlogReadsTheServedRelay: mariadb-binlog reading the relay
// through sluice serve, across a rotation, prints exactly what it prints
// reading the source's own binlog from the same position; a position the
// relay does not hold and a wrong password get clear errors.
func TestMariadbBinlogReadsTheServedRelay(t *testing.T) {
	if _, err := exec.LookPath("mariadb-binlog"); err != nil {
		t.Fatalf("mariadb-binlog not installed (fix: make deps): %v", err)
	}
	inst := sandboxtest.Start(t, "src")
	db := sandboxtest.MustOpen(t, inst, "")
	start := masterStatus(t, db)
	sandboxtest.MustExec(t, db,
		"CREATE DATABASE d",
		"CREATE TABLE d.t (id int primary key, v varchar(200), b longblob)",
		"INSERT INTO d.t VALUES (1,'one',NULL),(2,'two',NULL)",
		"UPDATE d.t SET v='uno' WHERE id=1",
		"FLUSH BINARY LOGS",
		"DELETE FROM d.t WHERE id=2",
		"INSERT INTO d.t SELECT seq+10, 'big', REPEAT('x', 20000) FROM d.seq_1_to_30",
		"ALTER TABLE d.t ADD COLUMN w int",
		"SET GLOBAL max_allowed_packet = 64*1024*1024",
	)
	// A row event over 16 MiB, which travels as several packets.
	big := sandboxtest.MustOpen(t, inst, "")
	sandboxtest.MustExec(t, big, "INSERT INTO d.t (id, v, b) VALUES (99, 'huge', REPEAT('q', 17*1024*1024))")
	end := masterStatus(t, db)
	l, wait := startRelay(t, inst, filepath.Join(t.TempDir(), "relay"), start)
	wait(end)
	addr, pw := startServe(t, l)

	served, err := remoteBinlog(t, addr, "repl", pw, start.File, start.Pos)
	if err != nil {
		t.Fatalf("mariadb-binlog through sluice serve: %v\n%s", err, tail(served))
	}
	direct, err := remoteBinlog(t, "127.0.0.1:"+strconv.Itoa(inst.Port), "root", "", start.File, start.Pos)
	if err != nil {
		t.Fatalf("mariadb-binlog on the source: %v\n%s", err, tail(direct))
	}
	// The source's dump goes on to the events written after end (none are)
	// and its last file is still open; both are the same bytes otherwise.
	if a, b := normalize(served), normalize(direct); a != b {
		t.Fatalf("outputs differ at line %d:\nserved: %s\nsource: %s", diffLine(a, b), lineAt(a, diffLine(a, b)), lineAt(b, diffLine(a, b)))
	}
	// Both files' events came through: rows before the rotation, rows and
	// DDL after it.
	for _, want := range []string{"### UPDATE `d`.`t`", "### DELETE FROM `d`.`t`", "### INSERT INTO `d`.`t`", "ALTER TABLE d.t ADD COLUMN w int"} {
		if !strings.Contains(served, want) {
			t.Fatalf("the served output lacks %q:\n%s", want, tail(served))
		}
	}

	out, err := remoteBinlog(t, addr, "repl", pw, "no-such-file.000009", 4)
	if err == nil || !strings.Contains(out, "could not find no-such-file.000009:4 in the relay log") {
		t.Fatalf("unknown file: %v\n%s", err, tail(out))
	}
	out, err = remoteBinlog(t, addr, "repl", "wrong", start.File, start.Pos)
	if err == nil || !strings.Contains(out, "Access denied") {
		t.Fatalf("wrong password: %v\n%s", err, tail(out))
	}
}

// normalize drops the lines that differ between two servers serving the
// same bytes: mariadb-binlog's own header, and the server id and in-use
// note of the artificial events.
func normalize(s string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		switch {
		case strings.Contains(line, "Rotate to"), strings.HasPrefix(line, "# at "),
			strings.Contains(line, "ROLLBACK /* added by mysqlbinlog */"),
			strings.HasPrefix(line, "/*!"), strings.HasPrefix(line, "DELIMITER"), strings.HasPrefix(line, "# End of log file"):
			continue
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

func diffLine(a, b string) int {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range la {
		if i >= len(lb) || la[i] != lb[i] {
			return i
		}
	}
	return len(la)
}

func lineAt(s string, i int) string {
	l := strings.Split(s, "\n")
	if i < len(l) {
		return l[i]
	}
	return "<end>"
}

func tail(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > 30 {
		l = l[len(l)-30:]
	}
	return strings.Join(l, "\n")
}

// TestStockReplicaReplicatesThroughServe: a stock MariaDB replica, started
// by file and position on sluice serve, follows the source through the
// relay while the source writes (a rotation and a 2 MB transaction among
// the writes), survives STOP SLAVE / START SLAVE, and ends equal to the
// source by CHECKSUM TABLE.
func TestStockReplicaReplicatesThroughServe(t *testing.T) {
	inst := sandboxtest.Start(t, "src")
	db := sandboxtest.MustOpen(t, inst, "")
	start := masterStatus(t, db)
	l, wait := startRelay(t, inst, filepath.Join(t.TempDir(), "relay"), start)
	wait(start) // the relay holds the start before the replica asks for it
	addr, pw := startServe(t, l)
	_, port, _ := net.SplitHostPort(addr)

	rep := sandboxtest.Start(t, "replica")
	rdb := sandboxtest.MustOpen(t, rep, "")
	sandboxtest.MustExec(t, rdb,
		"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT="+port+", MASTER_USER='repl', MASTER_PASSWORD='"+pw+"', "+
			"MASTER_LOG_FILE='"+start.File+"', MASTER_LOG_POS="+strconv.FormatUint(uint64(start.Pos), 10)+", MASTER_USE_GTID=no, MASTER_CONNECT_RETRY=1",
		"START SLAVE")
	sandboxtest.MustExec(t, db,
		"CREATE DATABASE d",
		"CREATE TABLE d.t (id int primary key, v varchar(200), b longblob)",
		"INSERT INTO d.t SELECT seq, 'row', REPEAT('y', seq) FROM d.seq_1_to_500",
		"UPDATE d.t SET v='upd' WHERE id % 7 = 0",
		"FLUSH BINARY LOGS",
		"DELETE FROM d.t WHERE id % 11 = 0",
	)
	waitReplica(t, rdb, masterStatus(t, db), wait)
	// SHOW SLAVE HOSTS on the service lists the connected replica.
	sdb, err := sql.Open("mysql", "repl:"+pw+"@tcp("+addr+")/")
	if err != nil {
		t.Fatal(err)
	}
	defer sdb.Close()
	var sid, shost, sport, smaster sql.NullString
	var extra [8]sql.NullString // the service's own columns (TestServeCountsWhatItSends)
	dest := []any{&sid, &shost, &sport, &smaster}
	for i := range extra {
		dest = append(dest, &extra[i])
	}
	if err := sdb.QueryRow("SHOW SLAVE HOSTS").Scan(dest...); err != nil || sid.String == "" || smaster.String != "999" {
		t.Fatalf("SHOW SLAVE HOSTS: %v %v %v %v %v", err, sid, shost, sport, smaster)
	}
	sandboxtest.MustExec(t, rdb, "STOP SLAVE")
	sandboxtest.MustExec(t, db,
		"BEGIN",
		"INSERT INTO d.t SELECT seq+1000, 'big', REPEAT('z', 20000) FROM d.seq_1_to_100",
		"COMMIT",
		"ALTER TABLE d.t ADD COLUMN w int DEFAULT 7",
	)
	sandboxtest.MustExec(t, rdb, "START SLAVE")
	end := masterStatus(t, db)
	waitReplica(t, rdb, end, wait)
	var a, b [2]any
	if err := db.QueryRow("CHECKSUM TABLE d.t").Scan(&a[0], &a[1]); err != nil {
		t.Fatal(err)
	}
	if err := rdb.QueryRow("CHECKSUM TABLE d.t").Scan(&b[0], &b[1]); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(a[1]) != fmt.Sprint(b[1]) || a[1] == nil {
		t.Fatalf("CHECKSUM TABLE d.t: source %v, replica %v", a[1], b[1])
	}
}

// waitReplica waits until the relay holds pos and the replica executed
// up to it, failing with the replica's own error if it stops.
func waitReplica(t *testing.T, rdb *sql.DB, pos sluice.Position, wait func(sluice.Position)) {
	t.Helper()
	wait(pos)
	sandboxtest.WaitReplicaAt(t, rdb, pos)
}

func slaveStatus(t *testing.T, db *sql.DB) map[string]string { return sandboxtest.SlaveStatus(t, db) }

// TestStockReplicaByGTID: a stock MariaDB replica with MASTER_USE_GTID=
// slave_pos, its gtid_slave_pos set to the source's at the relay's start,
// follows the source through the service; after STOP SLAVE and more
// writes it reconnects with its GTID state and the service skips what it
// has; it ends equal to the source. A replica whose state is older than
// the served binlog gets ERR 1236 naming the fix.
func TestStockReplicaByGTID(t *testing.T) {
	inst := sandboxtest.Start(t, "src")
	db := sandboxtest.MustOpen(t, inst, "")
	// Transactions before the relay's start, which a replica from scratch lacks.
	sandboxtest.MustExec(t, db, "CREATE DATABASE pre", "CREATE TABLE pre.x (a int)", "INSERT INTO pre.x VALUES (1)")
	start := masterStatus(t, db)
	var startGTID string
	if err := db.QueryRow("SELECT @@gtid_binlog_pos").Scan(&startGTID); err != nil {
		t.Fatal(err)
	}
	start.GTIDSet = startGTID
	t.Logf("the relay starts at %s (GTID %q)", start, startGTID)
	l, wait := startRelay(t, inst, filepath.Join(t.TempDir(), "relay"), start)
	wait(start)
	addr, pw := startServe(t, l)
	_, port, _ := net.SplitHostPort(addr)

	rep := sandboxtest.Start(t, "replica")
	rdb := sandboxtest.MustOpen(t, rep, "")
	sandboxtest.MustExec(t, rdb,
		"SET GLOBAL gtid_slave_pos='"+startGTID+"'",
		"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT="+port+", MASTER_USER='repl', MASTER_PASSWORD='"+pw+"', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1",
		"START SLAVE")
	sandboxtest.MustExec(t, db,
		"CREATE DATABASE d",
		"CREATE TABLE d.t (id int primary key, v varchar(200))",
		"INSERT INTO d.t SELECT seq, 'row' FROM d.seq_1_to_300",
		"FLUSH BINARY LOGS",
		"UPDATE d.t SET v='upd' WHERE id % 3 = 0",
	)
	waitGTID(t, db, rdb, wait)
	sandboxtest.MustExec(t, rdb, "STOP SLAVE")
	sandboxtest.MustExec(t, db,
		"DELETE FROM d.t WHERE id % 5 = 0",
		"INSERT INTO d.t SELECT seq+1000, 'more' FROM d.seq_1_to_50",
	)
	sandboxtest.MustExec(t, rdb, "START SLAVE")
	waitGTID(t, db, rdb, wait)
	var a, b [2]any
	if err := db.QueryRow("CHECKSUM TABLE d.t").Scan(&a[0], &a[1]); err != nil {
		t.Fatal(err)
	}
	if err := rdb.QueryRow("CHECKSUM TABLE d.t").Scan(&b[0], &b[1]); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(a[1]) != fmt.Sprint(b[1]) || a[1] == nil {
		t.Fatalf("CHECKSUM TABLE d.t: source %v, replica %v", a[1], b[1])
	}

	// A replica that lacks transactions from before the relay's start.
	rep2 := sandboxtest.Start(t, "replica2")
	r2 := sandboxtest.MustOpen(t, rep2, "")
	sandboxtest.MustExec(t, r2,
		"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT="+port+", MASTER_USER='repl', MASTER_PASSWORD='"+pw+"', MASTER_USE_GTID=slave_pos",
		"START SLAVE")
	if startGTID == "" {
		t.Fatal("the source has no GTIDs before the relay's start")
	}
	var st map[string]string
	sandboxtest.Eventually(t, time.Minute, "an IO error for a replica older than the served binlog", func() bool {
		st = slaveStatus(t, r2)
		return st["Last_IO_Error"] != ""
	}, func() string { return fmt.Sprint(st) })
	if e := st["Last_IO_Error"]; !strings.Contains(e, "Could not find GTID state requested by slave") || !strings.Contains(e, "fix:") {
		t.Fatalf("IO error: %s", e)
	}
}

// waitGTID waits until the replica's gtid_slave_pos equals the source's
// gtid_binlog_pos.
func waitGTID(t *testing.T, db, rdb *sql.DB, wait func(sluice.Position)) {
	t.Helper()
	wait(masterStatus(t, db))
	var want, got string
	sandboxtest.Eventually(t, 2*time.Minute, "the replica's gtid_slave_pos at the source's gtid_binlog_pos", func() bool {
		if err := db.QueryRow("SELECT @@gtid_binlog_pos").Scan(&want); err != nil {
			t.Fatal(err)
		}
		if err := rdb.QueryRow("SELECT @@gtid_slave_pos").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got == want {
			return true
		}
		st := slaveStatus(t, rdb)
		if st["Last_IO_Error"] != "" || st["Last_SQL_Error"] != "" {
			t.Fatalf("replica stopped: IO %q, SQL %q", st["Last_IO_Error"], st["Last_SQL_Error"])
		}
		return false
	}, func() string { return fmt.Sprintf("replica at %q, source at %q", got, want) })
}
