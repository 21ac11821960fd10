package cluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-db/sluice"
)

// Lagger is what a Runnable may add for the worker's metrics.
type Lagger interface{ LagSeconds() float64 }

// metrics are the worker's Prometheus metrics, every one labelled by
// worker, so that one dashboard over all workers shows where each task
// runs and how far behind it is.
type metrics struct {
	reg       *prometheus.Registry
	tasks     prometheus.Gauge
	lag       *prometheus.GaugeVec
	starts    *prometheus.CounterVec
	leaseLost prometheus.Counter

	srv  *http.Server
	done chan struct{}
}

func newMetrics(worker string) *metrics {
	l := prometheus.Labels{"worker": worker}
	m := &metrics{
		reg: prometheus.NewRegistry(),
		tasks: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_worker_tasks", ConstLabels: l,
			Help: "Tasks this worker runs now."}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_worker_task_lag_seconds", ConstLabels: l,
			Help: "Replication lag of each task this worker runs."}, []string{"task"}),
		starts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_worker_task_starts_total", ConstLabels: l,
			Help: "Times this worker started a task (takeovers, moves, retries)."}, []string{"task"}),
		leaseLost: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_worker_lease_lost_total", ConstLabels: l,
			Help: "Times this worker stopped every task because its etcd lease may have been lost."}),
		done: make(chan struct{}),
	}
	m.reg.MustRegister(m.tasks, m.lag, m.starts, m.leaseLost)
	return m
}

// serve listens on addr until close; it returns the address bound.
func (m *metrics) serve(addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", &sluice.Error{Op: "worker metrics", Err: fmt.Errorf("%w: listen on %s: %v", sluice.ErrConfig, addr, err),
			Hint: "pass --metrics-addr with a free loopback address such as 127.0.0.1:9360, or 127.0.0.1:0 for any port"}
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(m.done)
		_ = m.srv.Serve(ln)
	}()
	return ln.Addr().String(), nil
}

func (m *metrics) close() {
	if m.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = m.srv.Shutdown(ctx)
	<-m.done
}
