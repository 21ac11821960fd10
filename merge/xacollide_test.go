package merge_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sandbox"
)

// TestGlobalBinlogXIDCollision: two shards whose applications use the same
// XID. A replica of the merged binlog holds one prepared transaction per
// XID: a second prepare of it fails (XAER_DUPID), and a completion from
// the other shard would end the wrong transaction. So a shard's
// transaction that prepares or completes an XID another shard holds
// prepared waits until that shard's completion is merged. One after the
// other within a second (merged by commit second, so in either order
// before the fix: a stock replica stopped), and at the same time, both
// are merged as a replica can apply them. Two shards whose next
// transactions wait for each other stop the service with one line naming
// the XID, both shards and their GTIDs.
func TestGlobalBinlogXIDCollision(t *testing.T) {
	bin := sandboxtest.BuildSluice(t)
	shards := make([]*sandbox.Instance, 2)
	dbs := make([]*sql.DB, 2)
	for i := range shards {
		shards[i] = sandboxtest.Start(t, fmt.Sprintf("xshard%d", i+1))
		dbs[i] = sandboxtest.MustOpen(t, shards[i], "")
		sandboxtest.MustExec(t, dbs[i], fmt.Sprintf("CREATE DATABASE x%d", i+1), fmt.Sprintf("CREATE TABLE x%d.t (id INT PRIMARY KEY)", i+1))
	}
	port, err := sandbox.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	dir := t.TempDir()
	var srcs strings.Builder
	for i, s := range shards {
		fmt.Fprintf(&srcs, "  - {name: shard%d, host: 127.0.0.1, port: %d, user: root, domain-id: %d}\n", i+1, s.Port, i+1)
	}
	taskFile := filepath.Join(dir, "global.yaml")
	yaml := fmt.Sprintf("name: xglobal\ndir: %s\nsources:\n%sserve: {listen: %q, server-id: 4748, users: [{user: repl, password: \"x-pw\"}]}\n",
		filepath.Join(dir, "state"), srcs.String(), addr)
	if err := os.WriteFile(taskFile, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--config", taskFile)
	out := &sandboxtest.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{}) // closed when the service has exited
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	waitFor(t, out, "serving on", func() bool { return strings.Contains(out.String(), "serving on") })
	svc, err := sql.Open("mysql", "repl:x-pw@tcp("+addr+")/")
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()

	ctx := context.Background()
	row := 0
	xa := func(i int, xid string, end string) *sql.Conn {
		c, err := dbs[i].Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		row++
		stmts := []string{"XA START '" + xid + "'", fmt.Sprintf("INSERT INTO x%d.t VALUES (%d)", i+1, row), "XA END '" + xid + "'", "XA PREPARE '" + xid + "'"}
		if end != "" {
			stmts = append(stmts, end+" '"+xid+"'")
		}
		for _, q := range stmts {
			if _, err := c.ExecContext(ctx, q); err != nil {
				t.Fatalf("shard%d: %s: %v", i+1, q, err)
			}
		}
		return c
	}
	// One after the other: merged.
	xa(0, "same", "XA COMMIT").Close()
	xa(1, "same", "XA ROLLBACK").Close()
	// Both shards' heartbeats carry the merge past them.
	sandboxtest.MustExec(t, dbs[0], "INSERT INTO x1.t VALUES (1000)")
	sandboxtest.MustExec(t, dbs[1], "INSERT INTO x2.t VALUES (1000)")
	waitFor(t, out, "both shards' XA transactions merged", func() bool {
		var s string
		if svc.QueryRow("SELECT @@gtid_binlog_pos").Scan(&s) != nil {
			return false
		}
		n := seqs(t, s)
		return n[1] >= 5 && n[2] >= 5 // CREATE DATABASE, CREATE TABLE, prepare, completion, insert
	})
	select {
	case <-exited:
		t.Fatalf("the service stopped on XIDs used one after the other:\n%s", tail(out.String()))
	default:
	}
	pos := func() map[uint32]uint64 {
		var s string
		if svc.QueryRow("SELECT @@gtid_binlog_pos").Scan(&s) != nil {
			return nil
		}
		return seqs(t, s)
	}
	// At the same time: shard2's prepare (and what follows it) waits until
	// shard1's completion is merged.
	c1 := xa(0, "again", "")
	c2 := xa(1, "again", "")
	defer func() { _, _ = c2.ExecContext(ctx, "XA ROLLBACK 'again'"); c2.Close() }()
	sandboxtest.MustExec(t, dbs[0], "INSERT INTO x1.t VALUES (1001)")
	sandboxtest.MustExec(t, dbs[1], "INSERT INTO x2.t VALUES (1001)")
	waitFor(t, out, "shard1's prepare and insert merged", func() bool { return pos()[1] >= 7 })
	waitFor(t, out, "the merge waiting for shard1", func() bool {
		return strings.Contains(out.String(), "waiting for source shard1 to complete XA transaction X'616761696e',X'',1")
	})
	if n := pos()[2]; n != 5 {
		t.Fatalf("shard2's prepare of an XID that shard1 holds prepared was merged (domain 2 at %d)", n)
	}
	if _, err := c1.ExecContext(ctx, "XA COMMIT 'again'"); err != nil {
		t.Fatal(err)
	}
	c1.Close()
	waitFor(t, out, "shard2's prepare merged after shard1's commit", func() bool { return pos()[2] >= 7 })

	// Each waits for the other: refused.
	p1 := xa(0, "p", "")
	defer func() { _, _ = p1.ExecContext(ctx, "XA ROLLBACK 'p'"); p1.Close() }()
	q2 := xa(1, "q", "")
	defer func() { _, _ = q2.ExecContext(ctx, "XA ROLLBACK 'q'"); q2.Close() }()
	waitFor(t, out, "the first prepares merged", func() bool { n := pos(); return n[1] >= 9 && n[2] >= 8 })
	q1 := xa(0, "q", "")
	defer func() { _, _ = q1.ExecContext(ctx, "XA ROLLBACK 'q'"); q1.Close() }()
	p2 := xa(1, "p", "")
	defer func() { _, _ = p2.ExecContext(ctx, "XA ROLLBACK 'p'"); p2.Close() }()
	select {
	case <-exited:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the service did not stop on XIDs that wait for each other:\n%s", tail(out.String()))
	}
	msg := out.String()
	if !strings.Contains(msg, "the same XA transaction id from two sources") || !strings.Contains(msg, "waits in turn") ||
		!strings.Contains(msg, "(fix: ") {
		t.Fatalf("the service's stop does not name the colliding XIDs and the fix:\n%s", tail(msg))
	}
}
