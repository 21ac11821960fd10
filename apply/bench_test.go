package apply_test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/sluice-db/sluice"
	"github.com/sluice-db/sluice/internal/sandboxtest"
)

func sysbench(b *testing.B, port int, args ...string) {
	b.Helper()
	base := []string{"--db-driver=mysql", "--mysql-host=127.0.0.1", "--mysql-port=" + strconv.Itoa(port), "--mysql-user=root", "--mysql-db=sbtest", "--tables=4", "--table-size=100000"}
	cmd := exec.Command("sysbench", append(base, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("sysbench %v: %v: %s", args, err, out)
	}
}

// BenchmarkSysbenchBacklog measures how fast the applier drains a sysbench
// backlog from the binlog (reader and decoder in the same process, as in
// sluice): oltp_write_only and oltp_insert, 8 workers, batch 100. Run with
// -benchtime=1x under flock /tmp/sluice-bench.lock; it reports txn/s.
func BenchmarkSysbenchBacklog(b *testing.B) {
	if _, err := exec.LookPath("sysbench"); err != nil {
		b.Skip("sysbench not installed")
	}
	src := sandboxtest.MustOpen(b, srcInst, "")
	dst := sandboxtest.MustOpen(b, dstInst, "")
	sandboxtest.MustExec(b, dst, "DROP DATABASE IF EXISTS sbtest")
	sandboxtest.MustExec(b, src, "DROP DATABASE IF EXISTS sbtest")
	task := fmt.Sprintf("bench%d", time.Now().UnixNano())
	seed(b, task, src)
	sandboxtest.MustExec(b, src, "CREATE DATABASE sbtest")
	sysbench(b, srcInst.Port, "oltp_common", "prepare")
	ctx := context.Background()
	if _, err := replicate(ctx, srcInst, runOpts{task: task, workers: 8, until: sourcePos(b, src)}); err != nil {
		b.Fatal(err)
	}
	for _, wl := range []struct {
		name   string
		events int
	}{{"oltp_write_only", 30000}, {"oltp_insert", 60000}} {
		b.Run(wl.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				sysbench(b, srcInst.Port, wl.name, "run", "--threads=8", "--time=0", "--events="+strconv.Itoa(wl.events), "--rand-type=uniform")
				until := sourcePos(b, src)
				b.StartTimer()
				start := time.Now()
				st, err := replicate(ctx, srcInst, runOpts{task: task, workers: 8, batch: 100, until: until})
				if err != nil {
					b.Fatal(err)
				}
				el := time.Since(start)
				b.ReportMetric(float64(st.Txns)/el.Seconds(), "txn/s")
				b.ReportMetric(float64(st.Txns)/float64(st.Commits), "txn/commit")
				b.ReportMetric(float64(st.MaxInFlight), "max-inflight")
				b.ReportMetric(float64(st.Conflicts), "conflict-waits")
			}
		})
	}
}

// BenchmarkSysbenchLatency drains oltp_write_only backlogs through a proxy
// that adds 20 ms to every round trip to the target (toxiproxy in-process),
// in source commit order and with RelaxedOrder, 16 workers, batch 100, and
// reports txn/s and the grouping figures. Run with -benchtime=1x under
// flock -o /tmp/sluice-bench.lock.
func BenchmarkSysbenchLatency(b *testing.B) {
	if _, err := exec.LookPath("sysbench"); err != nil {
		b.Skip("sysbench not installed")
	}
	src := sandboxtest.MustOpen(b, srcInst, "")
	dst := sandboxtest.MustOpen(b, dstInst, "")
	sandboxtest.MustExec(b, dst, "DROP DATABASE IF EXISTS sbtest")
	sandboxtest.MustExec(b, src, "DROP DATABASE IF EXISTS sbtest")
	task := fmt.Sprintf("benchlat%d", time.Now().UnixNano())
	seed(b, task, src)
	sandboxtest.MustExec(b, src, "CREATE DATABASE sbtest")
	sysbench(b, srcInst.Port, "oltp_common", "prepare")
	ctx := context.Background()
	if _, err := replicate(ctx, srcInst, runOpts{task: task, workers: 16, until: sourcePos(b, src)}); err != nil {
		b.Fatal(err)
	}
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "lat", "127.0.0.1:0", fmt.Sprintf("127.0.0.1:%d", dstInst.Port))
	if err := p.Start(); err != nil {
		b.Fatal(err)
	}
	defer p.Stop()
	if _, err := p.Toxics.AddToxicJson(strings.NewReader(`{"name":"lat","type":"latency","stream":"downstream","attributes":{"latency":20}}`)); err != nil {
		b.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(p.Listen)
	pp, _ := strconv.Atoi(port)
	proxied := sluice.Endpoint{Host: "127.0.0.1", Port: pp, User: "root"}
	for _, v := range []struct {
		name    string
		target  *sluice.Endpoint
		relaxed bool
	}{{"0ms", nil, false}, {"20ms", &proxied, false}, {"20ms-relaxed", &proxied, true}, {"0ms-relaxed", nil, true}} {
		b.Run(v.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				sysbench(b, srcInst.Port, "oltp_write_only", "run", "--threads=8", "--time=0", "--events=30000", "--rand-type=uniform")
				until := sourcePos(b, src)
				b.StartTimer()
				start := time.Now()
				st, err := replicate(ctx, srcInst, runOpts{task: task, workers: 16, batch: 100, relaxed: v.relaxed, target: v.target, until: until})
				if err != nil {
					b.Fatal(err)
				}
				el := time.Since(start)
				b.ReportMetric(float64(st.Txns)/el.Seconds(), "txn/s")
				b.ReportMetric(float64(st.Txns)/float64(st.Commits), "txn/commit")
				b.ReportMetric(float64(st.MaxInFlight), "max-inflight")
				b.ReportMetric(float64(st.Conflicts), "conflict-waits")
				b.ReportMetric(float64(st.OutOfOrder), "out-of-order")
				b.ReportMetric(float64(st.GroupLimit), "group-limit")
			}
		})
	}
}
