package e2e_test

import (
	"context"
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
	bin := sandboxtest.BuildSluice(t)
	for _, order := range []string{"source", "relaxed"} {
		t.Run(order, func(t *testing.T) { createSelectScenario(t, bin, "ct_"+order, order) })
	}
}

func createSelectScenario(t *testing.T, bin, db, order string) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	dst := sandboxtest.MustOpen(t, dstInst, "")
	start := masterStatus(t, src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE "+db,
		// A keyed one with MariaDB types, values ending in zero bytes.
		"CREATE TABLE "+db+".k (id INT PRIMARY KEY, u UUID, i INET4) SELECT seq AS id, CONCAT('123e4567-e89b-12d3-a456-', LPAD(HEX(seq * 256), 12, '0')) AS u, CONCAT(seq, '.0.0.0') AS i FROM "+db+".seq_1_to_50",
		// No rows: the group holds the CREATE and a COMMIT.
		"CREATE TABLE "+db+".empty SELECT * FROM "+db+".k WHERE 0",
		// Large and keyless: a row applied twice would be an extra row.
		"CREATE TABLE "+db+".big SELECT seq AS a, CONCAT('row ', seq) AS b, IF(seq % 3 = 0, NULL, seq * 2) AS c FROM "+db+".seq_1_to_300000",
		"INSERT INTO "+db+".big VALUES (1, 'after', NULL)",
		"UPDATE "+db+".k SET u = NULL WHERE id = 3",
		"INSERT INTO "+db+".empty SELECT * FROM "+db+".k WHERE id < 5",
	)
	// A temporary table (one session's) still changes nothing on the
	// target, and rows selected from it do.
	conn, err := src.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"CREATE TEMPORARY TABLE " + db + ".tmp (a INT)", "INSERT INTO " + db + ".tmp VALUES (7), (8)",
		"INSERT INTO " + db + ".big SELECT a, 'from tmp', a FROM " + db + ".tmp", "DROP TEMPORARY TABLE " + db + ".tmp"} {
		if _, err := conn.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	conn.Close()
	end := masterStatus(t, src)
	ddlEnd := createEventEnd(t, src, end.File, "CREATE TABLE `"+db+"`.`big`")

	dir := t.TempDir()
	stateDir := filepath.Join(dir, "state")
	taskFile := filepath.Join(dir, "task.yaml")
	yaml := fmt.Sprintf(`name: %s
source: {host: 127.0.0.1, port: %d, user: root, password: ""}
target: {host: 127.0.0.1, port: %d, user: root, password: ""}
tables: {include: ["%s.*"]}
dir: %s
incremental:
  binlog-file: %s
  binlog-pos: %d
  commit-order: %s
  worker-count: 4
  batch: 20
  metrics-addr: "127.0.0.1:0"
`, db, srcInst.Port, dstInst.Port, db, stateDir, start.File, start.Pos, order)
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

	// Run 1: kill once the CREATE of "+db+".big is checkpointed.
	cmd, exited := run()
	for at := false; !at; {
		var n int
		err := dst.QueryRow("SELECT COUNT(*) FROM sluice_meta.apply_checkpoint WHERE task = ? AND binlog_file = ? AND binlog_pos = ?", db, end.File, ddlEnd).Scan(&n)
		at = err == nil && n > 0
		if at {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("sluice exited before the CREATE of "+db+".big was applied (%v); log:\n%s", err, logTail())
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	var rows int
	if err := dst.QueryRow("SELECT COUNT(*) FROM " + db + ".big").Scan(&rows); err != nil {
		t.Fatalf("%s.big after the kill: %v", db, err)
	}
	if rows != 0 {
		t.Fatalf("the kill came after "+db+".big's rows committed (%d rows): it did not land between the CREATE and its rows", rows)
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
	sameTables(t, db, "k", "empty", "big")
	var tmp int
	if err := dst.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'tmp'", db).Scan(&tmp); err != nil || tmp != 0 {
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
