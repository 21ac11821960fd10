package e2e_test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-db/sluice/internal/logx"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/task"
)

// TestServeBesideReplication: a task with a target and serve: applies the
// relay log to the target and serves the same relay to a stock MariaDB
// replica, in one process, while sysbench oltp_write_only writes to the
// source. Target and replica end equal to the source by CHECKSUM TABLE.
func TestServeBesideReplication(t *testing.T) {
	if _, err := exec.LookPath("sysbench"); err != nil {
		t.Fatalf("sysbench not installed: %v", err)
	}
	src := sandboxtest.Start(t, "src")
	dst := sandboxtest.Start(t, "dst")
	db := sandboxtest.MustOpen(t, src, "")
	start := masterStatus(t, db)
	sandboxtest.MustExec(t, db, "CREATE DATABASE sb")
	dir := t.TempDir()
	t.Setenv("BESIDE_TEST_PW", "b3side")
	cfg, err := task.Parse([]byte(fmt.Sprintf(`name: beside
source: {host: 127.0.0.1, port: %d, user: root}
target: {host: 127.0.0.1, port: %d, user: root}
tables: {include: ["sb.*"]}
dir: %s
incremental: {binlog-file: %s, binlog-pos: %d, worker-count: 4}
serve: {listen: "127.0.0.1:0", server-id: 4444, users: [{user: repl, password: "${BESIDE_TEST_PW}"}]}
`, src.Port, dst.Port, dir, start.File, start.Pos)))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := replicate.FromTask(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rc.Serve == nil {
		t.Fatal("FromTask dropped serve:")
	}
	addrc := make(chan string, 1)
	rc.ServeReady = func(a string) { addrc <- a }
	log := &sandboxtest.SyncBuffer{}
	rc.Log = logx.New(log, "replicate "+rc.Name)
	tk, err := replicate.New(rc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tk.Run(ctx, nil) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("task: %v", err)
		}
	}()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatalf("task: %v\n%s", err, log.String())
	}
	_, port, _ := net.SplitHostPort(addr)

	rep := sandboxtest.Start(t, "replica")
	rdb := sandboxtest.MustOpen(t, rep, "")
	sandboxtest.MustExec(t, rdb,
		"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT="+port+", MASTER_USER='repl', MASTER_PASSWORD='b3side', "+
			"MASTER_LOG_FILE='"+start.File+"', MASTER_LOG_POS="+strconv.FormatUint(uint64(start.Pos), 10)+", MASTER_USE_GTID=no, MASTER_CONNECT_RETRY=1",
		"START SLAVE")
	sb := func(args ...string) {
		t.Helper()
		base := []string{"oltp_write_only", "--mysql-host=127.0.0.1", fmt.Sprintf("--mysql-port=%d", src.Port),
			"--mysql-user=root", "--mysql-db=sb", "--tables=2", "--table-size=1000", "--db-ps-mode=disable"}
		if out, err := exec.Command("sysbench", append(base, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("sysbench %v: %v: %s", args, err, out)
		}
	}
	sb("prepare")
	sb("--threads=4", "--events=3000", "--time=0", "run")
	end := masterStatus(t, db)
	sandboxtest.WaitReplicaAt(t, rdb, end)
	if st := tk.Status(); st.Serve == nil || len(st.Serve.Replicas) != 1 || st.Serve.Replicas[0].Txns == 0 || st.Serve.Addr != addr {
		t.Fatalf("the task's status does not show the replica's dump: %+v", st.Serve)
	}
	ddb := sandboxtest.MustOpen(t, dst, "")
	for _, tb := range []string{"sb.sbtest1", "sb.sbtest2"} {
		want := sandboxtest.Checksum(t, db, tb)
		if got := sandboxtest.Checksum(t, rdb, tb); got != want {
			t.Fatalf("CHECKSUM TABLE %s: source %s, replica %s", tb, want, got)
		}
		sandboxtest.Eventually(t, 2*time.Minute, fmt.Sprintf("CHECKSUM TABLE %s on the target at the source's %s", tb, want),
			func() bool { return sandboxtest.Checksum(t, ddb, tb) == want }, log.String)
	}
}
