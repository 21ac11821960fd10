package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-db/sluice/internal/sandboxtest"
)

// TestKafkaSinkTaskFailsOver: a task with a Kafka sink runs on a worker;
// kill -9 of that worker (once events were seen in Kafka) moves it to the
// other, which resumes from the checkpoint in Kafka. A read_committed
// consumer then sees every ledger insert exactly once. The task's metrics
// are on the endpoint of the worker that runs it, labelled by worker and
// task under the replication names: once caught up, the other worker's
// sluice_replication_transactions_total equals the transactions written
// (the count resumes with the checkpoint), the applied position is the
// source's, the lag is 0, and sluice_kafka_transactions_total counts that
// run's Kafka transactions.
func TestKafkaSinkTaskFailsOver(t *testing.T) {
	skipShort(t)
	k := sandboxtest.StartKafka(t)
	h := newHarness(t, 0)
	db := h.prefix + "_k"
	sandboxtest.MustExec(t, h.srcDB, "CREATE DATABASE "+db,
		"CREATE TABLE "+db+".acct (id INT PRIMARY KEY, bal BIGINT NOT NULL, note VARCHAR(64))",
		"CREATE TABLE "+db+".ledger (id BIGINT AUTO_INCREMENT PRIMARY KEY, acct INT NOT NULL, amount INT NOT NULL)",
		"INSERT INTO "+db+".acct SELECT seq, 1000, '' FROM "+db+".seq_0_to_49")
	h.tasks = []string{db}
	var gtid string
	if err := h.srcDB.QueryRow("SELECT @@gtid_binlog_pos").Scan(&gtid); err != nil {
		t.Fatal(err)
	}
	name := db + "_sink"
	yaml := fmt.Sprintf(`name: %s
source: {host: 127.0.0.1, port: %d, user: root}
sink: {kafka: {brokers: [%s], topic-prefix: %s}}
tables: {include: ["%s.*"]}
incremental: {gtid-set: "%s", metrics-addr: ""}
`, name, src.Port, k.Addr(), h.prefix, db, gtid)
	f := filepath.Join(h.dir, "sink.yaml")
	if err := os.WriteFile(f, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	h.sluice("task", "add", "--etcd", etcd.Endpoint(), "--etcd-prefix", "/"+h.prefix, "--config", f)
	h.startWorker("w1", "--metrics-addr", "127.0.0.1:0")
	h.startWorker("w2", "--metrics-addr", "127.0.0.1:0")
	var owner string
	h.waitFor("a worker runs the sink task", 2*time.Minute, func() bool {
		var ok bool
		owner, ok = running(h.owners()[name])
		return ok
	})
	stop := h.load(sandboxtest.Seed(t))
	defer func() {
		if stop != nil {
			stop()
		}
	}()
	topic := h.prefix + "." + db + ".ledger"
	c := newConsumer(t, k.Addr(), topic)
	h.waitFor("events in Kafka", time.Minute, func() bool { return c.count() > 50 })
	h.waitFor(owner+"'s metrics show the sink task running and committing", time.Minute, func() bool {
		s := scrapeSeries(t, h.metricsURL(owner))
		return s.get("sluice_replication_stage", "stage", "running", "task", name, "worker", owner) == 1 &&
			s.get("sluice_kafka_transactions_total", "task", name, "worker", owner) > 0
	})
	tok := h.owners()[name].Token
	h.kill9(owner)
	took := h.waitFor("the sink task moves", 30*time.Second, func() bool {
		ts := h.owners()[name]
		w, ok := running(ts)
		if ok && w != owner && ts.Token > tok {
			owner = w
			return true
		}
		return false
	})
	t.Logf("kill -9; the sink task runs on the other worker %s %s later", owner, took.Round(100*time.Millisecond))
	n := c.count()
	h.waitFor("more events in Kafka", time.Minute, func() bool { return c.count() > n+50 })
	txns := stop()
	stop = nil
	var endFile string
	var endPos uint64
	var ignore any
	if err := h.srcDB.QueryRow("SHOW MASTER STATUS").Scan(&endFile, &endPos, &ignore, &ignore); err != nil {
		t.Fatal(err)
	}
	// One partition: a record doubled by the takeover sits before the
	// last insert, which the consumer has read once this holds.
	h.waitFor("every insert in Kafka", 2*time.Minute, func() bool { return c.inserts() >= txns })
	c.close()
	if got, dup := c.inserts(), c.dups(); got != txns || dup != 0 {
		t.Fatalf("%d source transactions, %d distinct inserts in Kafka, %d doubled", txns, got, dup)
	}
	t.Logf("%d transactions, each insert once in Kafka", txns)

	url := h.metricsURL(owner)
	var s series
	h.waitFor(owner+"'s metrics count every transaction", time.Minute, func() bool {
		s = scrapeSeries(t, url)
		return s.get("sluice_replication_transactions_total", "task", name, "worker", owner) == float64(txns) &&
			s.get("sluice_replication_lag_seconds", "task", name, "worker", owner) == 0
	})
	get := func(metric string, kv ...string) float64 {
		return s.get(metric, append(kv, "task", name, "worker", owner)...)
	}
	if got := get("sluice_replication_binlog_offset", "position", "applied"); got != float64(endPos) {
		t.Errorf("applied binlog offset %v, the source is at %s:%d", got, endFile, endPos)
	}
	if got := get("sluice_replication_binlog_file_seq", "position", "applied"); got <= 0 || !strings.HasSuffix(endFile, fmt.Sprintf(".%06d", int(got))) {
		t.Errorf("applied binlog file seq %v, the source is in %s", got, endFile)
	}
	kt, rows := get("sluice_kafka_transactions_total"), get("sluice_replication_rows_total")
	// Every source transaction here changes at least three rows (two
	// updates and an insert); this run committed some of them, in at least
	// one Kafka transaction each holding one or more.
	if kt < 1 || kt > float64(txns) || rows < 3*kt || get("sluice_replication_events_total") < rows {
		t.Errorf("%d source transactions; this run: %v Kafka transactions, %v change events, %v binlog events",
			txns, kt, rows, get("sluice_replication_events_total"))
	}
	if get("sluice_replication_stage", "stage", "running") != 1 || get("sluice_errors_total", "class", "kafka_fenced") != 0 || get("sluice_relay_size", "unit", "files") < 1 {
		t.Errorf("the sink task's stage, error or relay series are missing or wrong on %s:\n%s", owner, strings.Join(s.lines, "\n"))
	}
	// The dashboard's Kafka queries name series the sink task exports
	// (replicate's TestPrometheusScrapesTheDashboard runs the rest against Prometheus).
	dash, err := os.ReadFile("../deploy/grafana/sluice-replication.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`sluice_kafka_[a-z_]+`).FindAllString(string(dash), -1) {
		if !s.has(m, "task", name) {
			t.Errorf("the dashboard names %s, which the sink task does not export", m)
		}
	}
	t.Logf("%s: transactions_total %d, kafka_transactions_total %v, rows_total %v", owner, txns, kt, rows)
}

// consumer reads a topic read_committed from the start and counts the
// ledger rows' create events by id.
type consumer struct {
	cl     *kgo.Client
	once   sync.Once
	cancel context.CancelFunc
	done   chan struct{}
	n      atomic.Int64
	seen   map[int64]int
	ins    atomic.Int64
	dup    atomic.Int64
}

func newConsumer(t *testing.T, addr, topic string) *consumer {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &consumer{cl: cl, cancel: cancel, done: make(chan struct{}), seen: map[int64]int{}}
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				c.n.Add(1)
				var ev struct {
					Op    string `json:"op"`
					After *struct {
						ID int64 `json:"id"`
					} `json:"after"`
				}
				if json.Unmarshal(r.Value, &ev) != nil || ev.Op != "c" || ev.After == nil {
					return
				}
				c.seen[ev.After.ID]++
				if c.seen[ev.After.ID] == 1 {
					c.ins.Add(1)
				} else {
					c.dup.Add(1)
				}
			})
		}
	}()
	t.Cleanup(c.close)
	return c
}

func (c *consumer) count() int64   { return c.n.Load() }
func (c *consumer) inserts() int64 { return c.ins.Load() }
func (c *consumer) dups() int64    { return c.dup.Load() }

func (c *consumer) close() {
	c.once.Do(func() {
		c.cancel()
		<-c.done
		c.cl.Close()
	})
}
