package serve_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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
	bin := filepath.Join(t.TempDir(), "sluice")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/sluice-db/sluice/cmd/sluice").CombinedOutput(); err != nil {
		t.Fatalf("build sluice: %v: %s", err, out)
	}
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
	run := func() (*exec.Cmd, *sandboxtest.SyncBuffer) {
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
	// until runs mariadb-binlog through the service until check accepts
	// its output.
	until := func(out *sandboxtest.SyncBuffer, what string, check func(string) bool) string {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			got, err := remoteBinlog(t, addr, "repl", pw, start.File, start.Pos)
			if err == nil && check(got) {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not seen within a minute (last error %v)\nservice: %s\nmariadb-binlog: %s", what, err, tail(out.String()), tail(got))
			}
			time.Sleep(100 * time.Millisecond)
		}
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
