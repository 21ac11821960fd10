package kafka_test

import (
	"context"
	"database/sql"
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

func sinkTaskYAML(name, stateDir, broker string, srcPort int, start sluice.Position, extra string) string {
	return fmt.Sprintf(`name: %s
source: {host: 127.0.0.1, port: %d, user: root, password: ""}
sink:
  kafka: {brokers: [%s], topic-prefix: %s%s}
tables: {include: ["%s.*"]}
dir: %s
incremental:
  binlog-file: %s
  binlog-pos: %d
  relay-sync: commit
  metrics-addr: ""
`, name, srcPort, broker, name, extra, name, stateDir, start.File, start.Pos)
}

// writeLoad runs random transactions (inserts, updates, deletes of 1-5
// rows over the given tables) on db, seeded by rng, until ctx ends and at
// least min transactions ran, and returns the first error.
func writeLoad(ctx context.Context, db *sql.DB, rng *rand.Rand, schema string, tables []string, least int, pause time.Duration) error {
	next := map[string]int{}
	live := map[string][]int{}
	for i := 0; i < least || ctx.Err() == nil; i++ {
		tx, err := db.Begin()
		if err != nil {
			return err
		}
		for j := 0; j < 1+rng.Intn(5); j++ {
			tb := tables[rng.Intn(len(tables))]
			q := schema + "." + tb
			ids := live[tb]
			switch r := rng.Intn(10); {
			case r < 5 || len(ids) < 5:
				next[tb]++
				id := next[tb]
				_, err = tx.Exec("INSERT INTO "+q+" (id, v, n, d, e, ts) VALUES (?, ?, ?, ?, ?, ?)", id, fmt.Sprintf("row %d 'é\"\\", id), rng.Intn(1000),
					fmt.Sprintf("%d.%02d", rng.Intn(100000)-50000, rng.Intn(100)), []string{"a", "b", "c"}[rng.Intn(3)], time.Unix(1700000000+int64(rng.Intn(1e6)), 0).UTC().Format("2006-01-02 15:04:05.000"))
				live[tb] = append(ids, id)
			case r < 8:
				_, err = tx.Exec("UPDATE "+q+" SET n = n + 1, v = CONCAT(v, 'u') WHERE id = ?", ids[rng.Intn(len(ids))])
			default:
				k := rng.Intn(len(ids))
				_, err = tx.Exec("DELETE FROM "+q+" WHERE id = ?", ids[k])
				live[tb] = append(ids[:k:k], ids[k+1:]...)
			}
			if err != nil {
				tx.Rollback()
				return err
			}
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		if pause > 0 {
			time.Sleep(pause)
		}
	}
	return nil
}

func tailFile(p string) string {
	b, _ := os.ReadFile(p)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}

// TestKafkaSinkKill9ExactlyOnce runs the real sluice binary with a Kafka
// sink under a random write load and sysbench oltp_write_only (100 TPS)
// and kills it with SIGKILL several times,
// each kill placed after Kafka's committed offsets of the table topics
// moved on by a random amount since the restart. A last run catches up and
// stops with SIGTERM. Then a read_committed consumer of its own reads
// every topic, and for each table the sequence of (op, id) events must
// equal the sequence of row changes mariadb-binlog decodes from the
// source's binlog: a lost, repeated or reordered event fails it. The rows
// the events leave (the last after image per id) must equal the source
// table, value by value. SLUICE_KAFKA_SOAK=1 makes it 30 kills under a
// longer load (docs/manual/kafka.md).
func TestKafkaSinkKill9ExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB and Kafka")
	}
	kills, txns := 3, 300
	if os.Getenv("SLUICE_KAFKA_SOAK") != "" {
		kills, txns = 30, 3000
	}
	seed := sandboxtest.Seed(t)
	rng := rand.New(rand.NewSource(seed))
	k := sandboxtest.StartKafka(t)
	bin := sandboxtest.BuildSluice(t)
	src := sandboxtest.MustOpen(t, srcInst, "")
	const schema = "kx"
	tables := []string{"t1", "t2"}
	sandboxtest.MustExec(t, src, "DROP DATABASE IF EXISTS "+schema, "CREATE DATABASE "+schema)
	for _, tb := range tables {
		sandboxtest.MustExec(t, src, "CREATE TABLE "+schema+"."+tb+` (id int PRIMARY KEY, v varchar(200), n int, d decimal(10,2), e enum('a','b','c'), ts timestamp(3) NULL)`)
	}
	// sysbench oltp_write_only beside the random load, in the same schema:
	// its tables' events are compared with the binlog too.
	if _, err := exec.LookPath("sysbench"); err != nil {
		t.Fatalf("sysbench not installed: %v", err)
	}
	sb := func(ctx context.Context, args ...string) *exec.Cmd {
		base := []string{"oltp_write_only", "--mysql-host=127.0.0.1", fmt.Sprintf("--mysql-port=%d", srcInst.Port),
			"--mysql-user=root", "--mysql-db=" + schema, "--tables=2", "--table-size=1000", "--db-ps-mode=disable"}
		return exec.CommandContext(ctx, "sysbench", append(base, args...)...)
	}
	if out, err := sb(context.Background(), "prepare").CombinedOutput(); err != nil {
		t.Fatalf("sysbench prepare: %v: %s", err, out)
	}
	start := masterStatus(t, src)
	dir := t.TempDir()
	stateDir := filepath.Join(dir, "state")
	taskFile := filepath.Join(dir, "task.yaml")
	if err := os.WriteFile(taskFile, []byte(sinkTaskYAML(schema, stateDir, k.Addr(), srcInst.Port, start, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	topics := []string{schema + "." + schema + ".t1", schema + "." + schema + ".t2",
		schema + "." + schema + ".sbtest1", schema + "." + schema + ".sbtest2"}

	// Load on the source for the whole crash phase.
	loadCtx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	var loadErr error
	var load sync.WaitGroup
	load.Add(1)
	loadRng := rand.New(rand.NewSource(seed + 1))
	go func() {
		defer load.Done()
		loadErr = writeLoad(loadCtx, src, loadRng, schema, tables, txns, 3*time.Millisecond)
	}()
	// sysbench until the crash phase ends (killed then: a transaction it
	// had open is rolled back and never reaches the binlog).
	sbCtx, stopSB := context.WithCancel(context.Background())
	defer stopSB()
	var sbErr error
	var sbDone sync.WaitGroup
	sbDone.Add(1)
	go func() {
		defer sbDone.Done()
		out, err := sb(sbCtx, "run", "--threads=2", "--time=3600", "--rate=100").CombinedOutput()
		if err != nil && sbCtx.Err() == nil {
			sbErr = fmt.Errorf("sysbench run: %v: %s", err, out)
		}
	}()

	logPath := filepath.Join(dir, "sluice.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	startSluice := func() (*exec.Cmd, chan error) {
		cmd := exec.Command(bin, "migrate", "--config", taskFile, "--mode", "incremental")
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
	committed := func() int64 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ends, err := endOffsets(ctx, admin, topics)
		if err != nil {
			return -1
		}
		var n int64
		for _, ps := range ends {
			for _, o := range ps {
				n += o
			}
		}
		return n
	}
	for i := 0; i < kills; i++ {
		cmd, exited := startSluice()
		// Placed by observed progress: this process must have committed
		// more to Kafka since it started, however slow the machine is.
		from := committed()
		want := from + 20 + int64(rng.Intn(200))
		sandboxtest.Eventually(t, 3*time.Minute, fmt.Sprintf("kill %d (seed %d): %d committed to Kafka", i, seed, want), func() bool {
			select {
			case err := <-exited:
				t.Fatalf("kill %d (seed %d): sluice exited before it was killed (%v); log:\n%s", i, seed, err, tailFile(logPath))
			default:
			}
			return committed() >= want
		}, func() string { return "log:\n" + tailFile(logPath) })
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-exited
	}
	stopLoad()
	load.Wait()
	stopSB()
	sbDone.Wait()
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	if sbErr != nil {
		t.Fatal(sbErr)
	}
	end := masterStatus(t, src)
	cmd, exited := startSluice()
	var st replicate.Status
	var stErr error
	sandboxtest.Eventually(t, 3*time.Minute, fmt.Sprintf("seed %d: the last run at %s", seed, end), func() bool {
		select {
		case err := <-exited:
			t.Fatalf("seed %d: the last run exited (%v); log:\n%s", seed, err, tailFile(logPath))
		default:
		}
		st, stErr = replicate.ReadStatus(stateDir)
		return stErr == nil && st.PID == cmd.Process.Pid && st.Applied.Compare(end) >= 0
	}, func() string {
		return fmt.Sprintf("status %+v, err %v; log:\n%s", st.Applied, stErr, tailFile(logPath))
	})
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := <-exited; err != nil {
		t.Fatalf("seed %d: sluice did not stop cleanly on SIGTERM: %v; log:\n%s", seed, err, tailFile(logPath))
	}

	events := decodeEvents(t, consumeAll(t, k.Addr(), topics))
	changes := binlogChanges(t, srcInst, start, schema)
	compareWithBinlog(t, seed, events, changes, schema)
	compareWithTables(t, seed, events, src, schema, tables)
	sbEvents := 0
	for _, e := range events {
		if strings.Contains(e.Topic, ".sbtest") {
			sbEvents++
		}
	}
	if sbEvents == 0 {
		t.Fatalf("seed %d: no event of sysbench's tables", seed)
	}
	t.Logf("%d kills, %d events (%d of sysbench's) equal to the binlog's %d row changes", kills, len(events), sbEvents, len(changes))
}

// compareWithBinlog checks, table by table, that the events are the
// binlog's row changes, in order, each once.
func compareWithBinlog(t *testing.T, seed int64, events []event, changes []binlogChange, prefix string) {
	t.Helper()
	got := map[string][]string{}
	for _, e := range events {
		tb := strings.TrimPrefix(e.Topic, prefix+".")
		got[tb] = append(got[tb], e.Op+" "+e.id())
		if g, _ := e.Source["gtid"].(string); g == "" {
			t.Fatalf("seed %d: event without source.gtid: %s", seed, e.Raw)
		}
	}
	want := map[string][]string{}
	for _, c := range changes {
		want[c.Table] = append(want[c.Table], c.Op+" "+c.ID)
	}
	if len(want) == 0 {
		t.Fatalf("seed %d: mariadb-binlog shows no row changes", seed)
	}
	for tb, w := range want {
		g := got[tb]
		n := min(len(g), len(w))
		for i := 0; i < n; i++ {
			if g[i] != w[i] {
				t.Fatalf("seed %d: %s event %d is %q, the binlog's change is %q (events %d, binlog changes %d)", seed, tb, i, g[i], w[i], len(g), len(w))
			}
		}
		if len(g) != len(w) {
			t.Fatalf("seed %d: %s has %d events, the binlog %d row changes", seed, tb, len(g), len(w))
		}
	}
	for tb := range got {
		if _, ok := want[tb]; !ok {
			t.Fatalf("seed %d: events for %s, which the binlog does not change", seed, tb)
		}
	}
}

// compareWithTables folds the events into rows (the last after image of
// each id; a delete removes it) and compares them with the source tables.
func compareWithTables(t *testing.T, seed int64, events []event, db *sql.DB, schema string, tables []string) {
	t.Helper()
	for _, tb := range tables {
		topic := schema + "." + schema + "." + tb
		rows := map[string]map[string]any{}
		for _, e := range events {
			if e.Topic != topic {
				continue
			}
			if e.Op == "d" {
				delete(rows, e.id())
			} else {
				rows[e.id()] = e.After
			}
		}
		res, err := db.Query("SELECT id, v, n, d, CAST(e AS char), DATE_FORMAT(ts, '%Y-%m-%dT%H:%i:%s.%fZ') FROM " + schema + "." + tb)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for res.Next() {
			var id, v, num, d, e, ts string
			if err := res.Scan(&id, &v, &num, &d, &e, &ts); err != nil {
				t.Fatal(err)
			}
			n++
			r := rows[id]
			if r == nil {
				t.Fatalf("seed %d: %s id %s is in the source but no event leaves it", seed, tb, id)
			}
			gotTS, _ := r["ts"].(string)
			if text(r["v"]) != v || text(r["n"]) != num || text(r["e"]) != e || decimalText(r["d"], 2) != d || !sameInstant(gotTS, ts) {
				t.Fatalf("seed %d: %s id %s: source (%q %s %s %s %s), events leave %v", seed, tb, id, v, num, d, e, ts, r)
			}
		}
		if err := res.Err(); err != nil {
			t.Fatal(err)
		}
		res.Close()
		if n != len(rows) {
			t.Fatalf("seed %d: %s: %d source rows, the events leave %d", seed, tb, n, len(rows))
		}
	}
}

func sameInstant(a, b string) bool {
	ta, err1 := time.Parse(time.RFC3339Nano, a)
	tb, err2 := time.Parse(time.RFC3339Nano, b)
	return err1 == nil && err2 == nil && ta.Equal(tb)
}
