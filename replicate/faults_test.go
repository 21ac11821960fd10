package replicate_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
	"github.com/sluice-db/sluice/sandbox"
)

func newProxy(t *testing.T, name string, inst *sandbox.Instance) (*toxiproxy.Proxy, sluice.Endpoint) {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, name, "127.0.0.1:0", inst.Endpoint().Addr())
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	host, port, _ := net.SplitHostPort(p.Listen)
	n, _ := strconv.Atoi(port)
	ep := inst.Endpoint()
	ep.Host, ep.Port = host, n
	return p, ep
}

func addToxic(t *testing.T, p *toxiproxy.Proxy, js string) {
	t.Helper()
	if _, err := p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
		t.Fatalf("add toxic %s: %v", js, err)
	}
}

func removeToxic(t *testing.T, p *toxiproxy.Proxy, name string) {
	t.Helper()
	if err := p.Toxics.RemoveToxic(context.Background(), name); err != nil {
		t.Fatalf("remove toxic %s: %v", name, err)
	}
}

// TestFaultsThroughToxiproxy replicates through proxies that add latency,
// cut the connections, stall them and reset them, on the source and on the
// target side, while the source is written to; the target must end equal.
func TestFaultsThroughToxiproxy(t *testing.T) {
	dst := sandboxtest.Start(t, "dstf")
	srcProxy, srcEP := newProxy(t, "src", srcInst)
	dstProxy, dstEP := newProxy(t, "dst", dst)
	src := sandboxtest.MustOpen(t, srcInst, "")
	start := masterStatus(t, src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE tx", "CREATE TABLE tx.t (id int primary key, k int, v varchar(50))",
		"CREATE TABLE tx.nokey (a int, b varchar(50))")
	cfg := taskConfig(t, "tx", srcInst, dst, start)
	cfg.Source, cfg.Target = srcEP, dstEP
	cfg.Binlog.ReadTimeout = 2 * time.Second
	cfg.Decode.Selected = func(r sluice.TableRef) bool { return r.Schema == "tx" }
	cfg.Decode.SchemaSelected = func(s string) bool { return s == "tx" }
	r := run(t, cfg)
	defer r.stop(t)

	ctx, stopLoad := context.WithCancel(context.Background())
	var load sync.WaitGroup
	load.Add(1)
	go func() {
		defer load.Done()
		for i := 0; ctx.Err() == nil; i++ {
			for _, q := range []string{
				fmt.Sprintf("INSERT INTO tx.t (id, k, v) VALUES (%d, %d, 'v%d')", i, i%7, i),
				fmt.Sprintf("INSERT INTO tx.nokey VALUES (%d, 'row %d')", i%5, i),
				fmt.Sprintf("UPDATE tx.t SET k=k+1 WHERE id=%d", i/2),
			} {
				if _, err := src.Exec(q); err != nil {
					t.Errorf("%s: %v", q, err)
					return
				}
			}
			time.Sleep(3 * time.Millisecond)
		}
	}()
	// A fault lasts a while (its length is part of the scenario, not an
	// assertion), and every step ends only once the task has applied what
	// the source had written by then: the next fault hits a live task that
	// has recovered from the last, however slow the machine is.
	step := func(what string, d time.Duration) {
		t.Logf("fault: %s", what)
		time.Sleep(d)
	}
	recovered := func(what string) {
		t.Logf("%s: waiting for the task to catch up", what)
		r.waitApplied(t, masterStatus(t, src))
	}
	step("none", 500*time.Millisecond)
	recovered("none")

	addToxic(t, srcProxy, `{"name":"lat","type":"latency","stream":"downstream","attributes":{"latency":50,"jitter":20}}`)
	addToxic(t, dstProxy, `{"name":"lat","type":"latency","stream":"upstream","attributes":{"latency":20}}`)
	step("latency 50 ms from the source, 20 ms to the target", 2*time.Second)
	removeToxic(t, srcProxy, "lat")
	removeToxic(t, dstProxy, "lat")
	recovered("after it")

	srcProxy.Stop()
	step("source connection dropped", time.Second)
	if err := srcProxy.Start(); err != nil {
		t.Fatal(err)
	}
	step("source back", time.Second)
	recovered("after it")

	addToxic(t, srcProxy, `{"name":"stall","type":"timeout","stream":"downstream","attributes":{"timeout":1500}}`)
	step("source stalled, closed after 1.5 s", 2*time.Second)
	removeToxic(t, srcProxy, "stall")
	step("source back", time.Second)
	recovered("after it")

	dstProxy.Stop()
	step("target connections dropped", time.Second)
	if err := dstProxy.Start(); err != nil {
		t.Fatal(err)
	}
	step("target back", time.Second)
	recovered("after it")

	addToxic(t, dstProxy, `{"name":"reset","type":"reset_peer","stream":"upstream","attributes":{"timeout":200}}`)
	step("target connections reset", time.Second)
	removeToxic(t, dstProxy, "reset")
	recovered("after it")

	stopLoad()
	load.Wait()
	st := r.waitApplied(t, masterStatus(t, src))
	t.Logf("status: reconnects %d, applier restarts %d, txns %d", st.Reconnects, st.Restarts, st.Txns)
	if st.Reconnects < 2 || st.Restarts < 1 {
		t.Fatalf("faults did not hit the task: %+v", st)
	}
	sameData(t, srcInst, dst, "tx")
}

// TestSourceRestart stops and restarts the source in the middle of a run:
// the reader reconnects, the relay follows the source into its new binlog
// file, and nothing is lost.
func TestSourceRestart(t *testing.T) {
	src := sandboxtest.MustOpen(t, srcInst, "")
	start := masterStatus(t, src)
	sandboxtest.MustExec(t, src, "CREATE DATABASE sr", "CREATE TABLE sr.t (id int primary key, k int, v varchar(50))",
		"CREATE TABLE sr.nokey (a int, b varchar(50))")
	cfg := taskConfig(t, "sr", srcInst, dstInst, start)
	cfg.Decode.Selected = func(r sluice.TableRef) bool { return r.Schema == "sr" }
	cfg.Decode.SchemaSelected = func(s string) bool { return s == "sr" }
	r := run(t, cfg)
	defer r.stop(t)
	workload(t, src, "sr", 1, 30)
	before := masterStatus(t, src)
	// Stop the source only once the task is replicating: a source that is
	// gone while the task starts (checks, start position, schema seed) is a
	// start-up error, reported as one, not the restart this test is about.
	r.waitApplied(t, before)
	if err := srcInst.Stop(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	sandboxtest.Up(t, srcInst)
	src2 := sandboxtest.MustOpen(t, srcInst, "")
	workload(t, src2, "sr", 100, 30)
	end := masterStatus(t, src2)
	if end.File == before.File {
		t.Fatalf("the restart did not start a new binlog file (%s)", end.File)
	}
	st := r.waitApplied(t, end)
	if st.Reconnects < 1 {
		t.Fatalf("no reconnect recorded: %+v", st)
	}
	sameData(t, srcInst, dstInst, "sr")
}
