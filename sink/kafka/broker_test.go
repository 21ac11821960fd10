package kafka_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-db/sluice/internal/logx"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/task"
)

// TestKafkaSinkBrokerRestart kills the broker (SIGKILL) under load once
// the sink has committed to it, keeps it down 30 s (the outage),
// and starts it again. The task, in this process, rides it out (franz-go
// retries, or the sink restarts from the checkpoint in Kafka) without
// stopping, and says in its status and log that it waits for the
// brokers; after the load it catches up, and the events must equal
// mariadb-binlog's row changes, each once, in order.
func TestKafkaSinkBrokerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB and Kafka")
	}
	const down = 30 * time.Second
	began := time.Now()
	seed := sandboxtest.Seed(t)
	// The package's shared broker: it comes back on its port and data,
	// so the tests after this one use it as before (and the package
	// starts one broker fewer).
	k := sandboxtest.StartKafka(t)
	src := sandboxtest.MustOpen(t, srcInst, "")
	const schema = "kb"
	tables := []string{"t1"}
	sandboxtest.MustExec(t, src, "DROP DATABASE IF EXISTS "+schema, "CREATE DATABASE "+schema,
		"CREATE TABLE "+schema+`.t1 (id int PRIMARY KEY, v varchar(200), n int, d decimal(10,2), e enum('a','b','c'), ts timestamp(3) NULL)`)
	start := masterStatus(t, src)
	dir := t.TempDir()
	stateDir := filepath.Join(dir, "state")
	taskFile := filepath.Join(dir, "task.yaml")
	if err := os.WriteFile(taskFile, []byte(sinkTaskYAML(schema, stateDir, k.Addr(), srcInst.Port, start, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	tc, err := task.Load(taskFile)
	if err != nil {
		t.Fatal(err)
	}
	rc, kc, err := replicate.SinkFromTask(tc)
	if err != nil {
		t.Fatal(err)
	}
	rc.RetryMax = 2 * time.Second
	var logBuf syncBuffer
	rc.Log = logx.New(&logBuf, "replicate "+rc.Name)
	st, err := replicate.NewSinkTask(rc, kc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runErr := make(chan error, 1)
	go func() { runErr <- st.Run(ctx, nil) }()

	loadCtx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	var loadErr error
	var load sync.WaitGroup
	load.Add(1)
	go func() {
		defer load.Done()
		loadErr = writeLoad(loadCtx, src, rand.New(rand.NewSource(seed)), schema, tables, 200, 3*time.Millisecond)
	}()
	waitTxns := func(n uint64, what string) {
		sandboxtest.Eventually(t, 3*time.Minute, fmt.Sprintf("seed %d: %s: %d source transactions committed to Kafka", seed, what, n), func() bool {
			select {
			case err := <-runErr:
				t.Fatalf("seed %d: the task stopped: %v; log:\n%s", seed, err, logBuf.String())
			default:
			}
			return st.Status().Txns >= n
		}, func() string { return fmt.Sprintf("%d committed; log:\n%s", st.Status().Txns, logBuf.String()) })
	}
	waitTxns(20, "before the broker dies")
	// DDL under the load: its schema change events must carry the
	// tables as they are after it (Debezium's tableChanges).
	sandboxtest.MustExec(t, src, "ALTER TABLE "+schema+".t1 ADD COLUMN note varchar(10) NULL DEFAULT 'x' COMMENT 'c'",
		"CREATE TABLE "+schema+".t2 (id bigint PRIMARY KEY AUTO_INCREMENT, s set('A','b') NOT NULL)")
	if err := k.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	// The broker is shared: if this test fails while it is down, it
	// comes back for the tests after this one.
	isDown := true
	t.Cleanup(func() {
		if isDown {
			sandboxtest.RestartKafka(t, k)
		}
	})
	// The outage itself is the 30 s (not a wait for progress).
	// Within it the task must say that it waits, and must not stop.
	var said string
	for time.Since(killed) < down {
		select {
		case err := <-runErr:
			t.Fatalf("seed %d: the task stopped while the broker was down: %v; log:\n%s", seed, err, logBuf.String())
		case <-time.After(100 * time.Millisecond):
		}
		if st := st.Status(); said == "" && st.Stage == replicate.StageRetrying && strings.Contains(st.Error, "no answer from brokers") {
			said = st.Error
		}
	}
	if said == "" || !strings.Contains(logBuf.String(), "no answer from brokers") {
		t.Fatalf("seed %d: the broker was down %s and neither the status nor the log said the sink waits for it; log:\n%s", seed, down, logBuf.String())
	}
	restart := time.Now()
	sandboxtest.RestartKafka(t, k)
	isDown = false
	back := time.Now()
	waitTxns(st.Status().Txns+20, "after the broker came back")
	// The status loop notices within a tick that the wait is over.
	sandboxtest.Eventually(t, time.Minute, fmt.Sprintf("seed %d: the log saying the brokers are back", seed),
		func() bool { return strings.Contains(logBuf.String(), "answer again after") }, logBuf.String)
	stopLoad()
	load.Wait()
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	end := masterStatus(t, src)
	sandboxtest.Eventually(t, 3*time.Minute, fmt.Sprintf("seed %d: caught up to %s", seed, end), func() bool { return st.Status().Applied.Compare(end) >= 0 },
		func() string { return fmt.Sprintf("at %s; log:\n%s", st.Status().Applied, logBuf.String()) })
	cancel()
	if err := <-runErr; err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	checkTableChanges(t, consumeAll(t, k.Addr(), []string{schema}), schema)
	events := decodeEvents(t, consumeAll(t, k.Addr(), []string{schema + "." + schema + ".t1"}))
	changes := binlogChanges(t, srcInst, start, schema)
	compareWithBinlog(t, seed, events, changes, schema)
	compareWithTables(t, seed, events, src, schema, tables)
	t.Logf("broker down %s (killed after %s, restarted in %s); status while down: %q; %d events equal to the binlog's row changes; sink restarts %d",
		back.Sub(killed).Round(time.Second), killed.Sub(began).Round(time.Second), back.Sub(restart).Round(time.Second), said, len(events), st.Status().Restarts)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// checkTableChanges finds the schema change events of the ALTER of t1 and
// the CREATE of t2 on the schema change topic and checks their
// tableChanges against the tables' definitions.
func checkTableChanges(t *testing.T, recs []*kgo.Record, db string) {
	t.Helper()
	type column struct {
		Name                   string
		JdbcType               int
		TypeName               string
		Optional               bool
		AutoIncremented        bool
		Comment                *string
		DefaultValueExpression *string
		EnumValues             []string
		Position               int
	}
	type change struct {
		Type  string
		ID    string
		Table struct {
			PrimaryKeyColumnNames []string
			Columns               []column
		}
	}
	found := map[string]change{}
	for _, r := range recs {
		var ev struct {
			DDL          string
			TableChanges []change
		}
		if err := json.Unmarshal(r.Value, &ev); err != nil {
			t.Fatalf("schema change event is not JSON: %v: %s", err, r.Value)
		}
		for _, c := range ev.TableChanges {
			found[c.Type+" "+c.ID] = c
		}
	}
	alter, ok := found[`ALTER "`+db+`"."t1"`]
	if !ok {
		t.Fatalf("no ALTER tableChange of t1 among %d schema change events: %v", len(recs), found)
	}
	cols := alter.Table.Columns
	if n := len(cols); n != 7 || cols[6].Name != "note" || cols[6].Position != 7 || cols[6].JdbcType != 12 || !cols[6].Optional ||
		cols[6].DefaultValueExpression == nil || *cols[6].DefaultValueExpression != "x" || cols[6].Comment == nil || *cols[6].Comment != "c" ||
		cols[0].Name != "id" || cols[0].Optional || len(alter.Table.PrimaryKeyColumnNames) != 1 || cols[4].EnumValues == nil {
		t.Fatalf("ALTER t1: tableChange %+v", alter)
	}
	create, ok := found[`CREATE "`+db+`"."t2"`]
	if !ok {
		t.Fatalf("no CREATE tableChange of t2: %v", found)
	}
	cols = create.Table.Columns
	if len(cols) != 2 || cols[0].JdbcType != -5 || !cols[0].AutoIncremented || cols[1].TypeName != "SET" ||
		strings.Join(cols[1].EnumValues, ",") != "'A','b'" || cols[1].Optional {
		t.Fatalf("CREATE t2: tableChange %+v", create)
	}
}
