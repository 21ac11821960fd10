package serve_test

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sandbox"
)

// TestServeCommandSurvivesKill9: `sluice serve --config F` (a task file with
// serve: and no target:) serves the source's binlog from the task's start;
// killed with SIGKILL once a client has read through it, and restarted
// while the source goes on writing (a rotation included), it continues the
// relay where its complete data ended, and mariadb-binlog through it then
// prints exactly what it prints reading the source.
func TestServeCommandSurvivesKill9(t *testing.T) {
	bin := sandboxtest.BuildSluice(t)
	inst := sandboxtest.Start(t, "src")
	db := sandboxtest.MustOpen(t, inst, "")
	start := masterStatus(t, db)
	sandboxtest.MustExec(t, db,
		"CREATE DATABASE d",
		"CREATE TABLE d.t (id int primary key, v varchar(200))",
		"INSERT INTO d.t VALUES (1,'before-kill')",
	)
	port, err := sandbox.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	dir := t.TempDir()
	taskFile := filepath.Join(dir, "serve.yaml")
	yaml := fmt.Sprintf(`name: bls
source: {host: 127.0.0.1, port: %d, user: root}
incremental: {binlog-file: %s, binlog-pos: %d}
serve:
  listen: %s
  server-id: 4242
  users: [{user: repl, password: "${SERVE_TEST_PW}"}]
`, inst.Port, start.File, start.Pos, addr)
	if err := os.WriteFile(taskFile, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	const pw = "s3rve-pw"
	run := func() (*exec.Cmd, *sandboxtest.SyncBuffer) { return startServeCmd(t, bin, taskFile, pw) }
	// until runs mariadb-binlog through the service until check accepts
	// its output.
	until := func(out *sandboxtest.SyncBuffer, what string, check func(string) bool) string {
		t.Helper()
		var got string
		var err error
		sandboxtest.Eventually(t, time.Minute, what, func() bool {
			got, err = remoteBinlog(t, addr, "repl", pw, start.File, start.Pos)
			return err == nil && check(got)
		}, func() string {
			return fmt.Sprintf("last error %v\nservice: %s\nmariadb-binlog: %s", err, tail(out.String()), tail(got))
		})
		return got
	}
	cmd, out := run()
	until(out, "the first row through the service", func(s string) bool { return strings.Contains(s, "before-kill") })
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if ps, _ := exec.Command("ps", "-eo", "args").Output(); strings.Contains(string(ps), pw) {
		t.Fatal("the password is on a command line")
	}
	sandboxtest.MustExec(t, db,
		"INSERT INTO d.t VALUES (2,'after-kill')",
		"FLUSH BINARY LOGS",
		"INSERT INTO d.t SELECT seq+10, REPEAT('w', 150) FROM d.seq_1_to_200",
		"UPDATE d.t SET v='updated' WHERE id > 100",
	)
	direct, err := remoteBinlog(t, "127.0.0.1:"+strconv.Itoa(inst.Port), "root", "", start.File, start.Pos)
	if err != nil {
		t.Fatalf("mariadb-binlog on the source: %v\n%s", err, tail(direct))
	}
	_, out = run()
	served := until(out, "the source's binlog, whole, through the restarted service", func(s string) bool { return normalize(s) == normalize(direct) })
	if !strings.Contains(served, "after-kill") || strings.Count(served, "@2='before-kill'") != 1 {
		t.Fatalf("rows before and after the kill, once each:\n%s", tail(served))
	}
}

// TestTwoReplicasSurviveKill9OfServe: two stock MariaDB replicas read
// through `sluice serve`; it is killed with SIGKILL once both have applied
// the first writes, the source writes on (a rotation included) while it is
// down, and after the restart both replicas reconnect on their own
// (MASTER_CONNECT_RETRY) and end equal to the source by CHECKSUM TABLE.
func TestTwoReplicasSurviveKill9OfServe(t *testing.T) {
	bin := sandboxtest.BuildSluice(t)
	inst := sandboxtest.Start(t, "src")
	db := sandboxtest.MustOpen(t, inst, "")
	start := masterStatus(t, db)
	port, err := sandbox.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	taskFile := filepath.Join(t.TempDir(), "serve.yaml")
	yaml := fmt.Sprintf("name: bls2\nsource: {host: 127.0.0.1, port: %d, user: root}\nincremental: {binlog-file: %s, binlog-pos: %d}\n"+
		"serve: {listen: \"127.0.0.1:%d\", server-id: 4343, users: [{user: repl, password: \"${SERVE_TEST_PW}\"}]}\n", inst.Port, start.File, start.Pos, port)
	if err := os.WriteFile(taskFile, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	const pw = "tw0-replicas"
	run := func() *exec.Cmd { cmd, _ := startServeCmd(t, bin, taskFile, pw); return cmd }
	cmd := run()
	var reps []*sql.DB
	for _, name := range []string{"r1", "r2"} {
		r := sandboxtest.MustOpen(t, sandboxtest.Start(t, name), "")
		sandboxtest.MustExec(t, r, fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=%d, MASTER_USER='repl', MASTER_PASSWORD='%s', "+
			"MASTER_LOG_FILE='%s', MASTER_LOG_POS=%d, MASTER_USE_GTID=no, MASTER_CONNECT_RETRY=1", port, pw, start.File, start.Pos), "START SLAVE")
		reps = append(reps, r)
	}
	sandboxtest.MustExec(t, db,
		"CREATE DATABASE d",
		"CREATE TABLE d.t (id int primary key, v varchar(100))",
		"INSERT INTO d.t SELECT seq, 'first' FROM d.seq_1_to_200",
	)
	first := masterStatus(t, db)
	for _, r := range reps {
		waitApplied(t, r, first)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	sandboxtest.MustExec(t, db,
		"UPDATE d.t SET v='second' WHERE id % 2 = 0",
		"FLUSH BINARY LOGS",
		"INSERT INTO d.t SELECT seq+500, 'third' FROM d.seq_1_to_100",
	)
	run()
	end := masterStatus(t, db)
	var want [2]any
	if err := db.QueryRow("CHECKSUM TABLE d.t").Scan(&want[0], &want[1]); err != nil {
		t.Fatal(err)
	}
	for i, r := range reps {
		waitApplied(t, r, end)
		var got [2]any
		if err := r.QueryRow("CHECKSUM TABLE d.t").Scan(&got[0], &got[1]); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got[1]) != fmt.Sprint(want[1]) {
			t.Fatalf("replica %d: CHECKSUM TABLE %v, source %v", i+1, got[1], want[1])
		}
	}
}

// waitApplied waits until a replica executed up to pos or past it; the
// replica's own reconnects (the service down for a while) are not errors.
func waitApplied(t *testing.T, r *sql.DB, pos sluice.Position) {
	t.Helper()
	var st map[string]string
	sandboxtest.Eventually(t, 2*time.Minute, fmt.Sprintf("replica applied up to %s", pos), func() bool {
		st = slaveStatus(t, r)
		exec, _ := strconv.ParseUint(st["Exec_Master_Log_Pos"], 10, 32)
		if f := st["Relay_Master_Log_File"]; f > pos.File || f == pos.File && uint32(exec) >= pos.Pos {
			return true
		}
		if e := st["Last_SQL_Error"]; e != "" {
			t.Fatalf("replica SQL error: %s", e)
		}
		return false
	}, func() string {
		return fmt.Sprintf("replica at %s:%s (IO %s: %s)", st["Relay_Master_Log_File"], st["Exec_Master_Log_Pos"], st["Slave_IO_Running"], st["Last_IO_Error"])
	})
}

// startServeCmd runs `sluice serve --config taskFile`, the users' password
// in $SERVE_TEST_PW (the environment, not the command line).
func startServeCmd(t *testing.T, bin, taskFile, pw string) (*exec.Cmd, *sandboxtest.SyncBuffer) {
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
