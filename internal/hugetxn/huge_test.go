package hugetxn_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sandbox"
)

// rssBudget is the most sluice's resident memory may ever reach (VmHWM)
// while a huge transaction passes through it.
const rssBudget = 300 << 20

// rowSize is the size of one row: a row event each (MariaDB starts a new
// rows event past binlog_row_event_max_size, 8 KiB), many per transaction.
const rowSize = 1 << 20

// rowsPerInsert rows per multi-row INSERT: 16 MiB statements.
const rowsPerInsert = 16

// sizes are the transaction sizes: small enough for `make test` by
// default, the sizes with SLUICE_HUGE=1.
func sizes() []int64 {
	if os.Getenv("SLUICE_HUGE") != "" {
		return []int64{512 << 20, 1 << 30, 2 << 30}
	}
	return []int64{defaultSize}
}

// defaultSize is the transaction of `make test`: 256 MiB took 56 s of
// which about 40 s are fixed (build, two servers, CHECKSUM TABLE) on the
// shared 2-core machine; with 128 MiB the test took 35 s.
const defaultSize = 128 << 20

// serverOpts let a source write and a replica take 1 MiB rows in
// transactions of gigabytes (the binlog cache spills to disk on the
// server; max_binlog_cache_size is unbounded by default but set anyway).
var serverOpts = []string{"max_allowed_packet=64M", "slave_max_allowed_packet=1G",
	"max_binlog_cache_size=8G", "max_binlog_stmt_cache_size=8G", "innodb_log_file_size=512M"}

// TestHugeTransactionThroughServe: single transactions of sizes() bytes
// (16-row INSERTs of 1 MiB rows between BEGIN and COMMIT) pass from a
// MariaDB source through `sluice serve` (the real binary) to a stock
// MariaDB replica connected by GTID. After each, the replica's
// gtid_slave_pos reaches the source's and CHECKSUM TABLE is equal on both;
// sluice's peak RSS (VmHWM of the process) stays under rssBudget.
func TestHugeTransactionThroughServe(t *testing.T) {
	bin := sandboxtest.BuildSluice(t)
	insts := startSandboxes(t, "src", "rep")
	src, rep := insts[0], insts[1]
	db := sandboxtest.MustOpen(t, src, "")
	rdb := sandboxtest.MustOpen(t, rep, "")
	var file string
	var pos uint32
	var a, b any
	if err := db.QueryRow("SHOW MASTER STATUS").Scan(&file, &pos, &a, &b); err != nil {
		t.Fatal(err)
	}
	startGTID := gtidPos(t, db)
	addr := freeAddr(t)
	dir := t.TempDir()
	taskFile := filepath.Join(dir, "serve.yaml")
	yaml := fmt.Sprintf("name: huge\ndir: %s\nsource: {host: 127.0.0.1, port: %d, user: root}\nincremental: {binlog-file: %s, binlog-pos: %d}\n"+
		"serve: {listen: %q, server-id: 4848, users: [{user: repl, password: \"${SERVE_TEST_PW}\"}]}\n", filepath.Join(dir, "state"), src.Port, file, pos, addr)
	if err := os.WriteFile(taskFile, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	const pw = "hug3-pw"
	cmd, out := startServe(t, bin, taskFile, pw)
	waitListening(t, addr, out)
	startReplica(t, rdb, addr, pw, startGTID)
	sandboxtest.MustExec(t, db, "CREATE DATABASE d", "CREATE TABLE d.big (id bigint primary key, b longblob)")
	sdb, err := sql.Open("mysql", fmt.Sprintf("repl:%s@tcp(%s)/", pw, addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sdb.Close() })
	next := int64(0)
	for _, size := range sizes() {
		took := hugeTxn(t, db, "d.big", &next, size)
		t0 := time.Now()
		hops := waitHops(t, db, sdb, rdb, out)
		lag := time.Since(t0)
		equalChecksum(t, db, rdb, "d.big")
		peak := vmHWM(t, cmd.Process.Pid)
		t.Logf("transaction of %d MiB: written in %s, on the replica %s after its commit (%s); sluice peak RSS %d MiB", size>>20, took.Round(time.Millisecond), lag.Round(time.Millisecond), hops, peak>>20)
		if peak >= rssBudget {
			t.Fatalf("sluice's peak RSS is %d MiB after a %d MiB transaction; the budget is %d MiB", peak>>20, size>>20, rssBudget>>20)
		}
	}
}

// TestHugeTransactionThroughGlobalBinlog (SLUICE_HUGE=1 only): the global
// binlog of two sources, one writing one 2 GiB transaction while the other
// writes small ones; the huge one waits in the merge (spilled to disk past
// serve.merge-memory) and the replica of the merged binlog ends equal to
// both sources by CHECKSUM TABLE, with sluice's peak RSS under rssBudget.
func TestHugeTransactionThroughGlobalBinlog(t *testing.T) {
	if os.Getenv("SLUICE_HUGE") == "" {
		t.Skip("set SLUICE_HUGE=1 (docs/manual/huge-transactions.md)")
	}
	bin := sandboxtest.BuildSluice(t)
	insts := startSandboxes(t, "shard1", "shard2", "rep")
	s1, s2, rep := insts[0], insts[1], insts[2]
	db1, db2 := sandboxtest.MustOpen(t, s1, ""), sandboxtest.MustOpen(t, s2, "")
	rdb := sandboxtest.MustOpen(t, rep, "")
	var start []string
	for i, db := range []*sql.DB{db1, db2} {
		if g := gtidPos(t, db); g != "" {
			start = append(start, strconv.Itoa(i+1)+"-"+strings.SplitN(g, "-", 2)[1])
		}
	}
	addr := freeAddr(t)
	dir := t.TempDir()
	taskFile := filepath.Join(dir, "global.yaml")
	yaml := fmt.Sprintf("name: hugeglobal\ndir: %s\nsources:\n"+
		"  - {name: shard1, host: 127.0.0.1, port: %d, user: root, domain-id: 1}\n"+
		"  - {name: shard2, host: 127.0.0.1, port: %d, user: root, domain-id: 2}\n"+
		"serve: {listen: %q, server-id: 4949, users: [{user: repl, password: \"${SERVE_TEST_PW}\"}]}\n",
		filepath.Join(dir, "state"), s1.Port, s2.Port, addr)
	if err := os.WriteFile(taskFile, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	const pw = "hug3-gl0bal"
	cmd, out := startServe(t, bin, taskFile, pw)
	waitListening(t, addr, out)
	startReplica(t, rdb, addr, pw, strings.Join(start, ","))
	sandboxtest.MustExec(t, db1, "CREATE DATABASE sh1", "CREATE TABLE sh1.big (id bigint primary key, b longblob)")
	sandboxtest.MustExec(t, db2, "CREATE DATABASE sh2", "CREATE TABLE sh2.small (id int primary key auto_increment, v varchar(100))")
	size := sizes()[len(sizes())-1]
	// shard2 commits small transactions all along, so the merge holds
	// shard1's huge one until shard2's watermark passes its commit time.
	stop := make(chan struct{})
	smallDone := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				smallDone <- nil
				return
			default:
			}
			if _, err := db2.Exec("INSERT INTO sh2.small (v) VALUES (REPEAT('s', 100))"); err != nil {
				smallDone <- err
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	next := int64(0)
	took := hugeTxn(t, db1, "sh1.big", &next, size)
	close(stop)
	if err := <-smallDone; err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	waitReplicaOf(t, rdb, out, map[int]*sql.DB{1: db1, 2: db2})
	lag := time.Since(t0)
	equalChecksum(t, db1, rdb, "sh1.big")
	equalChecksum(t, db2, rdb, "sh2.small")
	peak := vmHWM(t, cmd.Process.Pid)
	st, _ := os.ReadFile(filepath.Join(dir, "state", "global-status.json"))
	t.Logf("global binlog, transaction of %d MiB on shard1 beside small ones on shard2: written in %s, on the replica %s after its commit; sluice peak RSS %d MiB; status %s",
		size>>20, took.Round(time.Millisecond), lag.Round(time.Millisecond), peak>>20, st)
	if peak >= rssBudget {
		t.Fatalf("sluice's peak RSS is %d MiB; the budget is %d MiB", peak>>20, rssBudget>>20)
	}
	if !strings.Contains(string(st), `"spilled"`) {
		t.Fatalf("the merge spilled nothing (status %s)", st)
	}
}

// hugeTxn commits one transaction of size bytes of rows into table on one
// connection and returns how long it took.
func hugeTxn(t *testing.T, db *sql.DB, table string, next *int64, size int64) time.Duration {
	t.Helper()
	t0 := time.Now()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	for done := int64(0); done < size; done += rowsPerInsert * rowSize {
		// Rows differ (their id leads the blob) so that a row applied to
		// the wrong key would change the checksum.
		q := fmt.Sprintf("INSERT INTO %s SELECT seq + %d, CONCAT(seq + %d, REPEAT(CHAR(65 + (seq + %d) %% 26), %d)) FROM %s.seq_1_to_%d",
			table, *next, *next, *next, rowSize-16, strings.SplitN(table, ".", 2)[0], rowsPerInsert)
		if _, err := tx.ExecContext(ctx, q); err != nil {
			t.Fatalf("insert: %v", err)
		}
		*next += rowsPerInsert
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return time.Since(t0)
}

func gtidPos(t *testing.T, db *sql.DB) string {
	t.Helper()
	var s string
	if err := db.QueryRow("SELECT @@gtid_binlog_pos").Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func startReplica(t *testing.T, rdb *sql.DB, addr, pw, gtid string) {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	sandboxtest.MustExec(t, rdb,
		"SET GLOBAL gtid_slave_pos='"+gtid+"'",
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='%s', MASTER_PORT=%s, MASTER_USER='repl', MASTER_PASSWORD='%s', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1", host, port, pw),
		"START SLAVE")
}

// waitHops waits until the replica's gtid_slave_pos is the source's
// gtid_binlog_pos, and says when each hop had the last transaction, from
// the call: sluice's relay (the service's SHOW MASTER STATUS reaches the
// source's, the relay keeping the source's offsets), the replica's IO
// thread (Gtid_IO_Pos) and its SQL thread (gtid_slave_pos).
func waitHops(t *testing.T, db, sdb, rdb *sql.DB, out *sandboxtest.SyncBuffer) string {
	t.Helper()
	t0 := time.Now()
	want := gtidPos(t, db)
	srcFile, srcPos := masterStatus(t, db)
	var relay, io time.Duration
	waitSlavePos(t, rdb, out, func(got string) bool {
		if relay == 0 {
			if f, p := masterStatus(t, sdb); f == srcFile && p >= srcPos {
				relay = time.Since(t0)
			}
		}
		if io == 0 && slaveStatus(t, rdb)["Gtid_IO_Pos"] == want {
			io = time.Since(t0)
		}
		return got == want
	}, want)
	return fmt.Sprintf("in sluice's relay after %s, received by the replica after %s, applied after %s",
		relay.Round(time.Millisecond), io.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
}

func masterStatus(t *testing.T, db *sql.DB) (string, uint32) {
	t.Helper()
	var file string
	var pos uint32
	var a, b any
	if err := db.QueryRow("SHOW MASTER STATUS").Scan(&file, &pos, &a, &b); err != nil {
		t.Fatal(err)
	}
	return file, pos
}

// waitReplicaOf waits until the replica of the global binlog has each
// source's position in the source's domain.
func waitReplicaOf(t *testing.T, rdb *sql.DB, out *sandboxtest.SyncBuffer, srcs map[int]*sql.DB) {
	t.Helper()
	var want []string
	for d, db := range srcs {
		want = append(want, strconv.Itoa(d)+"-"+strings.SplitN(gtidPos(t, db), "-", 2)[1])
	}
	waitSlavePos(t, rdb, out, func(got string) bool {
		for _, w := range want {
			if !strings.Contains(","+got+",", ","+w+",") {
				return false
			}
		}
		return true
	}, strings.Join(want, ","))
}

func waitSlavePos(t *testing.T, rdb *sql.DB, out *sandboxtest.SyncBuffer, ok func(string) bool, want string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Minute)
	for {
		var got string
		if err := rdb.QueryRow("SELECT @@gtid_slave_pos").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if ok(got) {
			return
		}
		st := slaveStatus(t, rdb)
		if e := st["Last_SQL_Error"] + st["Last_IO_Error"]; e != "" && st["Slave_SQL_Running"] != "Yes" {
			t.Fatalf("replica stopped: %s\nsluice: %s", e, tail(out.String()))
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica at %q, not %q, after 15 minutes (IO %s %s, SQL %s %s)\nsluice: %s", got, want,
				st["Slave_IO_Running"], st["Last_IO_Error"], st["Slave_SQL_Running"], st["Last_SQL_Error"], tail(out.String()))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func equalChecksum(t *testing.T, db, rdb *sql.DB, table string) {
	t.Helper()
	var n string
	var want, got sql.NullInt64
	if err := db.QueryRow("CHECKSUM TABLE "+table).Scan(&n, &want); err != nil {
		t.Fatal(err)
	}
	if err := rdb.QueryRow("CHECKSUM TABLE "+table).Scan(&n, &got); err != nil {
		t.Fatal(err)
	}
	if !want.Valid || want != got {
		t.Fatalf("CHECKSUM TABLE %s: replica %v, source %v", table, got, want)
	}
}

func slaveStatus(t *testing.T, db *sql.DB) map[string]string { return sandboxtest.SlaveStatus(t, db) }

// startSandboxes starts MariaDB sandboxes with serverOpts at once (each
// takes seconds to initialize).
func startSandboxes(t *testing.T, names ...string) []*sandbox.Instance {
	t.Helper()
	insts := make([]*sandbox.Instance, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inst, stop, err := sandboxtest.New(name, serverOpts...)
			if err != nil {
				errs[i] = err
				return
			}
			insts[i] = inst
			t.Cleanup(stop)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("%v (is mariadb-server installed? run 'make deps')", err)
	}
	return insts
}

// vmHWM is a process's peak resident set size, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// startServe runs `sluice serve --config taskFile`, the users' password in
// the environment.
func startServe(t *testing.T, bin, taskFile, pw string) (*exec.Cmd, *sandboxtest.SyncBuffer) {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--config", taskFile)
	cmd.Env = append(os.Environ(), "SERVE_TEST_PW="+pw)
	out := &sandboxtest.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, out
}

func waitListening(t *testing.T, addr string, out *sandboxtest.SyncBuffer) {
	t.Helper()
	sandboxtest.Eventually(t, time.Minute, "sluice serve listening on "+addr,
		func() bool { return strings.Contains(out.String(), "serving on") },
		func() string { return tail(out.String()) })
}

func freeAddr(t *testing.T) string {
	t.Helper()
	port, err := sandbox.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return "127.0.0.1:" + strconv.Itoa(port)
}

func tail(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > 30 {
		l = l[len(l)-30:]
	}
	return strings.Join(l, "\n")
}
