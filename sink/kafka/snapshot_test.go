package kafka_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/replicate"
)

// TestKafkaSinkSnapshotThenChanges runs `sluice migrate --mode all` with
// a Kafka sink on a table of 20,000 rows under a write load, kills it with
// SIGKILL while the snapshot's transaction is open (its records are on
// the broker, uncommitted: the high watermark moved, the last stable
// offset did not), and runs it again. The snapshot must come once, as op
// "r" events before every change, with no id twice; the changes after it
// must equal mariadb-binlog's row changes from the snapshot's position
// (source.file/pos of the "r" events), and the rows the events leave must
// equal the source table.
func TestKafkaSinkSnapshotThenChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB and Kafka")
	}
	seed := sandboxtest.Seed(t)
	k := sandboxtest.StartKafka(t)
	bin := sandboxtest.BuildSluice(t)
	src := sandboxtest.MustOpen(t, srcInst, "")
	const schema = "ks"
	sandboxtest.MustExec(t, src, "DROP DATABASE IF EXISTS "+schema, "CREATE DATABASE "+schema,
		"CREATE TABLE "+schema+`.t1 (id int PRIMARY KEY, v varchar(200), n int, d decimal(10,2), e enum('a','b','c'), ts timestamp(3) NULL)`,
		"INSERT INTO "+schema+".t1 SELECT 1000000 + seq, CONCAT('pre ', seq), seq % 1000, seq / 7, 1 + seq % 3, FROM_UNIXTIME(1700000000 + seq) FROM "+schema+".seq_1_to_20000")
	dir := t.TempDir()
	stateDir := filepath.Join(dir, "state")
	taskFile := filepath.Join(dir, "task.yaml")
	if err := os.WriteFile(taskFile, []byte(sinkTaskYAML(schema, stateDir, k.Addr(), srcInst.Port, sluice.Position{File: "x", Pos: 4}, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	topic := schema + "." + schema + ".t1"

	loadCtx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	var loadErr error
	var load sync.WaitGroup
	load.Add(1)
	go func() {
		defer load.Done()
		loadErr = writeLoad(loadCtx, src, rand.New(rand.NewSource(seed)), schema, []string{"t1"}, 200, 3*time.Millisecond)
	}()
	logPath := filepath.Join(dir, "sluice.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	startSluice := func() (*exec.Cmd, chan error) {
		cmd := exec.Command(bin, "migrate", "--config", taskFile, "--mode", "all")
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		// A test that fails while it runs leaves no sluice behind.
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		return cmd, exited
	}
	admin, err := kgo.NewClient(kgo.SeedBrokers(k.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ends := func(isolation int8) int64 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e, err := listEnds(ctx, admin, []string{topic}, isolation)
		if err != nil {
			return -1
		}
		return e[topic][0]
	}
	cmd, exited := startSluice()
	midSnapshot := false
	for limit := time.Now().Add(3 * time.Minute); ; {
		hw, lso := ends(0), ends(1)
		if hw > 100 && lso == 0 {
			midSnapshot = true
			break
		}
		if lso > 0 {
			break // the snapshot committed before it was seen open
		}
		if time.Now().After(limit) {
			_ = cmd.Process.Kill()
			t.Fatalf("seed %d: no snapshot records in 3 minutes; log:\n%s", seed, tailFile(logPath))
		}
		select {
		case err := <-exited:
			t.Fatalf("seed %d: sluice exited (%v); log:\n%s", seed, err, tailFile(logPath))
		case <-time.After(5 * time.Millisecond):
		}
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	t.Logf("killed with the snapshot's transaction open: %v", midSnapshot)

	cmd, exited = startSluice()
	sandboxtest.Eventually(t, 3*time.Minute, fmt.Sprintf("seed %d: the second run committed changes", seed), func() bool {
		select {
		case err := <-exited:
			t.Fatalf("seed %d: sluice exited (%v); log:\n%s", seed, err, tailFile(logPath))
		default:
		}
		st, err := replicate.ReadStatus(stateDir)
		return err == nil && st.PID == cmd.Process.Pid && st.Txns > 50
	}, func() string { return "log:\n" + tailFile(logPath) })
	stopLoad()
	load.Wait()
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	end := masterStatus(t, src)
	sandboxtest.Eventually(t, 3*time.Minute, fmt.Sprintf("seed %d: caught up to %s", seed, end), func() bool {
		st, err := replicate.ReadStatus(stateDir)
		return err == nil && st.PID == cmd.Process.Pid && st.Applied.Compare(end) >= 0
	}, func() string { return "log:\n" + tailFile(logPath) })
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := <-exited; err != nil {
		t.Fatalf("seed %d: %v; log:\n%s", seed, err, tailFile(logPath))
	}

	events := decodeEvents(t, consumeAll(t, k.Addr(), []string{topic}))
	var snap sluice.Position
	seen := map[string]bool{}
	var changes []event
	for i, e := range events {
		if e.Op == "r" {
			if len(changes) > 0 {
				t.Fatalf("seed %d: snapshot event %d after %d changes", seed, i, len(changes))
			}
			if seen[e.id()] {
				t.Fatalf("seed %d: snapshot has id %s twice", seed, e.id())
			}
			seen[e.id()] = true
			if e.Source["snapshot"] != "true" || e.Before != nil {
				t.Fatalf("seed %d: snapshot event %s", seed, e.Raw)
			}
			p := sluice.Position{File: fmt.Sprint(e.Source["file"]), Pos: uint32(e.Source["pos"].(float64))}
			if snap.File == "" {
				snap = p
			} else if p != snap {
				t.Fatalf("seed %d: snapshot events at %s and %s", seed, snap, p)
			}
			continue
		}
		changes = append(changes, e)
	}
	if len(seen) < 20000 {
		t.Fatalf("seed %d: %d snapshot events, the table had at least 20000 rows", seed, len(seen))
	}
	compareWithBinlog(t, seed, changes, binlogChanges(t, srcInst, snap, schema), schema)
	for i := range events {
		if events[i].Op == "r" {
			events[i].Op = "c"
		}
	}
	compareWithTables(t, seed, events, src, schema, []string{"t1"})
	if !strings.Contains(tailFile(logPath), "snapshot of") {
		t.Fatalf("no snapshot in the log:\n%s", tailFile(logPath))
	}
	t.Logf("snapshot of %d rows at %s, then %d changes", len(seen), snap, len(changes))
}
