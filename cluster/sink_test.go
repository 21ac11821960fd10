package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
// consumer then sees every ledger insert exactly once.
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
	h.startWorker("w1")
	h.startWorker("w2")
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
	tok := h.owners()[name].Token
	h.kill9(owner)
	took := h.waitFor("the sink task moves", 30*time.Second, func() bool {
		ts := h.owners()[name]
		w, ok := running(ts)
		return ok && w != owner && ts.Token > tok
	})
	t.Logf("kill -9 of %s; the sink task runs on the other worker %s later", owner, took.Round(100*time.Millisecond))
	n := c.count()
	h.waitFor("more events in Kafka", time.Minute, func() bool { return c.count() > n+50 })
	txns := stop()
	stop = nil
	// One partition: a record doubled by the takeover sits before the
	// last insert, which the consumer has read once this holds.
	h.waitFor("every insert in Kafka", 2*time.Minute, func() bool { return c.inserts() >= txns })
	c.close()
	if got, dup := c.inserts(), c.dups(); got != txns || dup != 0 {
		t.Fatalf("%d source transactions, %d distinct inserts in Kafka, %d doubled", txns, got, dup)
	}
	t.Logf("%d transactions, each insert once in Kafka", txns)
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
