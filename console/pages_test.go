package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sluice-db/sluice/cluster"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/replicate"
	"github.com/sluice-db/sluice/serve"
)

// The binlog service page: the replicas of a serve task (from its status)
// and of a --serve metrics address (from sluice_serve_replica_*), and the
// source a global binlog's merge waits for.
func TestConsoleServePage(t *testing.T) {
	root := t.TempDir()
	started := time.Now().Add(-10 * time.Second)
	writeStatus(t, root, "relay1", replicate.Status{Stage: replicate.StageRunning, Serve: &replicate.ServeStatus{Addr: "127.0.0.1:3399",
		Replicas: []serve.DumpStats{{ServerID: 77, Addr: "10.0.0.9:51000", Started: started, File: "mysql-bin.000004", Pos: 1234,
			Events: 1000, Bytes: 100000, Txns: 200, LagSeconds: 1.5, DelayP50Ms: 12, DelayP99Ms: 950}}}})
	gdir := writeStatus(t, root, "global", replicate.Status{Stage: replicate.StageRunning})
	g := replicate.GlobalStatus{Updated: time.Now()}
	g.Merge.GTID, g.Merge.Waiting = "1-1-10,2-2-20", "east"
	b, _ := json.Marshal(g)
	writeFile(t, gdir, replicate.GlobalStatusFile, b)
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `# HELP sluice_serve_replicas dumps
sluice_serve_replicas 1
sluice_serve_replica_events_sent_total{connection="5",server_id="88"} 42
sluice_serve_replica_lag_seconds{connection="5",server_id="88"} 3.25
sluice_serve_replica_binlog_offset{connection="5",server_id="88"} 4096
`)
	}))
	defer metrics.Close()
	_, ts := newTestServer(t, func(c *Config) {
		c.TaskRoots = []string{root}
		c.Serve = []string{strings.TrimPrefix(metrics.URL, "http://")}
	})
	_, body := get(t, http.DefaultClient, ts.URL+"/serve")
	for _, want := range []string{"relay1", "on 127.0.0.1:3399", ">77<", "mysql-bin.000004:1234", "1.5 s", ">12 ms<", ">950 ms<",
		">20<", // 200 transactions in 10 s
		">88<", "3.2 s", ":4096",
		"The merge waits for source <strong>east</strong>"} {
		if !strings.Contains(body, want) {
			t.Errorf("binlog service page lacks %q:\n%s", want, body)
		}
	}
}

// The workers page reads the cluster from etcd as sluice status --etcd.
func TestConsoleWorkersPage(t *testing.T) {
	e := sandboxtest.StartEtcd(t)
	ctx := context.Background()
	st, err := cluster.Open(ctx, cluster.DefaultConfig(e.Endpoint()))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.AddTask(ctx, []byte("name: orders\nsource: {host: 127.0.0.1, port: 3306, user: u, password: p}\ntarget: {host: 127.0.0.1, port: 3307, user: u, password: p}\ntables: {include: [\"app.*\"]}\n")); err != nil {
		t.Fatal(err)
	}
	wi, _ := json.Marshal(cluster.WorkerInfo{Name: "w1", Host: "db7", PID: 4711, Started: time.Now(), Lease: 0x1f})
	pub, _ := json.Marshal(map[string]any{"worker": "w1", "token": 9, "stage": "running", "updated": time.Now(),
		"replicate": replicate.Status{Stage: replicate.StageRunning, LagSeconds: 2.5}})
	for k, v := range map[string]string{"/sluice/workers/w1": string(wi), "/sluice/assign/orders": "w2", "/sluice/status/orders": string(pub)} {
		if _, err := st.Client().Put(ctx, k, v, clientv3.WithPrevKV()); err != nil {
			t.Fatal(err)
		}
	}
	_, ts := newTestServer(t, func(c *Config) { c.Etcd = []string{e.Endpoint()} })
	_, body := get(t, http.DefaultClient, ts.URL+"/workers")
	for _, want := range []string{">w1<", ">db7<", ">4711<", ">1f<", "orders", "w1 -&gt; w2", "2.5 s", `class="moving"`} {
		if !strings.Contains(body, want) {
			t.Errorf("workers page lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "banner") {
		t.Errorf("a banner with etcd up:\n%s", body)
	}
	// The tasks page lists the cluster's tasks with their worker.
	_, body = get(t, http.DefaultClient, ts.URL+"/tasks")
	for _, want := range []string{`data-task="orders"`, "(cluster)", "w1 -&gt; w2", `class="lag num">2.5 s`} {
		if !strings.Contains(body, want) {
			t.Errorf("tasks page lacks %q:\n%s", want, body)
		}
	}
}
