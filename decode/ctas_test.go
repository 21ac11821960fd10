package decode_test

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/replicate"
)

// TestCreateSelectExactlyOnce is the regression test for issue 13 bug 6:
// CREATE TABLE ... SELECT, which MariaDB logs as a CREATE TABLE followed by
// the rows in one GTID group, is replicated (the CREATE used to be dropped
// and the task then failed on the unknown table). sluice is killed with
// SIGKILL once the target's checkpoint stands at the CREATE of a large
// keyless CTAS table, before its rows commit; the restart must apply the
// rows exactly once: a doubled or lost row shows in the comparison.
func TestCreateSelectExactlyOnce(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "sluice")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/sluice-db/sluice/cmd/sluice").CombinedOutput(); err != nil {
		t.Fatalf("build sluice: %v: %s", err, out)
	}
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	start := masterStatus(t, src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE ct",
		// A keyed one with MariaDB types, values ending in zero bytes.
		"CREATE TABLE ct.k (id INT PRIMARY KEY, u UUID, i INET4) SELECT seq AS id, CONCAT('123e4567-e89b-12d3-a456-', LPAD(HEX(seq * 256), 12, '0')) AS u, CONCAT(seq, '.0.0.0') AS i FROM ct.seq_1_to_50",
		// No rows: the group holds the CREATE and a COMMIT.
		"CREATE TABLE ct.empty SELECT * FROM ct.k WHERE 0",
		// Large and keyless: a row applied twice would be an extra row.
		"CREATE TABLE ct.big SELECT seq AS a, CONCAT('row ', seq) AS b, IF(seq % 3 = 0, NULL, seq * 2) AS c FROM ct.seq_1_to_300000",
		"INSERT INTO ct.big VALUES (1, 'after', NULL)",
		"UPDATE ct.k SET u = NULL WHERE id = 3",
		"INSERT INTO ct.empty SELECT * FROM ct.k WHERE id < 5",
		// Inside a row transaction a temporary table still changes nothing
		// on the target, and rows selected from it do.
		"CREATE TEMPORARY TABLE ct.tmp (a INT)",
		"INSERT INTO ct.tmp VALUES (7), (8)",
		"INSERT INTO ct.big SELECT a, 'from tmp', a FROM ct.tmp",
	)
	end := masterStatus(t, src)
	ddlEnd := createEventEnd(t, src, end.File, "CREATE TABLE `ct`.`big`")

	dir := t.TempDir()
	stateDir := filepath.Join(dir, "state")
	taskFile := filepath.Join(dir, "task.yaml")
	yaml := fmt.Sprintf(`name: ctas
source: {host: 127.0.0.1, port: %d, user: root, password: ""}
target: {host: 127.0.0.1, port: %d, user: root, password: ""}
tables: {include: ["ct.*"]}
dir: %s
incremental:
  binlog-file: %s
  binlog-pos: %d
  worker-count: 4
  batch: 20
  metrics-addr: "127.0.0.1:0"
`, srcInst.Port, dstInst.Port, stateDir, start.File, start.Pos)
	if err := os.WriteFile(taskFile, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "sluice.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	run := func() (*exec.Cmd, chan error) {
		cmd := exec.Command(bin, "migrate", "--config", taskFile, "--mode", "incremental")
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		return cmd, exited
	}
	logTail := func() string { b, _ := os.ReadFile(logPath); return string(b) }

	// Run 1: kill once the CREATE of ct.big is checkpointed.
	cmd, exited := run()
	for at := false; !at; {
		var n int
		err := dst.QueryRow("SELECT COUNT(*) FROM sluice_meta.apply_checkpoint WHERE task = 'ctas' AND binlog_file = ? AND binlog_pos = ?", end.File, ddlEnd).Scan(&n)
		at = err == nil && n > 0
		if at {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("sluice exited before the CREATE of ct.big was applied (%v); log:\n%s", err, logTail())
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	var rows int
	if err := dst.QueryRow("SELECT COUNT(*) FROM ct.big").Scan(&rows); err != nil {
		t.Fatalf("ct.big after the kill: %v", err)
	}
	if rows != 0 {
		t.Fatalf("the kill came after ct.big's rows committed (%d rows): it did not land between the CREATE and its rows", rows)
	}

	// Run 2: resumes inside the CTAS group, catches up, stops cleanly.
	cmd, exited = run()
	for {
		s, err := replicate.ReadStatus(stateDir)
		if err == nil && s.PID == cmd.Process.Pid && after(s.Applied, end) {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("sluice exited early (%v); log:\n%s", err, logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Fatalf("sluice after SIGTERM: %v; log:\n%s", err, logTail())
	}
	sameTables(t, "ct", "k", "empty", "big")
	var tmp int
	if err := dst.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'ct' AND TABLE_NAME = 'tmp'").Scan(&tmp); err != nil || tmp != 0 {
		t.Errorf("the temporary table reached the target (%d, %v)", tmp, err)
	}
	if t.Failed() {
		t.Logf("log:\n%s", logTail())
	}
}

// createEventEnd is the end position of the Query event in file whose text
// contains text.
func createEventEnd(t *testing.T, db *sql.DB, file, prefix string) uint32 {
	t.Helper()
	rows, err := db.Query("SHOW BINLOG EVENTS IN '" + file + "'")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var logName, typ, info string
		var pos, serverID, endPos uint64
		if err := rows.Scan(&logName, &pos, &typ, &serverID, &endPos, &info); err != nil {
			t.Fatal(err)
		}
		n++
		if typ == "Query" && strings.Contains(info, prefix) {
			return uint32(endPos)
		}
	}
	t.Fatalf("no %q event in %s (%d events)", prefix, file, n)
	return 0
}
