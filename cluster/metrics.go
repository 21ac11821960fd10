package cluster

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-db/sluice/internal/metricshttp"
)

// Lagger is what a Runnable may add for the worker's metrics.
type Lagger interface{ LagSeconds() float64 }

// metrics are the worker's Prometheus metrics. Every metric the worker
// process exports goes through one registerer that adds worker="W": its
// own, the process collectors, and the metrics of each task it runs
// (StartFunc's reg, labelled task="T" by the task), so that one dashboard
// over all workers shows where each task runs and how it does.
type metrics struct {
	reg       *prometheus.Registry
	wrapped   prometheus.Registerer // reg, with worker="W"
	tasks     prometheus.Gauge
	lag       *prometheus.GaugeVec
	starts    *prometheus.CounterVec
	leaseLost prometheus.Counter

	http *metricshttp.Server
}

func newMetrics(worker string, process []prometheus.Collector) *metrics {
	reg := prometheus.NewRegistry()
	m := &metrics{
		reg:     reg,
		wrapped: prometheus.WrapRegistererWith(prometheus.Labels{"worker": worker}, reg),
		tasks: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_worker_tasks",
			Help: "Tasks this worker runs now."}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_worker_task_lag_seconds",
			Help: "Replication lag of each task this worker runs."}, []string{"task"}),
		starts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_worker_task_starts_total",
			Help: "Times this worker started a task (takeovers, moves, retries)."}, []string{"task"}),
		leaseLost: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_worker_lease_lost_total",
			Help: "Times this worker stopped every task because its etcd lease may have been lost."}),
	}
	m.wrapped.MustRegister(m.tasks, m.lag, m.starts, m.leaseLost)
	m.wrapped.MustRegister(process...)
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
