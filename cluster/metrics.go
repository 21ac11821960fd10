package cluster

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-db/sluice/internal/metricshttp"
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

	http *metricshttp.Server
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
	}
	m.reg.MustRegister(m.tasks, m.lag, m.starts, m.leaseLost)
	return m
}

// serve starts the HTTP endpoint; it returns the bound address.
func (m *metrics) serve(addr string) (string, error) {
	srv, err := metricshttp.Serve(m.reg, addr, "worker metrics", "pass --metrics-addr with a free loopback address such as 127.0.0.1:9360, or 127.0.0.1:0 for any port")
	if err != nil {
		return "", err
	}
	m.http = srv
	return srv.Addr, nil
}

func (m *metrics) close() { m.http.Close() }
